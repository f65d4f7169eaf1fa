"""The data dir's disk, as the service last looked at it (`cascade_process/service.py` looks
every second). Below `FULL_BELOW` free it counts as full: nats-server stores the event log
there in blocks of up to 8 MiB and DuckDB the read model's log, and a write either cannot
make fails. Health then says so, and requests that would store something are refused with
507 and what is free, rather than failing halfway."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import msgspec

from cascade_core.refusals import NoSpace

FULL_BELOW = 16 << 20


class DiskSpace(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    free: int  # bytes an unprivileged writer may still use
    total: int
    full_since: datetime | None  # when it was first seen full this time; None while it is not

    @property
    def full(self) -> bool:
        return self.full_since is not None


def looked_at(path: Path, before: DiskSpace | None, now: datetime) -> DiskSpace:
    """The disk of `path` now, full since when `before` first saw it full."""
    stat = os.statvfs(path)
    free = stat.f_bavail * stat.f_frsize
    since = None if free >= FULL_BELOW else before.full_since if before is not None and before.full_since is not None else now
    return DiskSpace(path=str(path), free=free, total=stat.f_blocks * stat.f_frsize, full_since=since)


def said(disk: DiskSpace, needed: int = 0) -> str:
    """What a full disk means, for health and for a refused request (`needed`: the bytes it
    would store)."""
    asked = f"; this request would store at least {_mib(needed)}" if needed else ""
    return (
        f"the data dir's disk {'is full' if disk.full else 'has too little room'}: {disk.path} has {_mib(disk.free)} free of {_mib(disk.total)}, and the service "
        f"keeps {_mib(FULL_BELOW)} free to store events and the read model{asked}; free some space (it goes on by itself "
        "within seconds)"
    )


def check_room(disk: DiskSpace, needed: int) -> None:
    """Refuse what would store `needed` bytes where they would leave less than `FULL_BELOW` free."""
    if disk.free - needed < FULL_BELOW:
        raise NoSpace(said(disk, needed))


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"
