"""Answers as tables: Arrow first (what the API's SQL and export routes answer), then pandas or
polars, which are imported only when asked for, so the client needs neither."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any, Literal

import msgspec
import pyarrow
import pyarrow.ipc

To = Literal["pandas", "polars"]
TO: tuple[To, ...] = ("pandas", "polars")


def frame(table: Any, to: To) -> Any:
    """The Arrow `table` as a pandas or a polars DataFrame."""
    if to == "pandas":
        return table.to_pandas()
    if to == "polars":
        import polars  # here: an optional dependency

        return polars.DataFrame(table)
    raise ValueError(f"to={to!r}: one of {', '.join(TO)}")


def of_rows(rows: Sequence[msgspec.Struct] | Sequence[dict[str, Any]]) -> Any:
    """An Arrow table of JSON answers' rows, a column per field."""
    return pyarrow.Table.from_pylist(msgspec.to_builtins(rows))


def of_stream(stream: IO[bytes]) -> Any:
    """The Arrow table of an Arrow IPC stream, read as it comes."""
    return pyarrow.ipc.open_stream(stream).read_all()
