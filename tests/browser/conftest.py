"""The web app in headless Chromium (Debian's `chromium` package) driven by Playwright's Python
API, against a real server: uvicorn in a thread, a real nats-server, the fake simulator in a
temporary Accel-Sim tree, the samples loaded. Screenshots go to test-artifacts/screenshots/.

Playwright's own browser downloads are never used: without /usr/bin/chromium (or without
the playwright package) these tests are skipped, saying why.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from cascade_app.config import Settings
from cascade_core import events as ev
from cascade_nats import server
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_sim.world import accelsim_tree
from tests.support import LOGS

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "browser-test-token"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]



def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


if TYPE_CHECKING or missing() is None:
    from playwright.sync_api import BrowserContext, Page, sync_playwright


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Environment variables set for what starts meanwhile (the runner passes its own
    environment to each simulator it launches), restored after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def cascade(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("browser-server")
    with environment(CASCADE_FAKE_ACCELSIM_LOGS=str(LOGS)), server.running(root / "jetstream") as nats:
        settings = Settings(
            token=TOKEN, data_dir=root / "data", nats_url=nats.url, accelsim_dir=accelsim_tree(root / "accel-sim"), runner_slots=4
        )
        with live_server(settings) as live:
            yield live


@pytest.fixture(scope="module")
def api(cascade: LiveServer) -> Iterator[httpx.Client]:
    """The API as a test reads it, to check what the app shows against it."""
    with httpx.Client(base_url=cascade.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport=DESKTOP,
            accept_downloads=True,
        )
        context.set_default_timeout(20_000)
        yield context
        context.close()


# Resource errors (a 401 or 409 the app shows) are the API's answers, not the page's faults.
_EXPECTED = re.compile(r"Failed to load resource")


@pytest.fixture
def page(browser: BrowserContext, cascade: LiveServer) -> Iterator[Page]:
    """A fresh tab, signed out (the browser's session cookies cleared); fails the test on any
    script error."""
    browser.clear_cookies()
    tab = browser.new_page()
    tab.set_viewport_size(DESKTOP)
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(f"uncaught: {err}"))
    tab.on("console", lambda msg: msg.type == "error" and not _EXPECTED.search(msg.text) and errors.append(msg.text))
    yield tab
    tab.close()
    assert not errors, errors


def seed(cascade: LiveServer, events: list[ev.Event]) -> None:
    """Append events as the service's own would be, and wait until they are read."""
    # From a thread of its own: Playwright's event loop runs in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(cascade.seed, events).result()


def sign_in(page: Page, url: str, route: str = "#/runs") -> None:
    page.goto(f"{url}/{route}")
    page.fill("#token", TOKEN)
    page.click("form button[type=submit]")
    page.wait_for_selector("#token", state="detached")


# What is cut off or spills out at the current size: the page wider than the window, an
# element reaching out of its panel (unless inside something that scrolls sideways, where it
# can be scrolled to), a column header that does not show its whole title.
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const name = (el) => el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}.${[...el.classList].join('.')} "${el.textContent.trim().slice(0, 40)}"`;
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) problems.push(`the page is ${root.scrollWidth}px wide in a ${root.clientWidth}px window`);
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  for (const panel of document.querySelectorAll('.panel, .run-summary, .card')) {
    const box = panel.getBoundingClientRect();
    for (const el of panel.querySelectorAll('*')) {
      let up = el.parentElement;
      while (up !== panel && !scrolls(up)) up = up.parentElement;
      if (up !== panel) continue;
      const r = el.getBoundingClientRect();
      if (r.width && r.height && (r.left < box.left - 1 || r.right > box.right + 1)) problems.push(`${name(el)} spills out of ${name(panel)}`);
    }
  }
  const probe = document.body.appendChild(document.createElement('span'));
  for (const head of document.querySelectorAll('.vt-head > *, .table thead th')) {
    if (!head.offsetWidth || head.querySelector('.sr-only')) continue; // not shown (a phone's cards), or only to screen readers
    const cs = getComputedStyle(head);
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
    for (const p of ['fontFamily', 'fontSize', 'fontWeight', 'fontStyle', 'letterSpacing', 'textTransform']) probe.style[p] = cs[p];
    probe.textContent = head.textContent;
    const room = head.getBoundingClientRect().width - ['paddingLeft', 'paddingRight', 'borderLeftWidth', 'borderRightWidth'].reduce((a, p) => a + parseFloat(cs[p]), 0);
    if (probe.getBoundingClientRect().width > room + 0.05) problems.push(`header "${head.textContent}" is cut`);
  }
  probe.remove();
  return problems;
}"""


# Every drawn canvas at its box's width. A canvas redraws a frame after a ResizeObserver says
# its box changed, itself a frame or more after the viewport did (plot.js, chart.js,
# timeline.js: each draws at its box's clientWidth, which fitCanvas sets as its CSS width).
# A hidden box (no width) and a canvas never drawn (no data yet) have nothing to wait for.
CANVASES_FIT = """() => [...document.querySelectorAll('canvas')].every((canvas) => {
  const width = canvas.parentElement.clientWidth;
  return !width || !canvas.style.width || canvas.style.width === `${width}px`;
})"""


def shoot(page: Page, name: str, ready: str | None = None, check: Callable[[Page, str], None] | None = None) -> None:
    """Full-page screenshots of what `page` shows, at 1280×800 and at 390×844; at each size,
    nothing may be cut off or spill out (LAYOUT_PROBLEMS), and `check(page, size)` holds."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        if ready:
            page.wait_for_selector(ready)
        page.wait_for_function(CANVASES_FIT)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{size}.png"), full_page=True)
        problems = page.evaluate(LAYOUT_PROBLEMS)
        assert not problems, f"{name} at {size}: {problems}"
        if check:
            check(page, size)
    page.set_viewport_size(DESKTOP)


def wait_for_rows(page: Page, table: str, count: int) -> None:
    """Wait until the virtual table `table` shows `count` rows: vtable.js draws them a frame
    after it is given them, so right after its view is drawn it shows none yet."""
    page.wait_for_function("([table, count]) => document.querySelectorAll(`${table} .vt-row`).length === count", arg=[table, count])


def data_json(page: Page, selector: str, attribute: str) -> Any:
    return page.eval_on_selector(selector, f"el => JSON.parse(el.dataset.{attribute} ?? 'null')")
