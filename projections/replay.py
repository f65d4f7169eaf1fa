"""Rebuilding the read model from the log, and checking a read model against a rebuild."""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import duckdb
import msgspec

from cascade_host.heap import give_back_free_memory
from cascade_nats.store import EventStore
from projections import parking, stats_parts, tables, version
from projections.database import memory_limit, open_database, registered
from projections.projector import Memory, Projector, connect


class TableCheck(msgspec.Struct, frozen=True, kw_only=True):
    table: str
    rows: int
    replayed_rows: int
    only_in_live: int
    only_in_replay: int

    @property
    def equal(self) -> bool:
        return self.only_in_live == 0 and self.only_in_replay == 0


class Verification(msgspec.Struct, frozen=True):
    seq: int
    equal: bool
    tables: list[TableCheck]
    lost: list[int] = []  # the sequences a fresh replay found lost from the store (`parking.lost`)


async def replay(store: EventStore, db: Path, *, until_seq: int | None = None, memory: Memory | None = None) -> int:
    """Build the read model in `db` from sequence 1 (within `memory`, by default the
    projector's); returns the last sequence applied."""
    con = connect(db, memory)
    try:
        projector = Projector(store, con, changes=False)
        await projector.catch_up(until_seq=until_seq)
        con.execute("CHECKPOINT")  # all in the file, none left in its log
        return projector.applied
    finally:
        con.close()


async def replay_file(store: EventStore, target: Path) -> int:
    """`replay` into a new file beside `target`, moved onto it only once complete: a replay
    that fails or is interrupted (Ctrl-C included) leaves no file, and `target` as it was."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    try:
        seq = await replay(store, partial)
        move_onto(partial, target)
        return seq
    finally:
        remove(partial)


def move_onto(complete: Path, target: Path) -> None:
    """Put the read model `complete` (closed, its log folded into it) in `target`'s place,
    atomically: a crash leaves one or the other whole there."""
    wal(target).unlink(missing_ok=True)  # the old file's log, which must not meet the new file
    stats_parts.link_onto(complete, target)
    os.replace(complete, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself outlives a power cut
    finally:
        os.close(directory)
    stats_parts.remove(complete)  # its links: one left by a crash before this goes with `remove(complete)`


def remove(db: Path) -> None:
    """A read model file that is of no use, its log and its parts."""
    db.unlink(missing_ok=True)
    wal(db).unlink(missing_ok=True)
    stats_parts.remove(db)


def wal(db: Path) -> Path:
    return db.with_name(db.name + ".wal")


# What a row of a table takes in memory, with room to spare, when compared: a part of a table
# whose rows the live read model and the replay do not hold alike is compared row for row, a
# set operation that holds all of it in memory; so a part is as many rows as that holds.
ROW_BYTES = 512


def compare(live: duckdb.DuckDBPyConnection, fresh_path: Path, seq: int) -> Verification:
    """Compare every table of `live` (in a transaction that sees sequence `seq`) with the
    read model at `fresh_path`, row for row. Read models reach no file but their own
    (`database.py`), so the rows of a part that differs go from the replay to `live`, which
    compares them within its memory. The replay is read within a quarter of that: its blocks
    are read once, so keeping them buys nothing, and serve holds both read models meanwhile."""
    settings = Memory(memory_limit(live) // 4).settings()
    with open_database(fresh_path, read_only=True, settings=settings) as fresh:
        checks = []
        for table in [*tables.ROW_TYPES, "checkpoint"]:
            count, fresh_count = (_count(con, f"SELECT count(*) FROM {table}") for con in (live, fresh))
            only_in_live = only_in_replay = 0
            for seqs in _ranges(live, fresh, table, memory_limit(live) // ROW_BYTES):
                live_rows, fresh_rows = (_rows(con, table, seqs) for con in (live, fresh))
                if _digest(live, live_rows) != _digest(fresh, fresh_rows):
                    in_live, in_replay = _only_in_each(live, fresh, live_rows, fresh_rows)
                    only_in_live += in_live
                    only_in_replay += in_replay
            checks.append(
                TableCheck(table=table, rows=count, replayed_rows=fresh_count, only_in_live=only_in_live, only_in_replay=only_in_replay)
            )
        lost = [s for (s,) in fresh.execute("SELECT seq FROM parked WHERE starts_with(error, ?) ORDER BY seq", [parking.LOST]).fetchall()]
    return Verification(seq=seq, equal=all(c.equal for c in checks), tables=checks, lost=lost)


def _ranges(live: duckdb.DuckDBPyConnection, fresh: duckdb.DuckDBPyConnection, table: str, most: int) -> Iterator[tuple[int, int] | None]:
    """The rows of `table` compared in parts of at most `most` rows (None: the whole table,
    for one without a `seq`): ranges of `seq`, which rows equal in both read models share,
    and whose rows' scans skip the rest of the table by its zone maps."""
    if "seq" not in live.sql(f"SELECT * FROM {table}").columns:
        yield None
        return
    per_seq: dict[int, int] = {}
    for con in (live, fresh):
        for seq, count in con.execute(f"SELECT seq, count(*) FROM {table} GROUP BY seq").fetchall():
            per_seq[seq] = max(count, per_seq.get(seq, 0))
    first, last, held = None, 0, 0
    for seq in sorted(per_seq):
        if first is not None and held + per_seq[seq] > most:
            yield first, last
            first, held = None, 0
        first, last, held = seq if first is None else first, seq, held + per_seq[seq]
    if first is not None:
        yield first, last


