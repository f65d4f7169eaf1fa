"""The packages pass `mypy --strict`, configured in pyproject.toml ([tool.mypy]): a type error
fails the suite, as a failing test does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_packages_pass_mypy_strict() -> None:
    # Its cache in .mypy_cache: a run with nothing changed takes about a second, a first ~15 s.
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
