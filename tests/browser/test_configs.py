"""The GPU configs view in headless Chromium: every config a run may name, a variant with its
base and options, a config's options on demand, and two configs' differences, as the API
answers them, at 1280×800 and 390×844."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser.conftest import missing, shoot, sign_in
from tests.cascade_http.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]

L2 = "S:64:128:32,L:B:m:L:P,A:192:4,32:0,32"


def test_the_configs_view_shows_a_variant_its_options_and_how_it_differs_from_its_base(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    derived = api.post("/api/gpu-configs", json={"name": "SM61_TITANX_L2x2", "base": "SM61_TITANX", "options": {"-gpgpu_cache:dl2": L2}})
    assert derived.status_code == 201, derived.text
    configs = api.get("/api/gpu-configs").json()
    sign_in(page, cascade.url, "#/configs")
    page.wait_for_function("count => document.querySelectorAll('#configs-table tbody tr').length === count", arg=len(configs))
    assert page.get_attribute('nav a[data-nav="configs"]', "aria-current") == "page"
    variant = '#configs-table tr[data-config="SM61_TITANX_L2x2"]'
    assert page.inner_text(f'{variant} [data-field="base"]').split("\n") == ["SM61_TITANX", f"-gpgpu_cache:dl2 {L2}"]
    assert page.get_attribute(variant, "data-digest") == derived.json()["digest"]

    page.click(f"{variant} button")
    page.wait_for_selector('#options-table[data-config="SM61_TITANX_L2x2"]')
    options = api.get("/api/gpu-configs/SM61_TITANX_L2x2/options").json()
    rows = page.eval_on_selector_all("#options-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert dict(rows) == options and options["-gpgpu_cache:dl2"] == L2

    assert (page.input_value("#diff-a"), page.input_value("#diff-b")) == ("SM61_TITANX", "SM61_TITANX_L2x2")
    page.click("#diff-form button[type=submit]")
    page.wait_for_selector('#diff-table tr[data-option="-gpgpu_cache:dl2"]')
    shown = page.eval_on_selector_all("#diff-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert shown == [[d["option"], d["a"] or "(not set)", d["b"] or "(not set)"] for d in api.get("/api/gpu-configs/SM61_TITANX/diff/SM61_TITANX_L2x2").json()]
    shoot(page, "configs", "#diff-table")


def test_the_api_page_renders_every_operation_and_tries_one_with_the_tabs_token(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    document = api.get("/api/openapi.json").json()
    operations = [op for methods in document["paths"].values() for op in methods.values()]
    sign_in(page, cascade.url, "#/runs")
    page.goto(f"{cascade.url}/docs")  # where a rendered reference is looked for
    page.wait_for_url("**/#/api")
    page.wait_for_function("count => document.querySelectorAll('details.api-op').length === count", arg=len(operations))
    assert page.get_attribute('nav a[data-nav="api"]', "aria-current") == "page"
    assert page.locator("details.api-schema").count() == len(document["components"]["schemas"])

    kernels = 'details.api-op[data-operation="list_kernels"]'
    page.click(f"{kernels} > summary")
    params = page.eval_on_selector_all(f"{kernels} .api-params tbody tr td:first-child", "cells => cells.map(c => c.textContent)")
    assert params[0] == "run_id *"
    assert "KernelStat" in page.inner_text(f"{kernels} .api-answers")
    page.click(f"{kernels} .api-ref")  # a schema named in an answer opens where it is described
    page.wait_for_selector("details#schema-KernelStat[open]")

    runs = 'details.api-op[data-operation="list_runs"]'
    page.click(f"{runs} > summary")
    page.click(f"{runs} .api-try button[type=submit]")
    page.wait_for_selector(f'{runs} .api-answer[data-status="200"]')
    answered = page.inner_text(f"{runs} .api-answer")
    assert answered.startswith("200 OK") and answered.split("\n", 2)[2].strip().startswith("[")
    shoot(page, "api", "details.api-op")
