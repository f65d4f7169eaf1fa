"""What tests share besides fixtures: where the read-only Accel-Sim material is, and waiting
for something that happens in another process or thread."""

from __future__ import annotations

import gzip

import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from cascade_core import nonfinite


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
# Real Accel-Sim output recorded for the fake simulator beyond the shared logs (its MANIFEST.md)
RECORDED_LOGS = Path(__file__).parent / "fake_accelsim" / "recorded"


def log_text(name: str) -> str:
    """A real log's text: a shared one, else one recorded for the fake (gzipped)."""
    shared = LOGS / name
    return shared.read_text() if shared.is_file() else gzip.decompress((RECORDED_LOGS / f"{name}.gz").read_bytes()).decode()


def stop(process: subprocess.Popen[Any], timeout: float = 15) -> None:
    """End a process a test started: SIGTERM, and SIGKILL if it is still there after `timeout` s."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until(condition: Callable[[], object], timeout: float, message: str = "timed out") -> None:
    """Poll `condition` every 50 ms until it holds; fail with `message` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


def stats_blocks(text: str) -> list[str]:
    """Every stats block of a simulator log, `kernel_name = ...` to the
    `gpgpu_silicon_slowdown` line, read line by line (not the parser's way)."""
    blocks: list[str] = []
    lines: list[str] | None = None
    for line in text.split("\n"):
        if lines is None and line.startswith("kernel_name = "):
            lines = []
        if lines is not None:
            lines.append(line)
            if line.startswith("gpgpu_silicon_slowdown = "):
                blocks.append("\n".join(lines))
                lines = None
    return blocks


def stats_json(stats: Mapping[str, float | str]) -> bytes:
    """A stats map as the API answers it: nan and the infinities as "NaN", "Infinity" and
    "-Infinity" (JSON has no such numbers)."""
    return msgspec.json.encode({name: nonfinite.json_value(v) if isinstance(v, float) else v for name, v in stats.items()})


def same_map(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """The same names in the same order with the same values, a nan equal to a nan."""
    return list(a) == list(b) and all(x == y or (_nan(x) and _nan(y)) for x, y in zip(a.values(), b.values(), strict=True))


def _nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)
