"""The service as a notebook talks to it: found as the command line finds it
(`cascade_cli/locate.py`), over the command line's HTTP client (`cascade_cli/client.py`:
the standard library's, streaming uploads and event streams), answers decoded into the API's
own Structs (`cascade_api.models`)."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import quote, urlencode

import msgspec

from cascade_api.models import RunDetail, RunSummary, SqlQuery, Trace, TraceDetail
from cascade_app.config import ConfigError
from cascade_cli.client import ApiClient
from cascade_cli.locate import client_of
from cascade_cli.uploads_cli import send
from cascade_client.campaign import Campaign
from cascade_client.frames import To, frame, of_stream
from cascade_client.run import Run
from cascade_core.gpu_configs import GpuConfig, OfferedConfig
from cascade_core.runs import RunEntry

if TYPE_CHECKING:
    import pandas
    import polars

JSON = {"Content-Type": "application/json"}


class UploadFailed(ConfigError):
    """The server took the upload but the trace failed; `trace.error` says which file is wrong."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(f"trace {trace.id}: failed: {trace.error}")
        self.trace = trace


def connect(url: str | None = None, token: str | None = None, data_dir: str | os.PathLike[str] | None = None) -> Client:
    """The service at `url`, else CASCADE_URL, else the live server of `data_dir` (else
    CASCADE_DATA_DIR, else ./.cascade); with `token`, else CASCADE_TOKEN, else the data
    dir's token file: as `cascade` finds them."""
    return Client(client_of(url, data_dir, token))


def _quoted(name: str) -> str:
    return quote(name, safe="")


