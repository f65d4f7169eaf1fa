"""Traces on the runner's disk, fetched from the object store once and kept by digest.

What a trace consists of is in its history (`trace.files_stored` events: path, size,
digest), so a runner needs only NATS to find and fetch it. The cache key is a digest of that
file list: an unchanged trace is never fetched twice, a re-uploaded one under the same id is.

A trace added from a shared path (`trace.path_added.v1`) is read where it lies, never copied:
its directory here holds symbolic links to the shared files, so what a sim writes beside the
trace (a chunk's kernelslist) stays on this runner. Before each launch every file's digest is
checked against the one recorded when the trace was added, and a changed or missing file fails
the sim with both digests: it never runs a different trace. A file's digest is computed again
only when its inode, size, or change or modification time differ from when it was last
computed. A runner that cannot see the path fetches the trace's copy from the object store,
as an upload's, when it was added with one (`copied`); else it fails the sim saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import socket
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from cascade_core import events as ev
from cascade_core.object_names import digest, trace_file
from cascade_formats.tracefiles import safe_member_path
from cascade_nats import subjects
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore

COMPLETE = ".complete"


class TraceUnavailable(RuntimeError):
    pass


def cache_key(files: list[ev.StoredFile], shared_path: str | None = None) -> str:
    listing = "\n".join(f"{f.path}\0{f.digest}" for f in sorted(files, key=lambda f: f.path))
    if shared_path is not None:  # its directory links to the path's files, so it is not an upload's copy
        listing = f"{shared_path}\0\n{listing}"
    return hashlib.sha256(listing.encode()).hexdigest()[:32]


class Listing(msgspec.Struct, frozen=True):
    """A trace's files as its history lists them, the shared path they lie at, if any, and
    whether they were also stored in the object store."""

    files: list[ev.StoredFile]
    shared_path: str | None
    copied: bool = False


async def listed(store: EventStore, trace_id: str) -> Listing:
    """The trace's files, from its history (a re-upload after a delete starts over)."""
    files: dict[str, ev.StoredFile] = {}
    shared_path, copied = None, False
    async for item in store.read(subjects.trace(trace_id)):
        match item.event:
            case ev.TraceUploadStarted() | ev.TraceDeleted():
                files.clear()
                shared_path, copied = None, False
            case ev.TracePathAdded():
                files.clear()
                shared_path, copied = item.event.path, item.event.copied
            case ev.TraceFilesStored():
                files.update({f.path: f for f in item.event.files})
    return Listing(list(files.values()), shared_path, copied)


def _sees(folder: Path) -> bool:
    """Whether this runner sees the shared trace's folder (its kernelslist.g) where it was added."""
    return (folder / "kernelslist.g").is_file()


class TraceCache:
    def __init__(self, root: Path, store: EventStore, objects: Objects) -> None:
        self.root = root
        self.store = store
        self.objects = objects
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._digests: dict[Path, tuple[tuple[int, ...], str]] = {}

    async def fetch(self, trace_id: str) -> Path:
        """A local directory holding the trace, downloading it if this runner lacks it, or
        linking to its files where they lie if it was added from a shared path."""
        listing = await listed(self.store, trace_id)
        files = listing.files
        if not any(f.path == "kernelslist.g" for f in files):
            raise TraceUnavailable(f"trace {trace_id} has no stored kernelslist.g (deleted, or never uploaded whole)")
        if listing.shared_path is not None and (_sees(Path(listing.shared_path)) or not listing.copied):
            return await self._in_place(trace_id, Path(listing.shared_path), files)

        async def fill(partial: Path) -> None:
            for f in files:
                target = _placed(partial, trace_id, f)
                pieces = self.objects.read(trace_file(trace_id, f.path))
                with target.open("wb") as out:
                    async with contextlib.aclosing(pieces):
                        async for piece in pieces:
                            out.write(piece)

        key = cache_key(files)
        return await filled_once(self.root, key, self._locks[key], fill)

    async def _in_place(self, trace_id: str, folder: Path, files: list[ev.StoredFile]) -> Path:
        if not _sees(folder):
            raise TraceUnavailable(
                f"trace {trace_id} lies at {folder}, which this runner (host {socket.gethostname()}) cannot see: "
                "mount it at that path here, or add it again with a copy (cascade trace add --path DIR --copy), "
                "or upload it (cascade trace upload), so that runners fetch it"
            )
        if (changed := await asyncio.to_thread(self._changed, trace_id, folder, files)) is not None:
            raise TraceUnavailable(changed)

        async def link(partial: Path) -> None:
            for f in files:
                _placed(partial, trace_id, f).symlink_to(folder / f.path)

        key = cache_key(files, str(folder))
        return await filled_once(self.root, key, self._locks[key], link)

    def _changed(self, trace_id: str, folder: Path, files: list[ev.StoredFile]) -> str | None:
        """What differs in the shared folder from the files the trace was added with, if anything."""
        for f in files:
            file = folder / f.path
            try:
                now = self._digest(file)
            except OSError as err:
                return f"trace {trace_id}: {f.path} cannot be read at {folder} ({err.strerror}); it had digest {f.digest} when the trace was added"
            if now != f.digest:
                return (
                    f"trace {trace_id}: {file} changed since the trace was added: it had digest {f.digest}, "
                    f"it has {now}; add it again under another id to run what it holds now"
                )
        return None

    def _digest(self, file: Path) -> str:
        st = os.stat(file)
        seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = self._digests.get(file)
        if known is not None and known[0] == seen:
            return known[1]
        with file.open("rb") as content:
            found = digest(hashlib.file_digest(content, "sha256"))
        self._digests[file] = (seen, found)
        return found


def _placed(partial: Path, trace_id: str, f: ev.StoredFile) -> Path:
    """Where the file goes in the trace's directory being filled, its folder made."""
    relative = safe_member_path(f.path)
    if relative is None:
        raise TraceUnavailable(f"trace {trace_id}: unsafe stored path {f.path!r}")
    target = partial / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


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
