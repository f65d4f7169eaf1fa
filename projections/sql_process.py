"""A person's SELECT run in a process of its own, on a snapshot of the read model, within a
hard cap on its memory and time (`user_sql.py` checks and answers it).

DuckDB's memory limit covers what its buffer manager holds (tables, hash tables, sorts), not
every value a function builds: `repeat('x', 1000000000)` makes a gigabyte string beside it,
in one call no interrupt reaches. So the query runs where the kernel caps its memory: a child
process that sets RLIMIT_DATA to what it holds once started and the query's budget above it,
so an allocation past it fails (DuckDB answers OutOfMemoryException) or the child dies, and
serve never holds the query's values. The child also has the time limit (DuckDB interrupted,
then the child killed), a lower CPU priority than serve, one thread, and its answer's rows
and bytes counted as it makes it.

The child cannot open the read model itself: DuckDB lets one process open a file that
another has open for writing. It opens a copy of the file and its write-ahead log instead,
which shows the read model as of a committed batch: the copy is taken again if a checkpoint
rewrote the file's headers while it was copied (a commit's log entry cut short at the end of
the copy is one DuckDB never replays). The copy is removed when the query ends. Each child
runs one query and ends, so what it held goes with it; the next is started when a query ends,
so that it has loaded Python and DuckDB by the time the next query comes (`Children`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

import anyio
from anyio.abc import Process
import duckdb
import msgspec
import pyarrow as pa

from cascade_api.models import SqlFormat
from cascade_core.refusals import Invalid, Refused, TimedOut, Unanswerable, Unavailable
from projections import database, user_sql

HEADER_BYTES = 3 * 4096  # DuckDB's file header and its two database headers, the newest checkpoint's
COPY_TRIES = 5
START_S = 30.0  # for the child to start and open its copy, on a loaded machine
READY = b"\n"
KILL_GRACE_S = 1.0  # past its time limit, how long the child has to stop on its own before it is killed
NICENESS = 5  # serve's own reads go first
OUT_OF_MEMORY = "Out of Memory Error"  # how DuckDB's error reads when it reaches Arrow's reader as an OSError
RETRY_AFTER_S = 1


class Query(msgspec.Struct, frozen=True, kw_only=True):
    db: str  # the copy
    read_model: str  # the file it is a copy of, whose `kernel_stats` parts it reads
    select: str
    form: SqlFormat
    limits: user_sql.Limits
    memory: int


Refusal = Literal["invalid", "timed_out", "unanswerable"]


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    answer: bytes = b""
    refused: Refusal | None = None
    detail: str = ""


_REFUSALS: dict[Refusal, type[Refused]] = {"invalid": Invalid, "timed_out": TimedOut, "unanswerable": Unanswerable}


class Children:
    """Processes for queries, each started before a query needs it, so that none waits for
    Python and DuckDB to load: one waits for the next query, started when the last query
    ended (not while it runs, which the loading would slow). Each runs one query and ends."""

    def __init__(self) -> None:
        self._waiting: Process | None = None

    async def take(self) -> Process:
        process, self._waiting = self._waiting, None
        if process is None or process.returncode is not None:
            process = await _start()
        return process

    async def replenish(self) -> None:
        if self._waiting is None:
            self._waiting = await _start()

    async def aclose(self) -> None:
        if self._waiting is not None:
            await _stop(self._waiting)


async def _start() -> Process:
    command = [sys.executable, "-m", "projections.sql_process"]
    return await anyio.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)


async def _stop(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.kill()
        await process.aclose()


async def answer(children: Children, db: Path, select: str, form: SqlFormat, limits: user_sql.Limits, memory: int) -> bytes:
    """The answer to the checked SELECT `select` on the read model `db`, run in one of
    `children` within `limits` and `memory` bytes; a refusal if none."""
    folder = Path(await anyio.to_thread.run_sync(_folder, db))
    try:
        copy = await anyio.to_thread.run_sync(snapshot, db, folder)
        query = Query(db=str(copy), read_model=str(db), select=select, form=form, limits=limits, memory=memory)
        outcome = await _run(await children.take(), query)
    finally:
        with anyio.CancelScope(shield=True):  # a request cut short leaves no copy either
            await anyio.to_thread.run_sync(shutil.rmtree, folder)
            await children.replenish()
    if outcome.refused is not None:
        raise _REFUSALS[outcome.refused](outcome.detail)
    return outcome.answer


def _folder(db: Path) -> str:
    return tempfile.mkdtemp(prefix=_prefix(db), dir=db.parent)  # only serve's user may read it


def _prefix(db: Path) -> str:
    return f".{db.name}.sql-"


def remove_copies(db: Path) -> None:
    """Remove the copies of the read model `db` that queries cut short by a crash left."""
    for folder in db.parent.glob(f"{_prefix(db)}*"):
        shutil.rmtree(folder, ignore_errors=True)


def snapshot(db: Path, into: Path) -> Path:
    """A copy of the read model `db` (its file and write-ahead log) in the folder `into`, under
    the same name, which is its catalog's name."""
    copy = into / db.name
    for _ in range(COPY_TRIES):
        before = _headers(db)
        shutil.copyfile(db, copy)
        Path(f"{copy}.wal").unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):  # none since the last checkpoint
            shutil.copyfile(f"{db}.wal", f"{copy}.wal")
        if _headers(db) == before:
            return copy
    detail = f"the read model was checkpointed {COPY_TRIES} times while it was copied for the query; try again"
    raise Unavailable(detail, retry_after_s=RETRY_AFTER_S)