class Client:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def __repr__(self) -> str:
        return f"<cascade_client.Client {self.api.url}>"

    def _json(self, path: str, body: object) -> bytes:
        return self.api.post(path, msgspec.json.encode(body), JSON)

    # Traces

    def traces(self) -> list[Trace]:
        """Every trace not deleted, newest first."""
        return msgspec.json.decode(self.api.get("/api/traces"), type=list[Trace])

    def trace(self, trace_id: str) -> TraceDetail:
        return msgspec.json.decode(self.api.get(f"/api/traces/{_quoted(trace_id)}"), type=TraceDetail)

    def upload_trace(self, path: str | os.PathLike[str], id: str | None = None, progress: bool = True) -> Trace:
        """Upload a trace directory (a tar made as it is sent) or an archive of one (.tar,
        .tar.gz, .tgz, .tar.xz, .txz, sent as it is), streamed from disk, with a progress bar
        on stderr if `progress`; the trace once ready. UploadFailed if it failed."""
        trace = send(self.api, Path(path), id, sys.stderr if progress else io.StringIO())
        if trace.state == "failed":
            raise UploadFailed(trace)
        return trace

    # GPU configs

    def configs(self) -> list[OfferedConfig]:
        """The configs a run may name: this server's and the live runners'."""
        return msgspec.json.decode(self.api.get("/api/gpu-configs"), type=list[OfferedConfig])

    def config(self, name: str) -> GpuConfig:
        """One config; a variant's with its base and options."""
        return msgspec.json.decode(self.api.get(f"/api/gpu-configs/{_quoted(name)}"), type=GpuConfig)

    def derive_config(self, name: str, base: str, options: Mapping[str, str]) -> GpuConfig:
        """A variant: `base` with `options` (`{"-gpgpu_n_clusters": "56"}`) replaced or appended."""
        body = {"name": name, "base": base, "options": dict(options)}
        return msgspec.json.decode(self._json("/api/gpu-configs", body), type=GpuConfig)

    # Runs

    def create_run(
        self,
        trace: str,
        configs: str | Sequence[str],
        *,
        replicas: int = 1,
        name: str | None = None,
        tags: Sequence[str] | None = None,
        options: Mapping[str, str] | None = None,
        fresh: bool | None = None,
    ) -> Run:
        """A run of the trace on each config, `replicas` sims each; `options`, per-run
        simulator options of every entry; `fresh`, simulate even what a sim already did.
        Only the fields given are sent."""
        extra: dict[str, object] = {}
        if options is not None:
            extra["options"] = dict(options)
        if fresh is not None:
            extra["fresh"] = fresh
        names = [configs] if isinstance(configs, str) else list(configs)
        entries = [msgspec.to_builtins(RunEntry(gpu_config=config, count=replicas)) | extra for config in names]
        body: dict[str, object] = {"trace_id": trace, "entries": entries}
        if name is not None:
            body["name"] = name
        if tags is not None:
            body["tags"] = list(tags)
        return Run(self.api, msgspec.json.decode(self._json("/api/runs", body), type=RunDetail))

    def run(self, run_id: str) -> Run:
        return Run(self.api, msgspec.json.decode(self.api.get(f"/api/runs/{_quoted(run_id)}"), type=RunDetail))

    def runs(self, *, tag: str | None = None, name: str | None = None) -> list[RunSummary]:
        """Every run, newest first; with `tag` or `name`, those that have it."""
        query = urlencode({k: v for k, v in {"tag": tag, "name": name}.items() if v is not None})
        return msgspec.json.decode(self.api.get(f"/api/runs?{query}" if query else "/api/runs"), type=list[RunSummary])

    # Campaigns

    def create_campaign(
        self,
        name: str,
        *,
        traces: Sequence[str],
        configs: Sequence[str] = (),
        base: str | None = None,
        grid: Mapping[str, Sequence[str]] | None = None,
        replicas: int = 1,
        baseline: str | None = None,
        tags: Sequence[str] = (),
    ) -> Campaign:
        """Runs of every trace on every config, and with `base` and `grid` on a variant of
        `base` per point of the grid's product (`{"-gpgpu_n_clusters": ["14", "28"]}`)."""
        body = {
            "name": name,
            "tags": list(tags),
            "traces": list(traces),
            "configs": list(configs),
            "base": base,
            "grid": None if grid is None else {option: list(values) for option, values in grid.items()},
            "replicas": replicas,
            "baseline": baseline,
        }
        return Campaign(self.api, name, msgspec.json.decode(self._json("/api/campaigns", body), type=dict[str, Any]))

    def sweep(
        self,
        name: str,
        *,
        traces: Sequence[str],
        base: str,
        grid: Mapping[str, Sequence[str]],
        configs: Sequence[str] = (),
        replicas: int = 1,
        baseline: str | None = None,
        tags: Sequence[str] = (),
    ) -> Campaign:
        """`create_campaign` over a grid of option values on `base`, as `cascade sweep`."""
        return self.create_campaign(
            name, traces=traces, configs=configs, base=base, grid=grid, replicas=replicas, baseline=baseline, tags=tags
        )

    def campaign(self, campaign: str) -> Campaign:
        """A campaign by id or name."""
        return Campaign(self.api, campaign, msgspec.json.decode(self.api.get(f"/api/campaigns/{_quoted(campaign)}"), type=dict[str, Any]))

    def campaigns(self) -> list[dict[str, Any]]:
        return msgspec.json.decode(self.api.get("/api/campaigns"), type=list[dict[str, Any]])

    # The read model

    @overload
    def sql(self, query: str, to: Literal["pandas"] = "pandas") -> pandas.DataFrame: ...
    @overload
    def sql(self, query: str, to: Literal["polars"]) -> polars.DataFrame: ...
    def sql(self, query: str, to: To = "pandas") -> Any:
        """One SELECT on the read model (POST /api/sql; its tables: README.md, Querying the
        read model), its Arrow answer read as it streams."""
        body = msgspec.json.encode(SqlQuery(sql=query, format="arrow"))
        with self.api.open("POST", "/api/sql", body, JSON) as response:
            return frame(of_stream(response), to)
