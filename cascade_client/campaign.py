"""A campaign (a named, tagged set of runs over traces × configs × replicas), as a notebook
holds it: its state as the API answers it, and its trace × config table of a stat."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import quote, urlencode

import msgspec

from cascade_cli.client import ApiClient
from cascade_client.frames import To, frame, of_rows

if TYPE_CHECKING:
    import pandas
    import polars


class Campaign:
    """The campaign `key` (its id or name) of the service at `api`, as it was when last read
    (`detail`, GET /api/campaigns/{campaign})."""

    def __init__(self, api: ApiClient, key: str, detail: dict[str, Any]) -> None:
        self._api = api
        self.key = key
        self.detail = detail

    def __repr__(self) -> str:
        return f"<Campaign {self.key}>"

    def _path(self, tail: str = "") -> str:
        return f"/api/campaigns/{quote(self.key, safe='')}{tail}"

    def _set(self, answer: bytes) -> dict[str, Any]:
        self.detail = msgspec.json.decode(answer, type=dict[str, Any])
        return self.detail

    def refresh(self) -> dict[str, Any]:
        return self._set(self._api.get(self._path()))

    def cancel(self) -> dict[str, Any]:
        return self._set(self._api.post(self._path("/cancel")))

    def retry(self) -> dict[str, Any]:
        return self._set(self._api.post(self._path("/retry")))

    @overload
    def table(self, stat: str, baseline: str | None = None, to: Literal["pandas"] = "pandas") -> pandas.DataFrame: ...
    @overload
    def table(self, stat: str, baseline: str | None = None, *, to: Literal["polars"]) -> polars.DataFrame: ...
    def table(self, stat: str, baseline: str | None = None, to: To = "pandas") -> Any:
        """The stat per trace and config (GET /api/campaigns/{campaign}/table), a row each:
        trace_id, trace_name, config, value, baseline_value, normalised (value over the
        baseline config's, with `baseline`) and sims."""
        query = urlencode({"stat": stat} | ({"baseline": baseline} if baseline is not None else {}))
        answer = msgspec.json.decode(self._api.get(self._path(f"/table?{query}")), type=dict[str, Any])
        return frame(of_rows(answer["rows"]), to)
