"""Storing an upload's archive: each file into the object store under
`accelsim-traces/<id>/<path>` as it streams past, while `Findings` looks at it.

Only regular files and directories may be in the archive, and none that says it is bigger
than a whole trace may expand to. Whatever goes wrong, from a bad member to a client that
disconnects, the files stored so far are removed before the error goes on, so a failed
upload leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable

import anyio

from cascade_app.uploads.findings import Findings, Watch
from cascade_app.uploads.layout import Layout
from cascade_app.uploads.tar import TarReader
from cascade_core import events as ev
from cascade_core.limits import Expansion
from cascade_core.object_names import trace_file
from cascade_core.refusals import TooLarge
from cascade_formats.trace_contents import Received
from cascade_formats.tracefiles import TraceError
from cascade_nats.objects import Objects


async def store_archive(objects: Objects, trace_id: str, tar_stream: AsyncIterable[bytes], expansion: Expansion) -> Received:
    stored: dict[str, ev.StoredFile] = {}
    try:
        return await _store(objects, trace_id, tar_stream, expansion, stored)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await remove(objects, trace_id, stored.values())
        raise


async def remove(objects: Objects, trace_id: str, files: Iterable[ev.StoredFile]) -> None:
    for f in list(files):
        await objects.delete(trace_file(trace_id, f.path))


async def _store(
    objects: Objects, trace_id: str, tar_stream: AsyncIterable[bytes], expansion: Expansion, stored: dict[str, ev.StoredFile]
) -> Received:
    reader = TarReader(tar_stream)
    layout = Layout()
    findings = Findings()
    while (entry := await reader.next()) is not None:
        if entry.kind not in ("file", "directory"):
            raise TraceError(
                f"archive member {entry.name[:200]!r} is a {entry.kind}; a trace archive may hold only "
                "regular files and directories"
            )
        if (problem := expansion.member_problem(entry.name, entry.size)) is not None:
            raise TooLarge(problem)
        placed = layout.place(entry.name, entry.kind)
        if placed.moved_under is not None:
            await _move_under(objects, trace_id, stored, placed.moved_under)
            findings.move_under(placed.moved_under)
        if entry.kind == "directory" or placed.path is None:
            continue
        watch = findings.watch(placed.path, entry.size)
        result = await objects.put(trace_file(trace_id, placed.path), _watched(reader.pieces(), watch))
        stored.pop(placed.path, None)  # a later file of the same path replaces the earlier one
        stored[placed.path] = ev.StoredFile(placed.path, result.size, result.digest)
        watch.end()
    await reader.drain()
    return findings.received(list(stored.values()))


async def _watched(pieces: AsyncIterator[bytes], watch: Watch) -> AsyncIterator[bytes]:
    async for piece in pieces:
        await watch.see(piece)
        yield piece


async def _move_under(objects: Objects, trace_id: str, stored: dict[str, ev.StoredFile], folder: str) -> None:
    """Move every stored file into `folder`, deepest first so no move overwrites a file
    that has yet to move."""
    for path in sorted(stored, key=lambda p: p.count("/"), reverse=True):
        old = stored[path]
        new = ev.StoredFile(f"{folder}/{path}", old.bytes, old.digest)
        await objects.put(trace_file(trace_id, new.path), objects.read(trace_file(trace_id, path)))
        stored[new.path] = new
        await objects.delete(trace_file(trace_id, path))
        del stored[path]
