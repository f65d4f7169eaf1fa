"""The OpenAPI document against the live server, by Schemathesis: generated requests to every
operation get no server error and no response the document does not describe. Then every
read of the reference's run and sim, whose answers are real, is checked the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, assume, given, settings
from schemathesis import BaseSchema, GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance
from starlette.routing import Route

from cascade_http.app import routes
from cascade_http.openapi import OPERATION
from cascade_nats import server
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import TOKEN
from tests.cascade_http.live import LiveServer, live_server

AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = 40  # per operation and mode: the whole module takes well under a minute
# Any text is a schema-valid query, but only SQL parses: a 400 for the rest is the answer the
# document gives, not a valid request rejected. So for a config variant's options: any name and
# text fit the schema, but only the options the simulator knows, with values of their types,
# are taken; a 422 for the rest is the documented answer. Any text is a path, but only a
# trace's folder under a root the server allows is taken. And any text is a token or a code by
# the schema, but only the right one signs in: a 401 for the rest.
ANY_TEXT_IS_VALID = {("POST", "/api/sql"), ("POST", "/api/gpu-configs"), ("POST", "/api/traces/shared"), ("POST", "/api/session")}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server holding the reference's trace and run."""
    tmp: Path = tmp_path_factory.mktemp("schemathesis")
    with server.running(tmp / "jetstream") as nats:
        with live_server(w.settings(tmp, nats.url)) as running:
            running.seed(w.trace_events() + w.reference_run(), w.reference_objects())
            yield running


@pytest.fixture(scope="module")
def api(live: LiveServer) -> BaseSchema:
    return schemathesis.openapi.from_url(f"{live.url}/api/openapi.json")


def _cases() -> list[tuple[str, str, GenerationMode]]:
    """(method, path, mode) for every documented operation, from the app's routes: valid
    requests for each, invalid ones for those that take anything. Trace uploads are left out:
    their bodies are archives, which Schemathesis cannot make."""
    found = []
    for route in routes():
        op = getattr(getattr(route, "endpoint", None), OPERATION, None)
        if not isinstance(route, Route) or op is None or op.body is bytes:
            continue
        takes = op.body is not None or "{" in route.path or op.query or op.headers
        modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if takes else [GenerationMode.POSITIVE]
        found += [(method, route.path, mode) for method in sorted((route.methods or set()) - {"HEAD"}) for mode in modes]
    return found


@pytest.mark.parametrize(("method", "path", "mode"), _cases())
def test_generated_requests_get_documented_answers(api: BaseSchema, method: str, path: str, mode: GenerationMode) -> None:
    operation = api[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: schemathesis.Case) -> None:
        assume(_sendable(case.headers or {}))
        excluded = [positive_data_acceptance] if (method, path) in ANY_TEXT_IS_VALID else []
        case.call_and_validate(headers=AUTH, excluded_checks=excluded)

    check()


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_FRAMING = {"content-length", "transfer-encoding", "host", "connection", "expect"}


def _sendable(headers: dict[str, str]) -> bool:
    """Whether generated headers make an HTTP request at all. Negative cases include made-up
    headers; one whose name is not a token, whose value holds control characters, or that
    frames the message (an empty Content-Length, say) is refused by the HTTP server with a
    400 before the app sees the request, which is HTTP's contract, not the API's."""
    return all(
        _TOKEN.fullmatch(name) and name.lower() not in _FRAMING and _FIELD_VALUE.fullmatch(value)
        for name, value in headers.items()
    )


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/gpu-configs", {}),
        ("/api/runs", {}),
        ("/api/runs/{run_id}", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/comparison", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/kernels", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/stats", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/step-timelines", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/results", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/files", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/perfetto", {"run_id": w.RUN_ID}),
        ("/api/runs/{run_id}/events", {"run_id": w.RUN_ID}),
        ("/api/sims/{sim_id}/results", {"sim_id": w.SIMS[0]}),
        ("/api/sims/{sim_id}/log", {"sim_id": w.SIMS[0]}),
        ("/api/sims/{sim_id}/files", {"sim_id": w.SIMS[0]}),
    ],
)
def test_real_answers_match_the_document(api: BaseSchema, path: str, params: dict[str, str]) -> None:
    case = api[path]["GET"].Case(path_parameters=params)
    response = case.call_and_validate(headers=AUTH)
    assert response.status_code == 200


@pytest.mark.parametrize("name", ["gpu_sim_cycle", "L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT_0001]", "no[*]such"])
def test_real_stat_values_match_the_document(api: BaseSchema, name: str) -> None:
    case = api["/api/runs/{run_id}/stats/values"]["GET"].Case(path_parameters={"run_id": w.RUN_ID}, query={"name": name})
    response = case.call_and_validate(headers=AUTH)
    assert response.status_code == 200


def test_the_document_is_valid_openapi_3_1_and_covers_every_route(api: BaseSchema, live: LiveServer) -> None:
    api.validate()  # against the OpenAPI 3.1 meta-schema
    assert api.raw_schema["openapi"] == "3.1.0"
    documented = {(m.upper(), p) for p, ops in api.raw_schema["paths"].items() for m in ops}
    served = {(m, r.path) for r in routes() if isinstance(r, Route) for m in (r.methods or set()) - {"HEAD"}}
    assert served - {("GET", "/api/openapi.json")} <= documented
