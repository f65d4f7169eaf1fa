"""Deleting a run from its page in headless Chromium: no Delete while the run is active,
Delete with a confirm once it is cancelled, then the runs list without it. Each page is saved
at 1280×800 and 390×844."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser.conftest import missing, shoot
from tests.browser.test_app import running_run
from tests.cascade_http.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]


def test_a_cancelled_run_is_deleted_from_its_page_after_a_confirm(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    run = running_run(page, cascade, api, "10")  # active while the page is looked at, on a loaded machine too
    assert page.is_hidden("#delete-run") and page.is_visible("#cancel-run")
    api.post(f"/api/runs/{run['id']}/cancel")
    page.wait_for_selector(".title-badges [data-state=cancelled]")
    page.wait_for_selector("#delete-run:not([hidden])")
    shoot(page, "run-deletable", "#delete-run")

    page.click("#delete-run")
    page.wait_for_selector("dialog[open]")
    assert page.inner_text("#dialog-title") == f"Delete run {run['id']}?"
    assert page.inner_text("#dialog-message") == (
        "The run and its 2 sims' results, logs and files leave every list and query. Its events stay in the log for audits."
    )
    shoot(page, "run-delete-confirm", "dialog[open]")
    page.click("dialog[open] button[value=no]")  # kept
    page.wait_for_selector("dialog", state="detached")
    assert api.get(f"/api/runs/{run['id']}").status_code == 200

    page.click("#delete-run")
    page.click("dialog[open] button[value=yes]")
    page.wait_for_function("() => location.hash === '#/runs'")
    page.wait_for_selector("#runs-table [data-run]")  # listed: the samples
    assert page.locator(f"#runs-table [data-run='{run['id']}']").count() == 0
    assert api.get(f"/api/runs/{run['id']}").status_code == 404
    shoot(page, "runs-after-delete", "#runs-table")
