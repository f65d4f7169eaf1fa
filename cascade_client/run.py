"""A run, as a notebook holds it: its state, a wait with a progress bar, and its results as
tables.

Tables come from the API's Arrow answers where it gives them (the run's export: Parquet,
read with pyarrow) and otherwise from its JSON answers, decoded into the API's own Structs
(`cascade_api.models`) and turned into columns field by field.
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, overload
from urllib.parse import quote

import msgspec
import pyarrow.parquet

from cascade_api.models import Comparison, RunDetail, StatValues
from cascade_cli.client import ApiClient
from cascade_cli.run_watch import get_run, watch
from cascade_client.frames import To, frame, of_rows
from cascade_client.progress import Bar, run_line

if TYPE_CHECKING:
    import pandas
    import polars


class Run:
    """A run of the service at `api`, as it was when last read (`detail`)."""

    def __init__(self, api: ApiClient, detail: RunDetail) -> None:
        self._api = api
        self.detail = detail

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.detail.state}: {self.detail.sim_counts}>"

    @property
    def id(self) -> str:
        return self.detail.id

    @property
    def state(self) -> str:
        return self.detail.state

    def _path(self, tail: str = "") -> str:
        return f"/api/runs/{quote(self.id, safe='')}{tail}"

    def refresh(self) -> RunDetail:
        """The run as it is now (GET /api/runs/{id})."""
        self.detail = get_run(self._api, self.id)
        return self.detail

    def wait(self, progress: bool = True, out: TextIO | None = None) -> RunDetail:
        """Follow the run's event stream until it ends, with a progress bar on `out` (stderr)
        if `progress`; the run as it ended."""
        screen = Bar(out or sys.stderr, visible=progress)
        try:
            self.detail = watch(self._api, self.detail, screen, run_line(self.id))
        finally:
            screen.end()
        return self.detail

    def cancel(self) -> RunDetail:
        self.detail = msgspec.json.decode(self._api.post(self._path("/cancel")), type=RunDetail)
        return self.detail

    def _export(self, names: Sequence[str]) -> dict[str, Any]:
        """Tables of the run's Parquet export (GET /api/runs/{id}/export), its zip streamed to a
        temporary file rather than held in memory."""
        with tempfile.TemporaryDirectory(prefix="cascade-export-") as directory:
            archive = Path(directory, "export.zip")
            self._api.download(self._path("/export"), archive)
            with zipfile.ZipFile(archive) as files:
                return {name: pyarrow.parquet.read_table(files.open(f"{name}.parquet")) for name in names}

    @overload
    def kernels(self, to: Literal["pandas"] = "pandas") -> pandas.DataFrame: ...
    @overload
    def kernels(self, to: Literal["polars"]) -> polars.DataFrame: ...
    def kernels(self, to: To = "pandas") -> Any:
        """Every kernel its sims finished (the read model's `kernels` columns: README.md,
        Querying the read model), each with its sim's gpu_config and replica, by config,
        replica and kernel_index."""
        tables = self._export(["kernels", "sims"])
        sims = tables["sims"].select(["id", "gpu_config", "replica"]).rename_columns(["sim_id", "gpu_config", "replica"])
        kernels = tables["kernels"]
        joined = kernels.join(sims, "sim_id").sort_by([("gpu_config", "ascending"), ("replica", "ascending"), ("kernel_index", "ascending")])
        return frame(joined.select(["sim_id", "gpu_config", "replica", *(c for c in kernels.column_names if c != "sim_id")]), to)

    @overload
    def sims(self, to: Literal["pandas"] = "pandas") -> pandas.DataFrame: ...
    @overload
    def sims(self, to: Literal["polars"]) -> polars.DataFrame: ...
    def sims(self, to: To = "pandas") -> Any:
        """Its sims (the read model's `sims` columns), by config and replica."""
        return frame(self._export(["sims"])["sims"], to)

    @overload
    def comparison(self, to: Literal["pandas"] = "pandas") -> pandas.DataFrame: ...
    @overload
    def comparison(self, to: Literal["polars"]) -> polars.DataFrame: ...
    def comparison(self, to: To = "pandas") -> Any:
        """Real against simulated time (GET /api/runs/{id}/comparison), a row per kernel and
        config: kernel_index, kernel_name, kernel_short_name, config, real_ns, sim_ns,
        real_cycles, sim_cycles."""
        compared = msgspec.json.decode(self._api.get(self._path("/comparison")), type=Comparison)
        rows = [
            {
                "kernel_index": row.kernel_index,
                "kernel_name": row.kernel_name,
                "kernel_short_name": row.kernel_short_name,
                "config": config,
                "real_ns": row.real_ns,
                "sim_ns": row.sim_ns.get(config),
                "real_cycles": row.real_cycles,
                "sim_cycles": (row.sim_cycles or {}).get(config),
            }
            for row in compared.rows
            for config in compared.configs
        ]
        return frame(of_rows(rows), to)

    @overload
    def stat_values(self, name: str, to: Literal["pandas"] = "pandas") -> pandas.DataFrame: ...
    @overload
    def stat_values(self, name: str, to: Literal["polars"]) -> polars.DataFrame: ...
    def stat_values(self, name: str, to: To = "pandas") -> Any:
        """A stat's per-kernel values by config (GET /api/runs/{id}/stats/values): the
        StatValuesRow fields, a row each. `[*]` in `name` stands for any index."""
        values = msgspec.json.decode(self._api.get(self._path(f"/stats/values?name={quote(name, safe='')}")), type=StatValues)
        return frame(of_rows(values.rows), to)
