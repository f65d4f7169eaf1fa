"""A run's results as one file per sim, for runs too large for one JSON document: a zip or
NDJSON made as it is sent, one sim's kernels at a time.

    run.json                                  the run's RunResults, each sim's `kernels` left empty
    <gpu_config>/r<replica>/<sim_id>-results.json   each sim's SimResults, as GET /api/sims/{id}/results answers it

NDJSON is one line per sim, each that sim's SimResults. Each is read in one transaction, so
its parts agree.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Mapping

import msgspec

from cascade_core.gpu_configs import GpuConfig
from cascade_api.models import RunSummary
from projections.export import Pipe
from projections.queries import stats_maps
from projections.queries.runs import Con, run_outline, sim_results_json, sim_rows, snapshot
from projections.rows import SimRow

RUN_FILE = "run.json"
_encoder = msgspec.json.Encoder()


def sim_file(sim: SimRow) -> str:
    """Where a sim's results are in the zip."""
    return f"{sim.gpu_config}/r{sim.replica}/{sim.id}-results.json"


def zip_pieces(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names) -> Iterator[bytes]:
    """The zip of the run's results, in pieces of about a batch of kernels each."""
    pipe = Pipe()
    # Deflated at its fastest level: stats maps shrink most of the way at little cost.
    with snapshot(con), zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        outline, sims = run_outline(con, run, gpu_configs)
        archive.writestr(RUN_FILE, _encoder.encode(outline))
        yield pipe.take()
        for sim in sims:
            with archive.open(sim_file(sim), "w", force_zip64=True) as file:
                for piece in sim_results_json(con, run, sim, gpu_configs, maps):
                    file.write(piece)
                    if made := pipe.take():
                        yield made
    yield pipe.take()


def ndjson_pieces(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names) -> Iterator[bytes]:
    """The run's sims' results, one SimResults a line, in the run's order of sims."""
    with snapshot(con):
        for sim in sim_rows(con, run):
            yield from sim_results_json(con, run, sim, gpu_configs, maps)
            yield b"\n"
