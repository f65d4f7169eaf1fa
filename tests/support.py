"""What tests share besides fixtures: where the read-only Accel-Sim material is."""

from __future__ import annotations

import os
from pathlib import Path


def _shared() -> Path:
    """The read-only `shared/` folder beside the checkout (CASCADE_SHARED overrides)."""
    if "CASCADE_SHARED" in os.environ:
        return Path(os.environ["CASCADE_SHARED"])
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "accelsim").is_dir():
            return parent / "shared"
    return Path("/work/shared")


SHARED = _shared()
ACCELSIM = SHARED / "accelsim"
TRACES = ACCELSIM / "traces"
LOGS = ACCELSIM / "logs"
TREE = ACCELSIM / "tree"
