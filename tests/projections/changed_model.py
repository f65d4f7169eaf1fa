"""This version changed as a developer changes it: a column added to a table, or the fold's
meaning changed (its version bumped). Either makes a read model built before it outdated."""

from __future__ import annotations

import pytest

from projections import fold, projector, rows, tables
from projections.rows import SimRow

NOTE = "added by the new version"


class NotedSimRow(SimRow, frozen=True, kw_only=True, gc=False):
    """The sims table with one more column, which the fold fills in for every sim."""

    note: str = NOTE


def add_a_column(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(fold, "SimRow", NotedSimRow)
    patch.setattr(projector, "SimRow", NotedSimRow)
    patch.setitem(rows.ENTITY_TABLES, "sims", NotedSimRow)
    patch.setitem(tables.ROW_TYPES, "sims", NotedSimRow)
    patch.setitem(tables.TABLE_OF, NotedSimRow, "sims")


def bump_the_fold(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(fold, "VERSION", fold.VERSION + 1)


CHANGES = {"a column added": add_a_column, "the fold's version bumped": bump_the_fold}
