"""The read model a service serves, rebuilt from the log when another version built it.

A read model that is this version's (`version.py`) is projected onto as it is. An outdated one
keeps answering reads, as it was, while the projector rebuilds the read model from the log
into a file beside it, `<db>.rebuild`, logging its progress; once that has reached the old
file's checkpoint it takes the old file's name (`replay.move_onto`), reads move to it, and the
projector goes on from there. Until then nothing is projected onto the old file and the
service is read-only (`Rebuild` in its health).

The old file is opened read-only under a second name, a hard link made for the moment of
opening it: DuckDB knows an open database by its path, and the rebuilt file is opened again
under the old one's name once it is in its place. A crash at any point leaves the old file
whole at `<db>` until the rename; the next start goes on with `<db>.rebuild` from its own
checkpoint, or starts it again if it is unusable, and a complete rebuild is never taken for
the old file, nor a partial one for complete.

Every run stream opened meanwhile reads up to the old file's checkpoint S, from its snapshot
or from the log (`cascade_http/run_events.py`), and goes on with the changes past S. The
rebuild stops at S, so that those are all made after the swap, from the rebuilt file, and
published to every stream then: none is missed or sent twice. What the rebuild makes of the
events up to S is published to none (`Live.quiet_until`).

A damaged read model (one DuckDB cannot open, or a block of which fails its checksum as every
table is read through at start) is moved aside to `<db>.damaged`, replacing any earlier one,
and a new one is made and filled from the log, as a deleted one is; one line of the log says
so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import duckdb
import msgspec

from cascade_api.models import Rebuild
from cascade_nats.store import EventStore
from projections import stats_parts, tables
from projections.database import open_database
from projections.projector import DEFAULT_MEMORY, Memory, Projector, connect
from projections.readers import Readers
from projections.replay import move_onto, remove, wal
from projections.version import Outdated

log = logging.getLogger("cascade.projector")

PROGRESS_S = 5.0


def rebuild_path(db: Path) -> Path:
    return db.with_name(db.name + ".rebuild")


def damaged_path(db: Path) -> Path:
    return db.with_name(db.name + ".damaged")


def _read_through(con: duckdb.DuckDBPyConnection) -> None:
    """Read every column of every table, and of `kernel_stats`' parts: DuckDB checks each
    block's checksum as it reads it, and a part's bytes are checked against its name, so
    damage is found at start rather than by a read that fails or answers wrong."""
    names = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()
    for name in [*(n for (n,) in names), "kernel_stats"]:
        con.execute(f'SELECT bit_xor(hash(COLUMNS(*))) FROM "{name}"').fetchall()
    stats_parts.check(con)


# What DuckDB says of a file it cannot make sense of. Other errors (a lock another process
# holds, a full disk, a permission) say nothing of the file, which is left as it is.
_DAMAGE = ("Could not read enough bytes", "not a valid DuckDB database file", "Corrupt database file", "checksum")


def _damage(err: duckdb.Error) -> bool:
    # A part of kernel_stats that cannot be read (gone, cut short, not what zstd wrote) is the
    # read model's damage too: DuckDB's error names its file.
    return (
        isinstance(err, duckdb.SerializationException | duckdb.InternalException)
        or any(d in str(err) for d in _DAMAGE)
        or stats_parts.names_a_part(str(err))
    )


def _connect_whole(db: Path, memory: Memory) -> duckdb.DuckDBPyConnection:
    """The read model at `db` (`connect`), read through; a damaged one moved aside and a new
    one made in its place."""
    try:
        con = connect(db, memory)
    except duckdb.Error as err:
        if not _damage(err):
            raise
        return _replaced(db, memory, err)
    try:
        _read_through(con)
    except stats_parts.DamagedPart as err:
        con.close()
        return _replaced(db, memory, err)
    except duckdb.Error as err:
        con.close()
        if not _damage(err):
            raise
        return _replaced(db, memory, err)
    return con


def _replaced(db: Path, memory: Memory, err: Exception) -> duckdb.DuckDBPyConnection:
    aside = damaged_path(db)
    remove(aside)
    os.replace(db, aside)
    if wal(db).exists():
        os.replace(wal(db), wal(aside))
    log.warning("read model %s is damaged (%s); moved to %s, and made again from the log", db, " ".join(str(err).split()), aside)
    return connect(db, memory)


def _second_name(db: Path) -> Path:
    return db.with_name(db.name + ".outdated")


def _open_outdated(db: Path, memory: Memory) -> duckdb.DuckDBPyConnection:
    """The outdated read model, read-only, as it was."""
    with open_database(db) as con:
        con.execute("CHECKPOINT")  # its log into the file, so that the file alone holds it all
    link = _second_name(db)
    link.unlink(missing_ok=True)
    os.link(db, link)
    try:
        return open_database(link, read_only=True, settings=memory.settings(), parts_of=db)
    finally:
        link.unlink()


def _open_rebuild(db: Path, memory: Memory) -> duckdb.DuckDBPyConnection:
    """The file the rebuild goes into: one an earlier start began, from its checkpoint, or a
    new one if there is none or it is of no use (another version's, or not a database)."""
    target = rebuild_path(db)
    try:
        return connect(target, memory)
    except (Outdated, duckdb.Error) as err:
        log.warning("read model rebuild %s is of no use (%s); starting it again", target, err)
        remove(target)
        return connect(target, memory)


class _Rebuilding(msgspec.Struct, frozen=True):
    reason: str  # why the old file is outdated
    seq: int  # its checkpoint, which reads show until the swap


class ReadModel:
    """The projector, the connection reads take cursors from, and while the read model is
    rebuilt, the old file those cursors read."""

    def __init__(self, *, db: Path, memory: Memory, projector: Projector, readers: Readers, rebuilding: _Rebuilding | None) -> None:
        self.db = db
        self.memory = memory
        self.projector = projector
        self.readers = readers
        self._rebuilding = rebuilding
        self._after_swap: list[Callable[[], None]] = []

    @classmethod
    async def open(cls, store: EventStore, db: Path, memory: Memory | None = None) -> ReadModel:
        """The read model in `db`, within `memory` (by default `DEFAULT_MEMORY`)."""
        return await anyio.to_thread.run_sync(cls._open, store, db, memory or DEFAULT_MEMORY)

    @classmethod
    def _open(cls, store: EventStore, db: Path, memory: Memory) -> ReadModel:
        try:
            con = _connect_whole(db, memory)
        except Outdated as why:
            old = _open_outdated(db, memory)
            try:
                rebuilding = _Rebuilding(why.reason, tables.checkpoint(old))
                projector = Projector(store, _open_rebuild(db, memory), memory=memory)
                projector.live.quiet_until = rebuilding.seq
            except BaseException:
                old.close()
                raise
            resumed = f", going on from sequence {projector.applied}" if projector.applied else ""
            log.warning(
                "read model %s %s; rebuilding it from the log into %s%s, while the old one answers reads (and requests "
                "that change something are refused) until the new one takes its place",
                db, why.reason, rebuild_path(db), resumed,
            )
            return cls(db=db, memory=memory, projector=projector, readers=Readers(old), rebuilding=rebuilding)
        remove(rebuild_path(db))  # one a crash left behind for another version: of no use now
        stats_parts.sweep(con)  # nothing reads it yet
        return cls(db=db, memory=memory, projector=Projector(store, con, memory=memory), readers=Readers(con.cursor()), rebuilding=None)

    @property
    def seq(self) -> int:
        """The last sequence reads show."""
        return self._rebuilding.seq if self._rebuilding is not None else self.projector.applied

    @property
    def rebuild(self) -> Rebuild | None:
        if self._rebuilding is None:
            return None
        return Rebuild(reason=self._rebuilding.reason, applied=self.projector.applied)

    def reader(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        return self.readers.cursor()

    def after_swap(self, forget: Callable[[], None]) -> None:
        """Call `forget` once reads have moved to the rebuilt read model: for what was kept
        from the old one's answers."""
        self._after_swap.append(forget)

    async def catch_up(self) -> None:
        """Apply what is stored now; an outdated read model answers as it is meanwhile."""
        if self._rebuilding is None:
            await self.projector.catch_up()

    async def run(self) -> None:
        """Project the log as it arrives, forever: into the read model, or into its rebuild
        until that has reached the old one's checkpoint and taken its place."""
        if self._rebuilding is not None:
            started, first, target = time.monotonic(), self.projector.applied, self._rebuilding.seq
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._report, started, first, target)
                await self.projector.run(until_seq=target)
                tg.cancel_scope.cancel()
            await anyio.to_thread.run_sync(self._swap)
            for forget in self._after_swap:
                forget()
            applied, elapsed = self.projector.applied - first, time.monotonic() - started
            log.info(
                "rebuilt read model %s: %s events in %.1f s (%s events/s), now answering reads",
                self.db, f"{applied:,}", elapsed, f"{applied / max(elapsed, 1e-9):,.0f}",
            )
        await self.projector.run()

    async def _report(self, started: float, first: int, target: int) -> None:
        while True:
            await anyio.sleep(PROGRESS_S)
            applied = self.projector.applied
            rate = (applied - first) / (time.monotonic() - started)
            log.info(
                "rebuilding read model %s: %s of %s events (%.0f%%), %s events/s",
                self.db, f"{applied:,}", f"{target:,}", 100 * applied / max(target, 1), f"{rate:,.0f}",
            )

    def _swap(self) -> None:
        """The rebuilt read model in the old one's place, and reads moved to it."""
        rebuilt = rebuild_path(self.db)
        with self.projector.con as con:
            con.execute("CHECKPOINT")  # all of it in the file: its log would not follow the rename
        move_onto(rebuilt, self.db)
        wal(rebuilt).unlink(missing_ok=True)
        con = connect(self.db, self.memory)
        self.projector.reopened(con)
        self.readers.move_to(con.cursor())
        self._rebuilding = None

    def close(self) -> None:
        self.readers.close()
        self.projector.con.close()

