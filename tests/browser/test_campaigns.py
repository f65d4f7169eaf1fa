"""The campaign pages in headless Chromium, against a live server whose runner drives the fake
simulator: the list, a campaign's trace × config table of a chosen stat with a baseline, its
curve, its sims linked to their runs, and the runs list's name and tag filters, at 1280×800
and 390×844. combo-vec-mm-xz on SM61_TITANX ends at `gpu_tot_sim_cycle = 18448` and
`gpu_tot_ipc = 8.6891` (its recording); SM61_TITANX_B is a copy of SM61_TITANX."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cascade_app.config import Settings
from cascade_nats import server
from tests.browser.conftest import TOKEN, data_json, environment, missing, shoot, sign_in
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import TITANX, accelsim_tree
from tests.support import LOGS

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]

CONFIGS = ["SM61_TITANX", "SM61_TITANX_B"]


@pytest.fixture(scope="module")
def cascade(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("browser-campaigns")
    tree = accelsim_tree(root / "accel-sim")
    for tested in (TITANX.parent, Path("gpu-simulator/configs/tested-cfgs")):
        shutil.copytree(tree / tested / "SM61_TITANX", tree / tested / "SM61_TITANX_B")
    with environment(CASCADE_FAKE_ACCELSIM_LOGS=str(LOGS)), server.running(root / "jetstream") as nats:
        settings = Settings(token=TOKEN, data_dir=root / "data", nats_url=nats.url, accelsim_dir=tree, runner_slots=4)
        with live_server(settings) as live:
            yield live


def upload(api: httpx.Client, trace_id: str) -> None:
    body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
    response = api.post(f"/api/traces?id={trace_id}", content=body, headers={"Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text


def test_a_campaign_page_shows_its_table_curve_and_sims(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    upload(api, "combo")
    upload(api, "combo-b")
    body = {"name": "l2-study", "tags": ["study"], "traces": ["combo", "combo-b"], "configs": CONFIGS}
    created = api.post("/api/campaigns", json=body)
    assert created.status_code == 201, created.text
    runs = created.json()["runs"]

    sign_in(page, cascade.url, "#/campaigns")
    page.wait_for_selector('#campaigns-table tr[data-campaign="l2-study"]')
    assert page.get_attribute('nav a[data-nav="campaigns"]', "aria-current") == "page"
    page.click('#campaigns-table a:text-is("l2-study")')

    # Every sim succeeds, and the table shows total cycles, trace by config.
    page.wait_for_function("() => document.querySelectorAll('#campaign-sims tr[data-state=succeeded]').length === 4")
    page.wait_for_function("() => document.querySelectorAll('#campaign-table td[data-value=\"18448\"]').length === 4")
    assert page.eval_on_selector_all("#campaign-table tbody tr", "rows => rows.map(r => r.dataset.trace)") == ["combo", "combo-b"]
    assert page.eval_on_selector_all("#campaign-table thead th", "hs => hs.map(h => h.textContent)") == ["Trace", *CONFIGS]
    assert page.inner_text("#campaign-table td[data-config=SM61_TITANX]") == "18.4 k"
    assert data_json(page, ".campaign-curve", "series") == [
        {"name": "combo", "values": [18448, 18448]}, {"name": "combo-b", "values": [18448, 18448]}
    ]

    # Another stat, normalised to a baseline: the URL keeps both.
    page.fill("#campaign-stat", "gpu_tot_ipc")
    page.press("#campaign-stat", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#campaign-table td[data-value=\"8.6891\"]').length === 4")
    page.select_option("#campaign-baseline", "SM61_TITANX_B")
    page.wait_for_function("() => document.querySelectorAll('#campaign-table [data-normalised=\"1\"]').length === 4")
    assert page.inner_text("#campaign-table-said") == "gpu_tot_ipc: the mean of the sims that succeeded, and its ratio to SM61_TITANX_B."
    assert data_json(page, ".campaign-curve", "series")[0] == {"name": "combo", "values": [1, 1]}
    assert page.evaluate("location.hash") == "#/campaigns/l2-study?stat=gpu_tot_ipc&baseline=SM61_TITANX_B"
    assert sorted(page.eval_on_selector_all("#campaign-sims a:not(.cached)", "as => as.map(a => a.textContent)")) == sorted(runs * 2)
    assert page.inner_text("#campaign-differs") .endswith("The configs set every option alike.")
    shoot(page, "campaign", "#campaign-table tbody tr")

    # Each sim links to its run, whose summary shows its name and tags.
    page.click(f'#campaign-sims a:text-is("{runs[0]}") >> nth=0')
    page.wait_for_function(f"() => location.hash === '#/runs/{runs[0]}'")
    page.wait_for_selector(".run-meta [data-field=name]:text-is('l2-study')")
    assert page.inner_text(".run-meta [data-tag=study]") == "study"

    # The runs list shows each run's name and tags, and filters by them.
    page.goto(f"{cascade.url}/#/runs")
    page.wait_for_selector(f'#runs-table tr[data-run="{runs[0]}"] [data-field=name]')
    page.select_option("#filter-tag", "study")
    page.wait_for_function("() => document.querySelectorAll('#runs-table tbody tr').length === 2")
    assert page.inner_text(f'#runs-table tr[data-run="{runs[1]}"] [data-field=name]') == "l2-study"
    assert page.evaluate("location.hash") == "#/runs?tag=study"
    shoot(page, "runs-tagged", "#runs-table tbody tr")


def test_a_grid_campaign_draws_its_stat_against_the_option_and_shows_what_differs(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """-gpgpu_max_cycle 0 replays vectoradd-100-32's whole recording (5534 cycles); 1000 the
    one cut short at that limit, which counts in no cell."""
    body = tar_of(files_of("vectoradd-100-32"), top="vectoradd-100-32")
    assert api.post("/api/traces?id=vec", content=body, headers={"Content-Type": "application/x-tar"}).status_code == 202
    grid = {"name": "cycles", "traces": ["vec"], "configs": ["SM61_TITANX"], "base": "SM61_TITANX", "grid": {"-gpgpu_max_cycle": ["0", "1000"]}}
    created = api.post("/api/campaigns", json=grid)
    assert created.status_code == 201, created.text

    sign_in(page, cascade.url, "#/campaigns/cycles")
    page.wait_for_function("() => document.querySelectorAll('#campaign-sims tr[data-state=succeeded]').length === 3")
    page.wait_for_function("() => document.querySelectorAll('#campaign-table td[data-value=\"5534\"]').length === 2")
    page.wait_for_selector("#campaign-option")
    assert page.input_value("#campaign-option") == "-gpgpu_max_cycle"
    assert data_json(page, ".campaign-curve", "series") == [{"name": "vec", "values": [5534, None]}]
    page.wait_for_selector('#campaign-differs-table tr[data-config="SM61_TITANX-cycles-2"]')
    shown = page.eval_on_selector_all("#campaign-differs-table tbody tr", "rows => rows.map(r => [r.dataset.config, r.dataset.option])")
    assert shown == [["SM61_TITANX-cycles-1", "-gpgpu_max_cycle"], ["SM61_TITANX-cycles-2", "-gpgpu_max_cycle"]]
    assert page.inner_text('#campaign-differs-table tr[data-config="SM61_TITANX-cycles-2"] td:last-child') == "1000"
    shoot(page, "campaign-grid", "#campaign-differs-table tbody tr")
