"""`cascade` as a version whose sims table has one more column (`changed_model.py`), with the
projector's batches kept small, for a rebuild of many batches:

    python -m tests.cascade_http.changed_serve [--kill-at N] serve ...

With `--kill-at N` the process SIGKILLs itself in the middle of its Nth transaction (rows
written, not committed), as a machine that goes down does.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest

from cascade_cli import main as cli
from projections import projector
from projections.fold import Folded
from tests.projections.changed_model import add_a_column


def _killed_at(n: int) -> None:
    real = projector.apply
    transactions = 0

    def kill(where: str) -> None:
        if where == "before_commit":
            os.kill(os.getpid(), signal.SIGKILL)

    def apply(con: Any, items: Any, fault: Any = None, cache: Any = None, **kwargs: Any) -> Folded:
        nonlocal transactions
        transactions += 1
        return real(con, items, kill if transactions == n else fault, cache, **kwargs)

    projector.apply = apply  # this process is the test's changed version


def main(argv: list[str]) -> int:
    add_a_column(pytest.MonkeyPatch())
    projector.MAX_BATCH = 5
    if argv[:1] == ["--kill-at"]:
        _killed_at(int(argv[1]))
        argv = argv[2:]
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
