"""Browser sessions: the token or a one-time code traded for an HttpOnly cookie that is not the
token, taken by every /api route beside the Bearer header; a change with the cookie only from
the server's own pages; signing out; and the link `cascade serve` prints, which works once."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_http.auth import COOKIE
from cascade_http.sessions import CODE_S, Sessions
from cascade_process.service import starlette_app
from tests.cascade_http.conftest import TOKEN
from tests.cascade_http.served import clean_env, serving
from tests.cascade_sim.world import accelsim_tree

ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture
def browser(settings: Settings) -> Iterator[TestClient]:
    """A client with no token: what it is allowed, its cookies allow."""
    with TestClient(starlette_app(settings)) as client:
        yield client


def test_the_token_signs_a_browser_in_with_a_cookie_that_is_not_the_token(browser: TestClient) -> None:
    assert browser.get("/api/gpu-configs").status_code == 401
    assert browser.get("/api/session").status_code == 401
    response = browser.post("/api/session", json={"token": TOKEN})
    assert response.status_code == 204
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and TOKEN not in cookie
    assert {"httponly", "samesite=strict", "path=/"} <= {part.strip().lower() for part in cookie.split(";")}
    assert "secure" not in cookie.lower()  # served over http here
    assert browser.get("/api/session").status_code == 204
    assert browser.get("/api/gpu-configs").status_code == 200
    # The event stream takes it too (an unknown run: past authentication, not found).
    assert browser.get("/api/runs/run-none/events").status_code == 404


def test_the_bearer_header_signs_in_too_and_a_wrong_token_does_not(browser: TestClient) -> None:
    wrong = browser.post("/api/session", json={"token": "wrong"})
    assert (wrong.status_code, wrong.json()) == (401, {"detail": "Invalid token"})
    assert "set-cookie" not in wrong.headers
    nothing = browser.post("/api/session", json={})
    assert nothing.status_code == 401 and "Send the API token" in nothing.json()["detail"]
    assert browser.post("/api/session", json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert browser.post("/api/session", json={}, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 204
    assert browser.get("/api/runs").status_code == 200


def test_a_change_with_the_cookie_must_come_from_the_servers_own_pages(browser: TestClient) -> None:
    browser.post("/api/session", json={"token": TOKEN})
    run = {"trace_id": "none", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]}
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "http://testserver:8080"}, {"Sec-Fetch-Site": "same-site"}):
        refused = browser.post("/api/runs", json=run, headers=headers)
        assert refused.status_code == 403, headers
        assert "from another origin" in refused.json()["detail"]
    for headers in (ORIGIN, {"Sec-Fetch-Site": "same-origin"}):
        assert browser.post("/api/runs", json=run, headers=headers).status_code == 404, headers  # no such trace
    # The Bearer header needs no Origin, cookie or not.
    assert browser.post("/api/runs", json=run, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404


def test_signing_out_ends_the_session(browser: TestClient) -> None:
    browser.post("/api/session", json={"token": TOKEN})
    sid = browser.cookies[COOKIE]
    assert browser.delete("/api/session").status_code == 403  # not from its pages
    signed_out = browser.delete("/api/session", headers=ORIGIN)
    assert signed_out.status_code == 204 and f'{COOKIE}=""' in signed_out.headers["set-cookie"]
    assert COOKIE not in browser.cookies
    # The old cookie, kept by someone, signs nothing in any more.
    again = browser.get("/api/runs", headers={"Cookie": f"{COOKIE}={sid}"})
    assert again.status_code == 401 and "sign in again" in again.json()["detail"]


def test_a_sign_in_code_works_once(settings: Settings) -> None:
    app = starlette_app(settings)
    with TestClient(app) as browser:
        sign_in_once(browser, app.state.sessions.new_code())


def sign_in_once(browser: TestClient, code: str) -> None:
    assert code != TOKEN
    assert browser.post("/api/session", json={"code": code}).status_code == 204
    assert browser.get("/api/runs").status_code == 200
    used = browser.post("/api/session", json={"code": code})
    assert used.status_code == 401 and "was used already" in used.json()["detail"]
    unknown = browser.post("/api/session", json={"code": "made-up"})
    assert unknown.status_code == 401 and "not one this server printed" in unknown.json()["detail"]


def test_a_sign_in_code_expires() -> None:
    now = [0.0]
    sessions = Sessions(clock=lambda: now[0])
    code, late = sessions.new_code(), sessions.new_code()
    now[0] = CODE_S - 1
    assert sessions.valid(sessions.trade(code))
    now[0] = CODE_S
    with pytest.raises(Exception, match="expired"):
        sessions.trade(late)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, str]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Set-Cookie", ""), ""
    except urllib.error.HTTPError as err:
        with err:
            return err.code, "", err.read().decode()


def test_serve_prints_a_sign_in_link_that_works_once(tmp_path: Path) -> None:
    env = clean_env(CASCADE_TOKEN="serve-token")
    with serving(tmp_path / "data", "--accelsim-dir", str(accelsim_tree(tmp_path / "accel-sim")), env=env) as served:
        link = re.search(r"(http://\S+)/#signin=(\S+)", served.text())
        assert link is not None, served.text()
        assert link[1] == served.url
        status, cookie, _ = post(f"{served.url}/api/session", f'{{"code": "{link[2]}"}}'.encode(), {})
        port = served.url.rpartition(":")[2]
        assert status == 204 and cookie.startswith(f"{COOKIE}-{port}=")  # a cookie per port: browsers share one per host
        with urllib.request.urlopen(urllib.request.Request(f"{served.url}/api/runs", headers={"Cookie": cookie.split(";")[0]})) as runs:
            assert runs.status == 200
        status, _, detail = post(f"{served.url}/api/session", f'{{"code": "{link[2]}"}}'.encode(), {})
        assert status == 401 and "used already" in detail
