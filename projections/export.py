"""A run's rows as Parquet files in a zip, made as it is sent: what pandas, polars and DuckDB
read as they are, for analyses away from the service.

    runs.parquet          the run's row of `runs`
    sims.parquet          its sims' rows of `sims`
    kernels.parquet       its sims' kernels (their stats maps are the next file)
    kernel_stats.parquet  every value of those maps: sim_id, kernel_index, stat (its name), value (the kernel's
                          own), text, printed_total (a running total or ratio as the log printed it)
    timing.parquet        the real timing its trace uses, one row per kernel and hardware pass

All are read in one transaction, so they agree. Each is written in row groups of `BATCH_ROWS`
straight into the zip as it streams: the server holds one batch at a time, never a file.
kernel_stats is read a part of the kernels at a time, each part sorted on its own, as many
kernels as the read model's memory holds `KERNEL_BYTES` of: sorting a whole run's rows at once
outgrows that budget (or spills to disk, slower than linear), while the parts, in the order of
their kernels, are that same order.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from datetime import datetime

import duckdb
import pyarrow.parquet

from projections.database import memory_limit
from projections.queries.runs import Con, snapshot

BATCH_ROWS = 65536

_CURRENT = "kernels k JOIN sims s ON s.id = k.sim_id AND s.attempt = k.attempt"
KERNEL_BYTES = 2 << 20  # what sorting a kernel's rows of kernel_stats may take, with room to spare

# Each file's query, from the run's id; kernel_stats' from some of its kernels' seqs ($seqs,
# between $first and $last: the scan skips the rows outside by their zone maps).
TABLES = {
    "runs": "SELECT * FROM runs WHERE id = $run",
    "sims": "SELECT * FROM sims WHERE run_id = $run ORDER BY gpu_config, replica",
    "kernels": f"SELECT k.* FROM {_CURRENT} WHERE s.run_id = $run ORDER BY k.sim_id, k.kernel_index",
    "kernel_stats": """SELECT k.sim_id, k.kernel_index, n.name AS stat, v.value, v.text, v.printed_total
        FROM kernel_stats v JOIN kernels k ON k.seq = v.seq JOIN stat_names n ON n.id = v.stat
        WHERE v.seq BETWEEN $first AND $last AND k.seq IN (SELECT unnest($seqs::BIGINT[])) ORDER BY k.sim_id, k.kernel_index, v.stat""",
    "timing": """SELECT r.* FROM trace_real_timing r JOIN traces t ON t.id = r.trace_id AND t.real_timing = r.timing_id
        JOIN runs ON runs.trace_id = t.id WHERE runs.id = $run ORDER BY r.repeat, r.kernel_id""",
}
_KERNEL_SEQS = f"SELECT k.seq FROM {_CURRENT} WHERE s.run_id = $run ORDER BY k.sim_id, k.kernel_index"


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
                yield from _parquet(_readers(con, table, run_id), file, pipe)
            yield pipe.take()
    yield pipe.take()


def _readers(con: Con, table: str, run_id: str) -> Iterator[duckdb.DuckDBPyRelation]:
    """The table's rows for the run, as queries whose answers follow one another."""
    if table != "kernel_stats":
        yield con.sql(TABLES[table], params={"run": run_id})
        return
    seqs = [seq for (seq,) in con.execute(_KERNEL_SEQS, {"run": run_id}).fetchall()]
    at_once = max(1, memory_limit(con) // KERNEL_BYTES)
    for i in range(0, max(len(seqs), 1), at_once):
        part = seqs[i : i + at_once]
        yield con.sql(TABLES[table], params={"seqs": part, "first": min(part, default=0), "last": max(part, default=-1)})


def _parquet(relations: Iterator[duckdb.DuckDBPyRelation], file: object, pipe: Pipe) -> Iterator[bytes]:
    """The answers of `relations` (one at least, their columns alike) as one Parquet file."""
    writer: pyarrow.parquet.ParquetWriter | None = None
    try:
        for relation in relations:
            reader = relation.to_arrow_reader(BATCH_ROWS)
            try:
                writer = writer or pyarrow.parquet.ParquetWriter(file, reader.schema)
                for batch in reader:
                    writer.write_batch(batch)
                    yield pipe.take()
            finally:
                reader.close()  # if the download stopped halfway: the transaction cannot end before it
    finally:
        if writer is not None:
            writer.close()
