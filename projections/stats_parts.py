"""`kernel_stats` as a small table of the rows written last and Parquet files of the rest.

A kernel's map is 3,815 rows of `kernel_stats` on the bench's blocks, 28.6 KB a kernel in
DuckDB's own storage, whose compression reaches neither across kernels nor past about three
bytes a double; the same rows in Parquet with zstd take about 1.2 KB (bench/README.md,
"kernel_stats as Parquet parts"). So the projector writes a batch's rows into the table
`kernel_stats_hot`, and once that holds `Memory.part_rows` rows (`full`), a transaction after the
batch's moves all of them to a new part: a Parquet file in the read model's parts folder
(`<db>.parts`, beside the file), listed in `stats_parts`. `kernel_stats` is a view over the
table and the parts, made again whenever the list changes; `kernel_stats_placed` adds each
row's place in its kernel's map (a rowid in the table, a row number in a part: a kernel's
rows are all in one or the other, in its map's order).

The whole table moves, not a sim's kernels: a plain scan keeps DuckDB's stored order, where a
join picking one sim's rows gave a kernel's rows back out of order across threads (and
sorting them again cost 1.5 ms a kernel). A part is never changed: rows deleted from one (a
run deleted, an attempt replaced) make a new part of the rest, filtered in Arrow to keep
their order.

A part is named by its bytes' digest, checked when the service starts (`check`), when
every part is read through too: a part changed in places is damage to the read model, made
again from the log, where zstd would often have read it into other values.

A file no part lists any more is deleted when the service next starts (`sweep`), never while
it runs: a read that began before the change may still read it. So are the files of a batch
that failed, and of an older read model whose place a rebuilt one took.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet

HOT = "kernel_stats_hot"
PLACED = "kernel_stats_placed"
TABLES_SQL = (
    """CREATE TABLE IF NOT EXISTS stats_parts (
        file VARCHAR PRIMARY KEY, first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL, row_count BIGINT NOT NULL)""",
    # The folder, as the projector last opened the file: a copy (an SQL child's) or a second
    # name (`rebuild._open_outdated`) reads its parts there.
    "CREATE TABLE IF NOT EXISTS stats_parts_folder (path VARCHAR NOT NULL)",
)
COLUMNS = "seq, stat, value, text, printed_total, sample"  # kernel_stats' own
# A part's row groups: what zstd sees at once, and what a read of one kernel decodes; DuckDB
# holds one or two of them per thread while it writes, so they are a share of a part, which is
# a share of the memory (`Memory.part_rows`): 262,144 rows (69 kernels) at 64 MiB. A row group
# costs about one kernel's map whole, zstd finding the rest in it: on the bench's maps parts
# took 1,123 B a kernel at half that, 613 at this. Without Parquet's dictionaries (which
# zstd does better than) 276 B, and a fifth less CPU (bench/README.md, "kernel_stats as parts").
ROW_GROUPS_A_PART = 8
_WRITE = "FORMAT parquet, COMPRESSION zstd, DICTIONARY_SIZE_LIMIT 1"


_SUFFIX = ".parts"


def folder(db: Path | str) -> Path | None:
    """Where the parts of the read model in the file `db` are; None for one in memory."""
    if str(db) in ("", ":memory:"):
        return None
    path = Path(db).absolute()
    return path.with_name(path.name + _SUFFIX)


def names_a_part(message: str) -> bool:
    """Whether DuckDB's error `message` names a file in a parts folder (a read of it failed)."""
    return _SUFFIX + os.sep in message


def allow(con: duckdb.DuckDBPyConnection, db: Path | str) -> None:
    """Let `con` read and write the parts of the read model `db`, before external access is
    shut off: that leaves it the database's own files and these."""
    where = folder(db)
    if where is not None:
        con.execute(f"SET allowed_directories = [{_literal(str(where) + os.sep)}]")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _placed_sql(paths: list[str]) -> str:
    """A SELECT of the table's rows and those of the parts at `paths`, with each one's place."""
    selects = [f"SELECT {COLUMNS}, rowid AS place FROM {HOT}"]
    if paths:
        listed = ", ".join(map(_literal, paths))
        selects.append(f"SELECT {COLUMNS}, file_row_number AS place FROM read_parquet([{listed}], file_row_number = true)")
    return " UNION ALL ".join(selects)


