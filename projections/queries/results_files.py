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
from typing import IO

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


def members(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names) -> Iterator[tuple[str, bytes]]:
    """The results zip's files, each as pieces (its name, a piece): run.json, then each sim's
    results, in about a batch of kernels a piece; read in one transaction."""
    with snapshot(con):
        outline, sims = run_outline(con, run, gpu_configs)
        yield RUN_FILE, _encoder.encode(outline)
        for sim in sims:
            for piece in sim_results_json(con, run, sim, gpu_configs, maps):
                yield sim_file(sim), piece


class ZipStream:
    """A zip written as it is sent: files added piece by piece, each piece's bytes (deflated)
    taken as soon as the zip has written them. Deflated at its fastest level: stats maps and
    logs shrink most of the way at little cost."""

    def __init__(self) -> None:
        self._pipe = Pipe()
        self._archive = zipfile.ZipFile(self._pipe, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
        self._name: str | None = None
        self._file: IO[bytes] | None = None

    def write(self, name: str, piece: bytes) -> bytes:
        """`piece` added to the file `name` (a new file when it is not the one written last);
        what the zip has made since the last take."""
        if name != self._name:
            self._close_file()
            self._file = self._archive.open(name, "w", force_zip64=True)
            self._name = name
        assert self._file is not None
        self._file.write(piece)
        return self._pipe.take()

    def end(self) -> bytes:
        """The zip's last bytes: its last file's end and its directory."""
        self._close_file()
        self._archive.close()
        return self._pipe.take()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def zip_pieces(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names) -> Iterator[bytes]:
    """The zip of the run's results, in pieces of about a batch of kernels each."""
    archive = ZipStream()
    for name, piece in members(con, run, gpu_configs, maps):
        if made := archive.write(name, piece):
            yield made
    yield archive.end()


def ndjson_pieces(con: Con, run: RunSummary, gpu_configs: Mapping[str, GpuConfig], maps: stats_maps.Names) -> Iterator[bytes]:
    """The run's sims' results, one SimResults a line, in the run's order of sims."""
    with snapshot(con):
        for sim in sim_rows(con, run):
            yield from sim_results_json(con, run, sim, gpu_configs, maps)
            yield b"\n"
