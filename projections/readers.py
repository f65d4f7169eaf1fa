"""The connection reads take their cursors from, and moving reads to another one.

A DuckDB connection is not safe to use from two threads at once, and making a cursor uses the
connection it is made from, so cursors come from a connection of their own (never the
projector's while it writes), one at a time. When reads move to another connection, a read in
flight finishes on the one it started on, which is closed once its last cursor is.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import duckdb


class _Source:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.cursors = 0
        self.retired = False

    def close_if_unused(self) -> None:
        if self.retired and self.cursors == 0:
            self.con.close()


class Readers:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._lock = threading.Lock()
        self._source = _Source(con)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for one reading thread, closed on leaving; DuckDB shows it the last
        committed batch."""
        with self._lock:
            source = self._source
            cursor = source.con.cursor()
            source.cursors += 1
        try:
            yield cursor
        finally:
            cursor.close()
            with self._lock:
                source.cursors -= 1
                source.close_if_unused()

    def move_to(self, con: duckdb.DuckDBPyConnection) -> None:
        """Take the cursors of reads from now on from `con`."""
        with self._lock:
            old, self._source = self._source, _Source(con)
            old.retired = True
            old.close_if_unused()

    def close(self) -> None:
        with self._lock:
            self._source.retired = True
            self._source.close_if_unused()
