"""A run's rows as Parquet files in a zip, made as it is sent: what pandas, polars and DuckDB
read as they are, for analyses away from the service.

    runs.parquet          the run's row of `runs`
    sims.parquet          its sims' rows of `sims`
    kernels.parquet       its sims' kernels (their stats maps are the next file)
    kernel_stats.parquet  every value of those maps: sim_id, kernel_index, stat (its name), value (the kernel's
                          own), text, printed_total (a running total or ratio as the log printed it); by
                          sim_id and kernel_index, and a kernel's values in its map's order
    timing.parquet        the real timing its trace uses, one row per kernel and hardware pass

All are read in one transaction, so they agree. Each is written in row groups of `BATCH_ROWS`
straight into the zip as it streams: the server holds one batch at a time, never a file.
kernel_stats is read a part of the kernels at a time, as many kernels as the read model's
memory holds `KERNEL_BYTES` of, as stored: no join and no sort in DuckDB (they took most of
the time: bench/README.md, "The export without a sort"). Its rows come mostly in the order
they were stored, a kernel's together in its map's order; the part's kernels are put in the
run's order (and a kernel's rows in their stored order, where a scan's threads gave them
otherwise), and their seqs and stat ids made names, in Arrow; a part is a row group.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet

from projections import stats_parts
from projections.database import memory_limit
from projections.queries.runs import Con, snapshot

BATCH_ROWS = 65536

_CURRENT = "kernels k JOIN sims s ON s.id = k.sim_id AND s.attempt = k.attempt"
KERNEL_BYTES = 2 << 20  # what sorting a kernel's rows of kernel_stats may take, with room to spare

# Each file's query, from the run's id; kernel_stats' from some of its kernels' seqs ($seqs,
# between $first and $last: the scan skips the rows outside by their zone maps, and {placed}
# reads only the parts with rows between them, `stats_parts.placed_between`).
TABLES = {
    "runs": "SELECT * FROM runs WHERE id = $run",
    "sims": "SELECT * FROM sims WHERE run_id = $run ORDER BY gpu_config, replica",
    "kernels": f"SELECT k.* FROM {_CURRENT} WHERE s.run_id = $run ORDER BY k.sim_id, k.kernel_index",
    "kernel_stats": """SELECT seq, stat, value, text, printed_total, place FROM {placed}
        WHERE seq BETWEEN $first AND $last AND list_contains($seqs, seq)""",
    "timing": """SELECT r.* FROM trace_real_timing r JOIN traces t ON t.id = r.trace_id AND t.real_timing = r.timing_id
        JOIN runs ON runs.trace_id = t.id WHERE runs.id = $run ORDER BY r.repeat, r.kernel_id""",
}
_KERNELS = f"SELECT k.seq, k.sim_id, k.kernel_index FROM {_CURRENT} WHERE s.run_id = $run ORDER BY k.sim_id, k.kernel_index"
_STATS_SCHEMA = pa.schema(
    [("sim_id", pa.string()), ("kernel_index", pa.int64()), ("stat", pa.string()), ("value", pa.float64()), ("text", pa.string()), ("printed_total", pa.float64())]
)


class Pipe:
    """What the zip writes, kept until taken: the zip streams, it never seeks back."""

    def __init__(self) -> None:
        self._pieces: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._pieces.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self._pieces)
        self._pieces.clear()
        return data


def zip_pieces(con: Con, run_id: str, made_at: datetime) -> Iterator[bytes]:
    """The zip of the run's Parquet files, in pieces of about a row group each."""
    pipe = Pipe()
    with snapshot(con), zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_STORED) as archive:
        for table in TABLES:
            member = zipfile.ZipInfo(f"{table}.parquet", date_time=made_at.timetuple()[:6])
            with archive.open(member, "w", force_zip64=True) as file:
                batches = _stats_batches(con, run_id) if table == "kernel_stats" else _batches(con.sql(TABLES[table], params={"run": run_id}))
                yield from _parquet(batches, file, pipe)
            yield pipe.take()
    yield pipe.take()