def _headers(db: Path) -> bytes:
    with db.open("rb") as f:
        return f.read(HEADER_BYTES)


def _too_much_memory(memory: int) -> str:
    return f"the query needed more than CASCADE_SQL_MEMORY_BYTES ({memory:,} bytes) and was stopped; ask for less, or aggregate"


async def _run(process: Process, query: Query) -> Outcome:
    limit = query.limits.seconds
    out = bytearray()
    try:
        assert process.stdin is not None and process.stdout is not None
        with anyio.fail_after(START_S):  # past it, the machine is in trouble: a 500
            await process.stdin.send(msgspec.msgpack.encode(query))
            await process.stdin.aclose()
            out += await process.stdout.receive(1)  # READY: the query starts
        with anyio.move_on_after(limit + KILL_GRACE_S) as deadline:
            async for piece in process.stdout:
                out += piece
            await process.wait()
    finally:
        await _stop(process)
    if deadline.cancelled_caught:
        return Outcome(refused="timed_out", detail=user_sql.timed_out(limit))
    if process.returncode == 0:
        return msgspec.msgpack.decode(out[len(READY) :], type=Outcome)
    # Killed by the kernel, or aborted where an allocation failed and DuckDB could not say so.
    return Outcome(refused="invalid", detail=_too_much_memory(query.memory))


# --- the child ------------------------------------------------------------------------------


def main() -> None:
    query = msgspec.msgpack.decode(sys.stdin.buffer.read(), type=Query)
    os.nice(NICENESS)
    sys.stdout.buffer.write(msgspec.msgpack.encode(_answer(query)))


def _answer(query: Query) -> Outcome:
    # DuckDB spills past its half beside the copy, into the folder removed after the query.
    settings = {"memory_limit": f"{query.memory // 2}B", "threads": "1"}
    con = database.open_database(query.db, read_only=True, settings=settings, parts_of=query.read_model)
    _cap_memory(query.memory)
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    try:
        return Outcome(answer=user_sql.answer(con, query.select, query.form, query.limits))
    except (duckdb.OutOfMemoryException, MemoryError, pa.ArrowMemoryError):
        return Outcome(refused="invalid", detail=_too_much_memory(query.memory))
    except Refused as refused:
        kind = next(k for k, t in _REFUSALS.items() if isinstance(refused, t))
        return Outcome(refused=kind, detail=refused.detail)
    except duckdb.Error as err:  # SQL that does not bind: DuckDB's own words
        return Outcome(refused="unanswerable", detail=str(err).splitlines()[0])
    except OSError as err:
        if not str(err).startswith(OUT_OF_MEMORY):
            raise
        return Outcome(refused="invalid", detail=_too_much_memory(query.memory))


def _cap_memory(memory: int) -> None:
    """What this process may allocate from now on: `memory` bytes more than it holds."""
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmData:"))
    resource.setrlimit(resource.RLIMIT_DATA, (held + memory, held + memory))


if __name__ == "__main__":
    main()