def _folder_of(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The parts folder of the file `con` has open (read-write: the projector's)."""
    ((path,),) = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return folder(path or "")


def _paths(con: duckdb.DuckDBPyConnection, first: int | None = None, last: int | None = None) -> list[str]:
    """The parts' files, in seq order; those with rows between `first` and `last` if given."""
    between = "" if first is None or last is None else f" WHERE p.last_seq >= {int(first)} AND p.first_seq <= {int(last)}"
    records = con.execute(f"SELECT f.path, p.file FROM stats_parts p, stats_parts_folder f{between} ORDER BY p.first_seq, p.file").fetchall()
    return [str(Path(where) / name) for where, name in records]


def make_views(con: duckdb.DuckDBPyConnection) -> None:
    """`kernel_stats` and `kernel_stats_placed` over the table and the parts `stats_parts` lists
    (in the folder beside the file `con` has open, recorded for copies of it: written only
    when it moved, so that opening a file changes none of its rows)."""
    where = _folder_of(con)
    recorded = [path for (path,) in con.execute("SELECT path FROM stats_parts_folder").fetchall()]
    if recorded != ([] if where is None else [str(where)]):
        con.execute("DELETE FROM stats_parts_folder")
        if where is not None:
            con.execute("INSERT INTO stats_parts_folder VALUES (?)", [str(where)])
    con.execute(f"CREATE OR REPLACE VIEW {PLACED} AS {_placed_sql(_paths(con))}")
    con.execute(f"CREATE OR REPLACE VIEW kernel_stats AS SELECT {COLUMNS} FROM {PLACED}")


def placed_between(con: duckdb.DuckDBPyConnection, first: int, last: int) -> str:
    """A subquery of `kernel_stats_placed`'s rows that reads only the parts with kernels between
    seqs `first` and `last`: the view reads every part's footer for any query, 0.05 s at 700
    parts, where a read of a few kernels takes a few ms."""
    if not con.execute("SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND table_name = 'stats_parts'").fetchall():
        # A read model from before parts, answering reads while it is rebuilt (`rebuild.py`).
        return f"(SELECT {COLUMNS}, rowid AS place FROM kernel_stats)"
    return f"({_placed_sql(_paths(con, first, last))})"


def full(con: duckdb.DuckDBPyConnection, part_rows: int) -> bool:
    """Whether the table holds `part_rows` rows, to move to a part (never in a read model in
    memory, which has no folder for parts)."""
    ((count,),) = con.execute(f"SELECT count(*) FROM {HOT}").fetchall()
    return count >= part_rows and _folder_of(con) is not None


def worth_a_part(con: duckdb.DuckDBPyConnection, rows: int, part_rows: int) -> bool:
    """Whether a batch's `rows` go straight to a part of their own (`add`): a quarter of
    `part_rows` or more, as a replay's and a catch-up's batches bring (about 240 of the
    bench's kernels at 64 MiB). Through the table they cost an insert, their write-ahead
    log and its checkpoint, and a read back to move them: 1.1 ms a kernel of 2.5
    (bench/README.md, "A batch's rows as a part"). Fewer would make parts too small to
    compress well."""
    return rows >= part_rows // 4 and _folder_of(con) is not None


def add(con: duckdb.DuckDBPyConnection, rows: pa.Table, part_rows: int) -> None:
    """`rows` (`kernel_stats`' columns, in a batch's transaction) as a new part, in their order."""
    where = _folder_of(con)
    assert where is not None
    _write_rows(con, where, rows, part_rows)
    make_views(con)


def move(con: duckdb.DuckDBPyConnection, part_rows: int) -> None:
    """Every row of the table into a new part (`full` said so)."""
    where = _folder_of(con)
    assert where is not None
    _write_part(con, where, f"SELECT {COLUMNS} FROM {HOT}", part_rows)
    con.execute(f"DELETE FROM {HOT}")
    make_views(con)


def _write_part(con: duckdb.DuckDBPyConnection, where: Path, select: str, part_rows: int) -> None:
    """The rows `select` gives, in its order, as a new part in the folder `where` (none if it
    gives none), in row groups of a share of `part_rows`, named by its bytes' digest."""
    where.mkdir(exist_ok=True)
    written = where / f"{secrets.token_hex(8)}.writing"  # unlisted, so swept if this fails
    path = _literal(str(written))
    row_group = max(1, part_rows // ROW_GROUPS_A_PART)
    con.execute(f"COPY ({select}) TO {path} ({_WRITE}, ROW_GROUP_SIZE {row_group})")
    ((rows, first, last),) = con.execute(f"SELECT count(*), min(seq), max(seq) FROM read_parquet({path})").fetchall()
    if not rows:
        os.unlink(written)
        return
    name = f"{_digest(written)}.parquet"
    os.replace(written, where / name)
    con.execute("INSERT INTO stats_parts VALUES (?, ?, ?, ?)", [name, first, last, rows])


def _write_rows(con: duckdb.DuckDBPyConnection, where: Path, rows: pa.Table | pa.RecordBatchReader, part_rows: int) -> None:
    """Arrow's `rows` (`kernel_stats`' columns), in their order, as a new part (`_write_part`)."""
    con.register("rows_of_part", rows)
    try:
        _write_part(con, where, f"SELECT {COLUMNS} FROM rows_of_part", part_rows)
    finally:
        con.unregister("rows_of_part")


# A part's name is its bytes' digest: DuckDB checks no checksum of a Parquet file, and zstd
# decodes bytes changed in places into other values as often as it refuses them.
_DIGEST = re.compile(r"([0-9a-f]{32})\.parquet")


def _digest(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


class DamagedPart(Exception):
    """A part whose bytes are not those it was named by."""


def check(con: duckdb.DuckDBPyConnection) -> None:
    """Every listed part's bytes against its name (`DamagedPart`, naming it, if one differs).
    Parts written before they were named so are not checked."""
    where = _folder_of(con)
    if where is None:
        return
    for (name,) in con.execute("SELECT file FROM stats_parts").fetchall():
        named = _DIGEST.fullmatch(name)
        if named is not None and _digest(where / name) != named.group(1):
            raise DamagedPart(f"{where / name}: its bytes are not those it was named by")


def delete(con: duckdb.DuckDBPyConnection, seqs: list[int], part_rows: int) -> None:
    """The rows of the kernels with these seqs: deleted from the table, and each part that
    holds some made again without them (`part_rows` as for `move`)."""
    if not seqs:
        return
    con.execute(f"DELETE FROM {HOT} WHERE seq IN (SELECT unnest(?))", [seqs])
    overlapping = con.execute("SELECT file, row_count FROM stats_parts WHERE last_seq >= ? AND first_seq <= ?", [min(seqs), max(seqs)]).fetchall()
    where = _folder_of(con)
    if not overlapping or where is None:
        return
    gone = pa.array(seqs, pa.int64())
    for name, rows in overlapping:
        path = _literal(str(where / name))
        ((held,),) = con.execute(f"SELECT count(*) FROM read_parquet({path}) WHERE seq IN (SELECT unnest(?))", [seqs]).fetchall()
        if not held:
            continue
        con.execute("DELETE FROM stats_parts WHERE file = ?", [name])
        if held == rows:
            continue
        # The rest read and filtered in Arrow, a row group at a time, which keeps their order:
        # in DuckDB a filter by a join returned them out of it, and sorting them again took
        # more than a small budget holds.
        _write_rows(con, where, _rest(where / name, gone), part_rows)
    make_views(con)


def _rest(path: Path, gone: pa.Array) -> pa.RecordBatchReader:
    """The part's rows but those of the kernels `gone`, in their order."""
    part = pyarrow.parquet.ParquetFile(path)
    kept = (batch.filter(pc.invert(pc.is_in(batch.column("seq"), value_set=gone))) for batch in part.iter_batches())
    return pa.RecordBatchReader.from_batches(part.schema_arrow, kept)


def sweep(con: duckdb.DuckDBPyConnection) -> None:
    """Delete the files in the parts folder that no part lists. Only where nothing reads the
    read model yet: a read that began before a part was dropped may still read it."""
    where = _folder_of(con)
    if where is None or not where.is_dir():
        return
    listed = {name for (name,) in con.execute("SELECT file FROM stats_parts").fetchall()}
    for entry in os.scandir(where):
        if entry.name not in listed:
            os.unlink(entry.path)


def link_onto(complete: Path, target: Path) -> None:
    """The parts of the read model `complete` in the folder of `target` too (by hard links: no
    byte copied), for `complete` to take `target`'s place (`replay.move_onto`). The folder's
    other files are `target`'s, which reads in flight may still need; `sweep` deletes them
    once none does."""
    source, into = folder(complete), folder(target)
    assert source is not None and into is not None
    if not source.is_dir():
        return
    into.mkdir(exist_ok=True)
    for entry in os.scandir(source):
        if not os.path.exists(into / entry.name):
            os.link(entry.path, into / entry.name)


def remove(db: Path) -> None:
    """The parts folder of a read model file that is of no use."""
    where = folder(db)
    if where is not None:
        shutil.rmtree(where, ignore_errors=True)
