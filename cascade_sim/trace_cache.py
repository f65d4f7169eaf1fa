"""Traces on the runner's disk, fetched from the object store once and kept by digest.

What a trace consists of is in its history (`trace.files_stored` events: path, size,
digest), so a runner needs only NATS to find and fetch it. The cache key is a digest of that
file list: an unchanged trace is never fetched twice, a re-uploaded one under the same id is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

from cascade_core import events as ev
from cascade_core.object_names import trace_file
from cascade_formats.tracefiles import safe_member_path
from cascade_nats import subjects
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore

COMPLETE = ".complete"


class TraceUnavailable(RuntimeError):
    pass


def cache_key(files: list[ev.StoredFile]) -> str:
    listing = "\n".join(f"{f.path}\0{f.digest}" for f in sorted(files, key=lambda f: f.path))
    return hashlib.sha256(listing.encode()).hexdigest()[:32]


class TraceCache:
    def __init__(self, root: Path, store: EventStore, objects: Objects) -> None:
        self.root = root
        self.store = store
        self.objects = objects
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def files(self, trace_id: str) -> list[ev.StoredFile]:
        """The trace's stored files, from its history (a re-upload after a delete starts over)."""
        files: dict[str, ev.StoredFile] = {}
        async for item in self.store.read(subjects.trace(trace_id)):
            match item.event:
                case ev.TraceUploadStarted():
                    files.clear()
                case ev.TraceFilesStored():
                    files.update({f.path: f for f in item.event.files})
                case ev.TraceDeleted():
                    files.clear()
        return list(files.values())

    async def fetch(self, trace_id: str) -> Path:
        """A local directory holding the trace, downloading it if this runner lacks it."""
        files = await self.files(trace_id)
        if not any(f.path == "kernelslist.g" for f in files):
            raise TraceUnavailable(f"trace {trace_id} has no stored kernelslist.g (deleted, or never uploaded whole)")

        async def fill(partial: Path) -> None:
            for f in files:
                relative = safe_member_path(f.path)
                if relative is None:
                    raise TraceUnavailable(f"trace {trace_id}: unsafe stored path {f.path!r}")
                target = partial / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                pieces = self.objects.read(trace_file(trace_id, f.path))
                with target.open("wb") as out:
                    async with contextlib.aclosing(pieces):
                        async for piece in pieces:
                            out.write(piece)

        key = cache_key(files)
        return await filled_once(self.root, key, self._locks[key], fill)


async def filled_once(root: Path, key: str, lock: asyncio.Lock, fill: Callable[[Path], Awaitable[None]]) -> Path:
    """The directory `root/key`, filled by `fill` (given a fresh empty directory) unless it
    was whole already: a fill cut short leaves a `.partial` directory, never `key`'s."""
    final = root / key
    async with lock:
        if (final / COMPLETE).exists():
            return final
        partial = root / f"{key}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        await fill(partial)
        (partial / COMPLETE).touch()
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
        return final
