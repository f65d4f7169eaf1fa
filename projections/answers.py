"""A query's answer, from its Arrow batches, as JSON (an `SqlAnswer`), CSV, an Arrow IPC
stream or Parquet, refused once it passes a number of bytes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet

from cascade_core import nonfinite
from cascade_api.models import SqlAnswer, SqlColumn, SqlFormat

MEDIA_TYPES: dict[SqlFormat, str] = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "arrow": "application/vnd.apache.arrow.stream",
    "parquet": "application/vnd.apache.parquet",
}


class TooLarge(Exception):
    pass


class NoForm(Exception):
    """The answer has a column the format cannot hold."""


def encode(form: SqlFormat, columns: list[SqlColumn], schema: pa.Schema, batches: Iterable[pa.RecordBatch], limit: int) -> bytes:
    if form == "json":
        return _json(columns, schema, batches, limit)
    sink = pa.BufferOutputStream()
    try:
        writer = _WRITERS[form](sink, schema)
        for batch in batches:
            writer.write_batch(batch)
            if sink.tell() > limit:
                raise TooLarge(f"the answer is past {sink.tell():,} bytes")
        writer.close()
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise NoForm(f"{form} cannot hold this answer ({str(err).splitlines()[0]}); ask for json, arrow or parquet") from err
    answer: bytes = sink.getvalue().to_pybytes()  # pyarrow has no types to say so
    return answer


_WRITERS: dict[str, Callable[[pa.BufferOutputStream, pa.Schema], Any]] = {
    "csv": pyarrow.csv.CSVWriter,
    "arrow": pa.ipc.new_stream,
    "parquet": pyarrow.parquet.ParquetWriter,
}


def _text(value: object) -> str:
    return str(value)  # intervals and the like, which JSON has no form for


_encoder = msgspec.json.Encoder(decimal_format="number", enc_hook=_text)
_HOLE = msgspec.Raw(b"\x00")  # stands in for the rows, which are written as they come


def _json(columns: list[SqlColumn], schema: pa.Schema, batches: Iterable[pa.RecordBatch], limit: int) -> bytes:
    head, tail = _encoder.encode(SqlAnswer(columns, _HOLE)).split(b"\x00")  # type: ignore[arg-type]  # a Raw stands in for the rows, encoded as it is
    floats = [i for i, field in enumerate(schema) if pa.types.is_floating(field.type)]
    parts = [head, b"["]
    size = len(head) + len(tail) + 2
    for batch in batches:
        values = [column.to_pylist() for column in batch.columns]
        for i in floats:
            values[i] = list(map(nonfinite.json_value, values[i]))
        rows = _encoder.encode(list(zip(*values)))[1:-1]
        if not rows:
            continue
        if len(parts) > 2:
            parts.append(b",")
        parts.append(rows)
        size += len(rows) + 1
        if size > limit:
            raise TooLarge(f"the answer is past {size:,} bytes")
    parts += [b"]", tail]
    return b"".join(parts)
