"""The command that adds a trace from a shared path (`POST /api/traces/shared`): the trace
is read where it lies, with the checks an upload gets (`uploads.findings`, `trace_contents`),
and its files' digests go into the log; nothing is copied to the object store unless asked
(`copy`). Runners that see the same path read it there (`cascade_sim.trace_cache`), refusing
a file whose digest has changed since; runners that do not fetch its copy, if it has one.

The service reads only under the roots the operator allows (`serve --shared-trace-root`): the
path, its symbolic links resolved, must lie under one, and so must every link inside it, so
neither `..` nor a link can lead it elsewhere. Links to directories are refused, since what a
trace holds must be its own files.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import anyio

from cascade_app.clock import now
from cascade_app.conflicts import Decision, decided, seq_of
from cascade_app.service import Cascade
from cascade_app.uploads.findings import Findings, Watch
from cascade_app.uploads.store import remove
from cascade_core import events as ev
from cascade_core.object_names import digest, trace_file
from cascade_core.refusals import Invalid
from cascade_core.traces import Upload, check_free, check_trace_id, decide_path_add
from cascade_formats import trace_contents
from cascade_formats.trace_contents import Received
from cascade_formats.tracefiles import TraceError, safe_member_path
from cascade_host import new_ids
from cascade_nats import subjects

PIECE = 1 << 20


async def add_shared_trace(c: Cascade, trace_id: str, path: str, *, copy: bool = False) -> None:
    """Add the trace lying at `path` under `trace_id`, once the read model shows it ready;
    with `copy`, its files stored in the object store too. Refused (`Invalid`): a bad id, a
    path outside the allowed roots, or files that are no trace; (`Conflict`): a taken id.
    A refused copy is removed."""
    check_trace_id(trace_id)
    subject = subjects.trace(trace_id)
    taken = await c.store.last_on(subject)
    check_free(taken.event if taken else None, trace_id)  # before reading what may be gigabytes; decided again below
    folder, root = allowed_folder(path, c.settings.shared_roots)
    copied: list[ev.StoredFile] = []

    async def stored(relative: str, pieces: AsyncIterator[bytes]) -> ev.StoredFile:
        result = await c.objects.put(trace_file(trace_id, relative), pieces)
        copied.append(ev.StoredFile(relative, result.size, result.digest))
        return copied[-1]

    try:
        try:
            received = await read_in_place(folder, root, stored if copy else None)
        except TraceError as error:
            raise Invalid(f"{folder} is not a trace Cascade can run: {error}") from None
        except OSError as error:  # unreadable to the server, or changed while it was read
            raise Invalid(f"{folder} cannot be read whole by this server: {error}") from None
        found = await anyio.to_thread.run_sync(trace_contents.contents, received)
        configs = await c.gpu_configs()
        upload = Upload(trace_id, new_ids.upload_id())

        async def add() -> Decision[None]:
            last = await c.store.last_on(subject)
            events = decide_path_add(last.event if last else None, upload, str(folder), received.files, found, configs, now(), copied=copy)
            return Decision(events, seq_of(last), None)

        await decided(c, add)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await remove(c.objects, trace_id, copied)
        raise


def allowed_folder(path: str, roots: Sequence[Path]) -> tuple[Path, Path]:
    """`path` with its symbolic links resolved, if it is a folder under one of `roots`, and that root."""
    if not roots:
        raise Invalid(
            "this server takes no trace from a shared path: its operator allows a folder with "
            "`cascade serve --shared-trace-root DIR` (or CASCADE_SHARED_TRACE_ROOTS)"
        )
    if any(ord(ch) < 0x20 for ch in path):
        raise Invalid("the path holds a control character; give the trace's folder as the runners see it")
    if not os.path.isabs(path):
        raise Invalid(f"{path[:500]!r} is not an absolute path: give the trace's folder from the root, as the runners see it")
    folder = Path(os.path.realpath(path))
    root = next((root for root in roots if folder.is_relative_to(root)), None)
    if root is None:
        allowed = ", ".join(str(r) for r in roots)
        raise Invalid(f"{path[:500]} is not under a shared trace root of this server ({allowed})")
    if not folder.is_dir():
        raise Invalid(f"{path[:500]} is not a folder this server can read")
    return folder, root


# Where a file's pieces go when its trace is copied, and the file as stored.
Copy = Callable[[str, AsyncIterator[bytes]], Awaitable[ev.StoredFile]]


async def read_in_place(folder: Path, root: Path, copy: Copy | None = None) -> Received:
    """What the trace's files say, read as an upload's are, each with its size and digest
    (each also stored by `copy`, which gives them); a `TraceError` for a file that cannot be
    part of it."""
    findings = Findings()
    files = []
    for relative, file in await anyio.to_thread.run_sync(_listed, folder, root):
        pieces = _pieces(findings.watch(relative, file.stat().st_size), file)
        files.append(await (_digested(relative, pieces) if copy is None else copy(relative, pieces)))
    return findings.received(files)


def _listed(folder: Path, root: Path) -> list[tuple[str, Path]]:
    """The folder's files, by their path in the trace, in a stable order."""
    out = []
    for here, dirs, names in os.walk(folder):
        for name in sorted(dirs + names):
            file = Path(here) / name
            relative = file.relative_to(folder).as_posix()
            if safe_member_path(relative) != relative:
                raise TraceError(f"{relative[:200]!r} is not a portable path (no backslashes or control characters)")
            if file.is_symlink():
                target = Path(os.path.realpath(file))
                if not target.is_relative_to(root):
                    raise TraceError(f"{relative} is a symbolic link out of the shared trace root, to {target}")
                if not target.is_file():
                    raise TraceError(f"{relative} is a symbolic link to {target}, which is no regular file")
                out.append((relative, file))
            elif stat.S_ISREG(file.lstat().st_mode):
                out.append((relative, file))
            elif not file.is_dir():
                raise TraceError(f"{relative} is neither a regular file nor a folder")
    return sorted(out)


async def _pieces(watch: Watch, file: Path) -> AsyncIterator[bytes]:
    """The file's content, each piece seen by `watch` on its way."""
    with file.open("rb") as content:
        while piece := await anyio.to_thread.run_sync(content.read, PIECE):
            await watch.see(piece)
            yield piece
    watch.end()


async def _digested(relative: str, pieces: AsyncIterator[bytes]) -> ev.StoredFile:
    sha = hashlib.sha256()
    read = 0
    async for piece in pieces:
        sha.update(piece)
        read += len(piece)
    return ev.StoredFile(relative, read, digest(sha))
