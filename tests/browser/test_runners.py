"""The runners view in headless Chromium, against the live server's own runner: what it
shows of each runner is what `GET /api/runners` says (host, slots in use, load, GPU configs
with their digests, simulator build), at 1280×800 and 390×844."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser.conftest import missing, shoot, sign_in
from tests.cascade_http.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]


def test_the_runners_view_shows_what_each_runner_announces(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    (runner,) = api.get("/api/runners").json()
    sign_in(page, cascade.url, "#/runners")
    row = f'#runners-table tr[data-runner="{runner["id"]}"]'
    page.wait_for_selector(row)
    assert page.get_attribute('nav a[data-nav="runners"]', "aria-current") == "page"
    assert page.inner_text(f'{row} [data-field="host"]') == runner["host"]
    assert page.inner_text(f'{row} [data-field="slots"]') == f'{len(runner["running"])} of {runner["slots"]}'
    assert float(page.inner_text(f'{row} [data-field="load"]')) == pytest.approx(runner["load"], abs=1.0)  # announced again meanwhile
    shown = page.eval_on_selector_all(f'{row} [data-field="configs"] li', "items => items.map(li => [li.dataset.config, li.dataset.digest])")
    assert shown == [[c["name"], c["digest"]] for c in runner["gpu_configs"]] and shown
    assert all(page.inner_text(f'{row} li[data-config="{c["name"]}"]') == f'{c["name"]} {c["digest"][:12]}' for c in runner["gpu_configs"])
    simulator = page.inner_text(f'{row} [data-field="simulator"]')
    assert f'binary {runner["simulator"]["binary_digest"][:12]}' in simulator
    shoot(page, "runners", row)
