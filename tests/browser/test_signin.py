"""Sign-in that lasts: the link `cascade serve` prints signs the browser in once and leaves the
address bar; every other tab of the browser is signed in without asking, until Sign out; a used
link is refused, saying so."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import DESKTOP, PHONE, missing, shoot
from tests.cascade_http.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_sign_in_link_signs_in_every_tab_once_until_sign_out(
    page: Any, browser: Any, cascade: LiveServer, viewport: dict[str, int]
) -> None:
    page.set_viewport_size(viewport)
    code = cascade.app.state.sessions.new_code()
    page.goto(f"{cascade.url}/#signin={code}")
    page.wait_for_selector("#runs-table")
    assert page.url == f"{cascade.url}/#/runs"  # the code is out of the address bar
    assert page.is_visible("#signout")

    other = browser.new_page()
    try:
        other.set_viewport_size(viewport)
        other.goto(f"{cascade.url}/#/traces")
        other.wait_for_selector("#traces-table")
        assert other.locator("#token").count() == 0
        other.click("#signout")
        other.wait_for_selector("#token")
    finally:
        other.close()

    # Signed out in every tab: the first one's next request says so.
    page.reload()
    page.wait_for_selector("#token")
    page.goto(f"{cascade.url}/#signin={code}")
    page.wait_for_selector("#token-error:has-text('was used already')")
    assert page.url == f"{cascade.url}/#/runs"
    shoot(page, "sign-in-link-used", "#token-error")
