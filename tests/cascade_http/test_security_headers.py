"""Every answer carries the headers that keep a browser to what the web app does
(`cascade_http/security_headers.py`): its own scripts, styles, images and connections, no
framing, no sniffing, no referrer. The browser tests (tests/browser) run the app under them."""

from __future__ import annotations

from starlette.testclient import TestClient

EXPECTED = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def test_every_answer_has_the_security_headers(client: TestClient) -> None:
    answers = {
        "page": client.get("/"),
        "script": client.get("/static/js/main.js"),
        "health": client.get("/api/health"),
        "openapi": client.get("/api/openapi.json"),
        "runs": client.get("/api/runs"),
        "no token": client.get("/api/runs", headers={"Authorization": "Bearer wrong"}),
        "not found": client.get("/api/runs/run-nope"),
        "invalid": client.post("/api/runs", content=b"{"),
        "another host": client.get("/", headers={"Host": "rebound.example"}),
    }
    assert {name: r.status_code for name, r in answers.items()} == {
        "page": 200, "script": 200, "health": 200, "openapi": 200, "runs": 200, "no token": 401, "not found": 404, "invalid": 422, "another host": 400,
    }
    for name, answer in answers.items():
        assert {k: answer.headers.get(k) for k in EXPECTED} == EXPECTED, name