def _batches(relation: duckdb.DuckDBPyRelation) -> Iterator[pa.RecordBatch]:
    """The relation's answer, `BATCH_ROWS` rows at a time, after an empty batch giving its schema."""
    reader = relation.to_arrow_reader(BATCH_ROWS)
    try:
        yield pa.RecordBatch.from_pylist([], schema=reader.schema)
        yield from reader
    finally:
        reader.close()  # if the download stopped halfway: the transaction cannot end before it


def _stats_batches(con: Con, run_id: str) -> Iterator[pa.RecordBatch]:
    """kernel_stats' rows of the run's kernels as the file has them (`_STATS_SCHEMA`), a part
    of its kernels at a time (a row group each), after an empty batch giving the schema. The
    next part is read while one is written: DuckDB and the Parquet writer each take a core."""
    kernels = con.sql(_KERNELS, params={"run": run_id}).to_arrow_table()
    seqs, sims, indices = (kernels.column(i).combine_chunks() for i in range(3))
    names = pa.array([name for (name,) in con.execute("SELECT name FROM stat_names ORDER BY id").fetchall()], pa.string())  # ids from 1
    yield pa.RecordBatch.from_pylist([], schema=_STATS_SCHEMA)
    at_once = max(1, memory_limit(con) // KERNEL_BYTES)
    starts = range(0, len(seqs), at_once)

    def read(start: int) -> pa.Table:
        part = seqs.slice(start, at_once)
        first, last = pc.min(part).as_py(), pc.max(part).as_py()
        select = TABLES["kernel_stats"].format(placed=stats_parts.placed_between(con, first, last))
        return con.sql(select, params={"seqs": part.to_pylist(), "first": first, "last": last}).to_arrow_table()

    with ThreadPoolExecutor(1) as reader:  # on leaving, the part being read is waited for: the transaction outlives it
        ahead = reader.submit(read, starts[0]) if starts else None
        for i, start in enumerate(starts):
            assert ahead is not None
            rows = ahead.result().combine_chunks()
            ahead = reader.submit(read, starts[i + 1]) if i + 1 < len(starts) else None
            if rows.num_rows:
                yield _named(rows.to_batches()[0], seqs.slice(start, at_once), sims.slice(start, at_once), indices.slice(start, at_once), names)


def _named(batch: pa.RecordBatch, seqs: pa.Array, sims: pa.Array, indices: pa.Array, names: pa.Array) -> pa.RecordBatch:
    """The rows of `batch` in the order of their kernels' `seqs`, each kernel's in the order
    stored (its map's), with their kernel's sim and index for its seq, and their stat's name
    for its id. Sorted only when they did not come so: a scan keeps the stored order within a
    row group, but two threads may give a kernel's rows in the next row group first."""
    rank, place = pc.index_in(batch.column(0), value_set=seqs), batch.column(5)
    if not (_ascending(rank) and _ascending(place)):
        order = pc.sort_indices(pa.table({"rank": rank, "place": place}), sort_keys=[("rank", "ascending"), ("place", "ascending")])
        batch, rank = batch.take(order), rank.take(order)
    stat = names.take(pc.subtract(batch.column(1), 1))
    return pa.RecordBatch.from_arrays([sims.take(rank), indices.take(rank), stat, *batch.columns[2:5]], schema=_STATS_SCHEMA)


def _ascending(values: pa.Array) -> bool:
    return len(values) < 2 or bool(pc.all(pc.greater_equal(values.slice(1), values.slice(0, len(values) - 1))).as_py())


def _parquet(batches: Iterator[pa.RecordBatch], file: object, pipe: Pipe) -> Iterator[bytes]:
    """The batches (the first, empty, giving the schema) as one Parquet file."""
    writer: pyarrow.parquet.ParquetWriter | None = None
    try:
        for batch in batches:
            writer = writer or pyarrow.parquet.ParquetWriter(file, batch.schema)
            if batch.num_rows:
                writer.write_batch(batch)
                yield pipe.take()
    finally:
        if writer is not None:
            writer.close()
