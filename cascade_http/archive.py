"""A run's whole archive (`GET /api/runs/{id}/archive`): one zip, made as it is sent, of what
`cascade results` writes to a folder, in its folders (each sim's results named as in the
results zip):

    run.json                                        the run's results, each sim's kernels left out
    <gpu_config>/r<replica>/<sim_id>-results.json   each sim's results (`results_files`)
    <gpu_config>/r<replica>/simulator.log           its log, as GET /api/sims/{id}/log answers it
    <gpu_config>/r<replica>/files/<name>            its output files

The results come from the read model (in worker threads, one transaction), the logs from the
event log and the files from the object store; the zip deflates in worker threads too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

import anyio

from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_app.sim_logs import log_text
from cascade_api.models import RunSummary
from cascade_core.gpu_configs import GpuConfig
from cascade_core.ids import is_file_name
from cascade_http.readmodel import pieces_of
from projections.queries import results_files
from projections.queries import runs as q
from projections.rows import SimRow


def folder(sim: SimRow) -> str:
    """A sim's folder in the archive, as its results' file is (`results_files.sim_file`)."""
    return results_files.sim_file(sim).rpartition("/")[0]


async def archive_pieces(c: Cascade, run: RunSummary, gpu_configs: Mapping[str, GpuConfig]) -> AsyncIterator[bytes]:
    archive = results_files.ZipStream()

    async def added(name: str, piece: bytes) -> AsyncIterator[bytes]:
        if made := await anyio.to_thread.run_sync(archive.write, name, piece):
            yield made

    async with contextlib.aclosing(pieces_of(c, results_files.members, run, gpu_configs, c.stat_names)) as results:
        async for name, piece in results:
            async for made in added(name, piece):
                yield made
    for sim in await read(c, q.sim_rows, run):
        async with contextlib.aclosing(await log_text(c, sim)) as log:
            async for piece in log:
                async for made in added(f"{folder(sim)}/simulator.log", piece):
                    yield made
        for file in await read(c, q.file_rows, sim):
            if not is_file_name(file.name):
                continue  # one no route would give either (GET .../files/{name})
            async with contextlib.aclosing(c.objects.read(file.object_name)) as content:
                async for piece in content:
                    async for made in added(f"{folder(sim)}/files/{file.name}", piece):
                        yield made
    yield await anyio.to_thread.run_sync(archive.end)