def _rows(con: duckdb.DuckDBPyConnection, table: str, seqs: tuple[int, int] | None) -> str:
    """The query of `table`'s compared rows in `con`, those with a seq in `seqs` if given:
    kernel_stats' from its parts with rows there alone (`stats_parts.placed_between`), which
    differ between the two read models."""
    if seqs is None:
        return f"SELECT {tables.compared_columns(table)} FROM {table}"
    first, last = seqs
    if table == "kernel_stats":  # its columns, not the subquery's `place`
        return f"SELECT {stats_parts.COLUMNS} FROM {stats_parts.placed_between(con, first, last)} WHERE seq BETWEEN {first} AND {last}"
    return f"SELECT {tables.compared_columns(table)} FROM {table} WHERE seq BETWEEN {first} AND {last}"


def _digest(con: duckdb.DuckDBPyConnection, rows: str) -> tuple[int, int]:
    """How many rows `rows` are, and the sum of their hashes: what two equal parts agree on
    in any order, and two parts that differ almost never."""
    ((count, hashes),) = con.execute(f"SELECT count(*), coalesce(sum(hash(r)), 0) FROM ({rows}) r").fetchall()
    return int(count), int(hashes)


def _only_in_each(live: duckdb.DuckDBPyConnection, fresh: duckdb.DuckDBPyConnection, live_rows: str, fresh_rows: str) -> tuple[int, int]:
    """How many of the rows `live_rows` of `live` are not in `fresh`'s `fresh_rows`, and of
    those not in these, counting repeats."""
    with registered(live, "replayed_rows", fresh.sql(fresh_rows).to_arrow_table()):
        in_live = _count(live, f"SELECT count(*) FROM ({live_rows} EXCEPT ALL SELECT * FROM replayed_rows)")
        in_replay = _count(live, f"SELECT count(*) FROM (SELECT * FROM replayed_rows EXCEPT ALL {live_rows})")
    return in_live, in_replay


def _count(con: duckdb.DuckDBPyConnection, query: str) -> int:
    # Every row fetched, so that the result is done with before the next query.
    ((count,),) = con.execute(query).fetchall()
    return int(count)


async def verify(store: EventStore, live: duckdb.DuckDBPyConnection) -> Verification:
    """Replay into a scratch database up to the live read model's checkpoint and compare.

    `live` must be a connection of its own (a cursor): it holds one read transaction for the
    whole check, so the projector can go on writing meanwhile. Raises `version.Outdated` for a
    read model another version built: it differs from a replay by design."""
    why = version.outdated(live)
    if why is not None:
        raise why
    live.execute("BEGIN TRANSACTION")
    try:
        seq = tables.checkpoint(live)
        with tempfile.TemporaryDirectory(prefix="cascade-verify-") as tmp:
            fresh = Path(tmp) / "replay.duckdb"
            # Within half the live read model's memory: serve holds both while it verifies.
            await replay(store, fresh, until_seq=seq, memory=Memory(memory_limit(live) // 2))
            give_back_free_memory()
            return await anyio.to_thread.run_sync(compare, live, fresh, seq)
    finally:
        live.execute("ROLLBACK")
        give_back_free_memory()
