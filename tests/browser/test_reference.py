"""The web app's reference sims: the new-run form's box, a fast sim's button in the Sims tab, and
Compare showing each fast sim against its reference, on the fake simulator replaying the real
one's logs (matrixmul-x40 reused is 18 cycles short on launches 30 to 40: -0.067 % in total)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import missing, shoot, sign_in
from tests.browser.test_app import ensure_trace, run_from_form
from tests.cascade_http.live import LiveServer
from tests.support import wait_until

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def ended(api: httpx.Client, run_id: str) -> dict[str, Any]:
    wait_until(lambda: api.get(f"/api/runs/{run_id}").json()["state"] != "active", 60, f"run {run_id} ends")
    return dict(api.get(f"/api/runs/{run_id}").json())


def test_a_reused_run_with_its_reference_from_the_form_is_compared_with_it(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    run_id = run_from_form(page, cascade, api, "matrixmul-x40", "new-run-reference", "#run-reuse", "#run-reference")
    assert api.get(f"/api/runs/{run_id}").json()["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1, "reuse": True, "reference": True}]
    run = ended(api, run_id)
    fast, ref = run["sims"]
    assert ref["reference_for"] == fast["id"]
    page.wait_for_selector(f"#sims-table tbody[data-sim='{ref['id']}'] .badge.reference")
    assert page.inner_text(f"#sims-table tbody[data-sim='{ref['id']}'] .badge.reference") == "reference of r0"
    assert page.inner_text(f"[data-reference='{fast['id']}']") == "vs reference"
    shoot(page, "sims-reference", "#sims-table")

    page.goto(f"{cascade.url}/#/runs/{run_id}/compare")
    card = f"#reference-panel .card[data-sim='{fast['id']}']"
    page.wait_for_selector(f"{card} [data-speedup]:not([data-speedup=''])")
    text = page.inner_text(card)
    assert "297,142 against 297,340" in text and "−0.07 %" in text.replace("-", "−") and "29 of 40" in text
    table = f"#reference-table-{fast['id']}"
    error_of = "rows => rows.map(r => [Number(r.dataset.launch), r.querySelector('[data-error]').dataset.error])"
    shown = dict(page.eval_on_selector_all(f"{table} .vt-row", error_of))  # the rows in view: launches 1 on
    assert 1 in shown and max(shown) < 30 and set(shown.values()) == {"0"}, "launches 1 to 29 are exact"
    page.eval_on_selector(f"{table} .vt-body", "b => { b.scrollTop = b.scrollHeight; }")
    page.wait_for_selector(f"{table} .vt-row[data-launch='40']")
    last = dict(page.eval_on_selector_all(f"{table} .vt-row", error_of))[40]
    assert float(last) == pytest.approx((7426 - 7444) / 7444 * 100)
    shoot(page, "compare-reference", "#reference-panel:not([hidden])")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.screenshot(path=str(SCREENSHOTS / "compare-reference-1280x900.png"), full_page=True)


def test_a_split_sims_reference_button_asks_for_it_and_opens_compare(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    ensure_trace(api, "combo-vec-mm-xz")
    entry = {"gpu_config": "SM61_TITANX", "count": 1, "split": {"kernels_per_chunk": 1, "warmup": 2}}
    created = api.post("/api/runs", json={"trace_id": "combo-vec-mm-xz", "entries": [entry]})
    assert created.status_code == 201, created.text
    run = ended(api, created.json()["id"])
    (fast,) = run["sims"]
    sign_in(page, cascade.url, f"#/runs/{run['id']}")
    button = f"[data-reference='{fast['id']}']"
    page.wait_for_selector(button)
    assert page.inner_text(button) == "Reference"
    shoot(page, "sims-reference-button", "#sims-table")
    page.click(button)
    page.wait_for_url("**/compare")
    page.wait_for_selector(f"#reference-panel .card[data-sim='{fast['id']}'] [data-speedup]:not([data-speedup=''])", timeout=60_000)
    compared = api.get(f"/api/sims/{fast['id']}/reference").json()
    assert compared["totals"]["cycle_error_pct"] == 0.0 and compared["totals"]["exact"] == 3, "combo split with 2 warm-up launches is exact"
    assert len(api.get(f"/api/runs/{run['id']}").json()["sims"]) == 2
