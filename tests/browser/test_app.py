"""The web app, end to end in headless Chromium: sign in, upload a shared trace, create a run on
the fake simulator and watch it finish live, cancel another, check what Timeline and Compare
draw against the API's numbers, download the Perfetto file; a dropped event stream resumes;
the samples render; 10,000 kernels stay smooth. Each page is saved at 1280×800 and 390×844."""

from __future__ import annotations

import base64
import io
import json
import re
import statistics
import tarfile
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from cascade_core import events as ev
from cascade_formats.kernel_names import short_name
from cascade_http.run_events import last_event_id
from tests.browser.conftest import DESKTOP, PHONE, data_json, environment, missing, seed, shoot, sign_in, wait_for_rows
from tests.browser.proxy import proxy_to
from tests.cascade_formats.test_kernel_names import GRAMMAR_SYMBOLS, REAL_SYMBOLS
from cascade_core.sims import FINISHED, RETRIABLE, SIM_STATES, UNDER_WAY
from tests.cascade_http import runs_world as w
from tests.cascade_http.live import LiveServer
from tests.support import TRACES

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]

FINAL = ("succeeded", "failed", "cancelled")


def create_run(api: httpx.Client, trace_id: str, config: str = "SM61_TITANX", count: int = 1, *, fresh: bool = False) -> dict[str, Any]:
    """A run of `count` sims; `fresh` ones all simulate, which a test watching sims run needs
    (else the first simulates and the others take its result, or all take an earlier run's)."""
    entry = {"gpu_config": config, "count": count, **({"fresh": True} if fresh else {})}
    response = api.post("/api/runs", json={"trace_id": trace_id, "entries": [entry]})
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def ensure_trace(api: httpx.Client, name: str) -> None:
    """A shared trace uploaded through the API (for tests that do not test uploading)."""
    if api.get(f"/api/traces/{name}").status_code == 200:
        return
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(TRACES / name, arcname=name)
    response = api.post(f"/api/traces?id={name}", content=out.getvalue(), headers={"Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text


def sim_states(page: Any) -> list[str]:
    return page.eval_on_selector_all("#sims-table tbody[data-sim] > tr:first-child", "rows => rows.map(r => r.dataset.state)")


def assert_new_run_offered_where_the_api_takes_it(page: Any, api: httpx.Client) -> None:
    """The traces list offers "New run" for ready traces that are not samples: the API
    refuses the others with 409."""
    for t in api.get("/api/traces").json():
        offered = page.locator(f"#traces-table tr[data-trace='{t['id']}'] a:has-text('New run')").count()
        assert offered == (t["state"] == "ready" and not t["sample"]), t


# Per frame, the count pills and the sims table's states, from the first frame on the page
# to the one where all `n` sims succeeded.
WATCH_COUNTS = """(n) => {
  const watch = (window.__counts = { seen: [], mismatches: [], done: false });
  const key = (counts) => JSON.stringify(Object.entries(counts).sort());
  const frame = () => {
    const pills = {};
    for (const chip of document.querySelectorAll('#run-counts .chip')) pills[chip.dataset.state] = parseInt(chip.textContent, 10);
    const table = {};
    for (const row of document.querySelectorAll('#sims-table tbody[data-sim] > tr:first-child')) table[row.dataset.state] = (table[row.dataset.state] ?? 0) + 1;
    if (key(pills) !== key(table)) watch.mismatches.push({ pills, table });
    if (watch.seen.at(-1) !== key(table)) watch.seen.push(key(table));
    if (table.succeeded === n) watch.done = true;
    else requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""


def lanes_apart(page: Any, size: str, whole: bool = True) -> None:
    """Every timeline lane tells its config and replica: on the canvas, each label ends in the
    sim's replica and no two are alike (and, if `whole`, none is cut); in the kernel table,
    the replica is never cut."""
    labels = data_json(page, "#timeline-canvas", "labels")
    lanes = sorted({(b["lane"], b["gpu_config"], b["replica"]) for b in data_json(page, "#timeline-canvas", "bars")})
    assert len(labels) == len(lanes) and len(set(labels)) == len(labels), (size, labels)
    for label, (_, config, replica) in zip(labels, lanes, strict=True):
        assert label.endswith(f"r{replica}") and (not whole or "…" not in label), (size, label, config)
    cut = page.eval_on_selector_all(
        "#timeline-kernels .vt-row .lane-name",
        """names => names.filter((name) => {
          const cell = name.parentElement.getBoundingClientRect();
          const replica = name.querySelector('.lane-replica').getBoundingClientRect();
          return replica.right > cell.right || name.scrollWidth > name.clientWidth + 1;
        }).map((name) => name.textContent)""",
    )
    assert not cut, (size, cut)


def test_sign_in_keeps_the_browser_signed_in_and_not_the_token(page: Any, cascade: LiveServer) -> None:
    page.goto(f"{cascade.url}/")
    shoot(page, "sign-in", "#token")
    page.fill("#token", "wrong")
    page.click("form button[type=submit]")
    page.wait_for_selector("#token-error:has-text('Invalid token')")
    sign_in(page, cascade.url)
    page.wait_for_selector("#runs-table")
    shoot(page, "runs-fresh-samples", "#runs-table")
    page.reload()  # kept by the browser: no second sign-in
    page.wait_for_selector("#runs-table")
    # The token is kept nowhere a script reaches; the session cookie is out of their reach too.
    assert page.evaluate("[sessionStorage.length, localStorage.length, document.cookie]") == [0, 0, ""]
    page.click("#signout")
    page.wait_for_selector("#token")
    page.reload()
    page.wait_for_selector("#token")


def test_upload_run_watch_timeline_compare_and_perfetto(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    sign_in(page, cascade.url, "#/traces")

    # Upload the shared folder through the folder picker: the app sends it as a tar stream.
    page.set_input_files("#pick-folder", str(TRACES / "combo-vec-mm-xz"))
    assert page.input_value("#upload-id") == "combo-vec-mm-xz"
    page.click("form.upload button[type=submit]")
    page.wait_for_selector("#upload-result [data-state=ready]", timeout=30_000)
    page.wait_for_selector("#traces-table tr[data-trace='combo-vec-mm-xz'][data-state=ready]")
    trace = api.get("/api/traces/combo-vec-mm-xz").json()
    assert trace["state"] == "ready" and trace["kernel_count"] == 3
    assert_new_run_offered_where_the_api_takes_it(page, api)
    shoot(page, "traces", "#traces-table")

    # Create a run: only configs of the trace's arch are offered; the API's errors are shown
    # next to the field they concern.
    page.click("#upload-result a:has-text('Create a run')")
    page.wait_for_selector("#new-run")
    assert page.input_value("#run-trace") == "combo-vec-mm-xz"
    offered = page.eval_on_selector_all("#run-configs input[type=checkbox]", "els => els.map(e => [e.dataset.config, e.checked])")
    assert offered == [["SM61_TITANX", True]]
    shoot(page, "new-run", "#new-run")
    page.fill("#cfg-SM61_TITANX-count", "65")
    page.click("#new-run button[type=submit]")
    refused = api.post("/api/runs", json={"trace_id": "combo-vec-mm-xz", "entries": [{"gpu_config": "SM61_TITANX", "count": 65}]})
    assert refused.status_code == 422
    page.wait_for_selector(f"#cfg-SM61_TITANX-error:text-is('{refused.json()['detail'][0]['msg']}')")

    with environment(CASCADE_FAKE_ACCELSIM_PACE="0.4"):
        page.fill("#cfg-SM61_TITANX-count", "3")
        page.click("#new-run button[type=submit]")
        page.wait_for_url("**/#/runs/run-*")
        run_id = page.url.rsplit("/", 1)[1]
        page.evaluate("window.__sameDocument = true")
        page.wait_for_selector("#sims-table tbody[data-sim]")
        seen_first = sim_states(page)
        # Every sim reaches succeeded on this page, pushed over the event stream.
        page.wait_for_function(
            "() => { const r = [...document.querySelectorAll('#sims-table tbody[data-sim] > tr:first-child')];"
            " return r.length === 3 && r.every(t => t.dataset.state === 'succeeded') }",
            timeout=60_000,
        )
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    assert set(seen_first) <= {"pending", "launching", "running"}, seen_first
    assert page.eval_on_selector_all("#sims-table .progress-text", "els => els.map(e => e.textContent)") == ["3 / 3"] * 3
    page.wait_for_selector(".title-badges [data-state=succeeded]")
    page.wait_for_selector("#link-status:has-text('Final')")
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["state"] == "succeeded" and run["sim_counts"] == {"succeeded": 3}
    # Each sim's total cycles, the number an architect wants first, as the log's last gpu_tot_sim_cycle.
    cycles = page.eval_on_selector_all("#sims-table .sim-cycles", "els => els.map(e => e.textContent)")
    assert cycles == [f"{s['latest']['gpu_tot_sim_cycle']:,.0f}" for s in run["sims"]] == ["18,448"] * 3

    # On demand: a sim's last log lines, and its files as downloads.
    first = page.locator("#sims-table tbody[data-sim]").first
    first.locator("[data-toggle=log]").click()
    sim = run["sims"][0]
    assert first.locator("pre.log").inner_text().splitlines() == sim["log_tail"]
    first.locator("[data-toggle=files]").click()
    files = [f["name"] for f in api.get(f"/api/sims/{sim['id']}/files").json()]
    assert first.locator("ul.files button").all_inner_texts() == files
    shoot(page, "run", "#sims-table")

    # Timeline: each sim's kernels end to end by sim_time_ns, as the API lists them.
    page.click("a[data-tab=timeline]")
    page.wait_for_selector("#timeline-canvas[data-kernels='9'][data-bars]")
    bars = data_json(page, "#timeline-canvas", "bars")
    kernels = api.get(f"/api/runs/{run_id}/kernels").json()
    expected = []
    for lane, s in enumerate(run["sims"]):
        start = 0.0
        for k in sorted((k for k in kernels if k["sim_id"] == s["id"]), key=lambda k: k["kernel_index"]):
            expected.append((lane, s["id"], k["kernel_launch_uid"], k["kernel_name"], start, k["sim_time_ns"]))
            start += k["sim_time_ns"]
    drawn = [(b["lane"], b["sim_id"], b["uid"], b["name"], b["start_ns"], b["dur_ns"]) for b in bars]
    assert [d[:4] for d in drawn] == [e[:4] for e in expected]
    assert [x for d in drawn for x in d[4:]] == pytest.approx([x for e in expected for x in e[4:]], rel=1e-12)
    wait_for_rows(page, "#timeline-kernels", 9)
    assert page.inner_text(".vt-foot[data-rows='9']") == "9 rows"
    box = page.locator("#timeline-canvas").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 28 + 12)  # the first lane, past its middle
    page.wait_for_selector("#tooltip:not([hidden]) .tip-title")
    assert "uid" in page.inner_text("#tooltip") and "IPC" in page.inner_text("#tooltip")
    page.focus("#timeline-canvas")
    longest = max(e[4] + e[5] for e in expected)
    page.keyboard.press("+")
    page.wait_for_function("(end) => JSON.parse(document.querySelector('#timeline-canvas').dataset.view).span_ns < end", arg=longest)
    page.keyboard.press("0")
    page.wait_for_function("(end) => JSON.parse(document.querySelector('#timeline-canvas').dataset.view).span_ns > end", arg=longest)
    shoot(page, "timeline", "#timeline-canvas", check=lanes_apart)

    # Compare: the table and the chart draw the API's comparison.
    page.click("a[data-tab=compare]")
    comparison = api.get(f"/api/runs/{run_id}/comparison").json()
    page.wait_for_selector(f"#compare-table .vt-row >> nth={len(comparison['rows']) - 1}")
    cells = page.eval_on_selector_all("#compare-table .vt-row [data-config]", "els => els.map(e => [e.dataset.config, Number(e.dataset.ns)])")
    assert cells == [["SM61_TITANX", pytest.approx(r["sim_ns"]["SM61_TITANX"])] for r in comparison["rows"]]
    # No line joins one kernel to the next; the three replicas' spread is drawn per kernel,
    # around the comparison's medians (the fake simulator's replicas agree to the cycle).
    assert not page.query_selector("#compare-chart")
    spread = data_json(page, "#spread-chart", "spread")
    by_kernel = {i: [k["sim_time_ns"] for k in kernels if k["kernel_index"] == i] for i in range(3)}
    assert spread == [
        {"gpu_config": "SM61_TITANX", "kernel_index": i, "replicas": 3, "min_ns": min(t), "median_ns": pytest.approx(r["sim_ns"]["SM61_TITANX"]), "max_ns": max(t)}
        for (i, t), r in zip(by_kernel.items(), comparison["rows"])
    ]
    assert "Every replica took the same time on every kernel." in page.inner_text("#pic-spread")
    assert page.is_hidden("#pic-scatter") and page.is_hidden("#pic-ratios")  # no real timing, one config
    total = float(page.get_attribute("#compare-summary [data-config=SM61_TITANX]", "data-total") or "nan")
    assert total == pytest.approx(sum(r["sim_ns"]["SM61_TITANX"] for r in comparison["rows"]))
    shoot(page, "compare", "#compare-table")

    # Perfetto: a Chrome trace JSON with a slice per kernel.
    with page.expect_download() as download:
        page.click("button[data-download$='/perfetto']")
    perfetto = json.loads(download.value.path().read_text())
    assert download.value.suggested_filename == f"{run_id}-perfetto.json"
    assert len([e for e in perfetto["traceEvents"] if e.get("cat") == "kernel"]) == 9
    # A run this small downloads its results as one JSON document.
    with page.expect_download() as download:
        page.click(f"button[data-download='/api/runs/{run_id}/results']:has-text('Results JSON')")
    assert download.value.suggested_filename == f"{run_id}-results.json"
    assert len(json.loads(download.value.path().read_text())["sims"]) == 3
    # Everything in one zip: the results, and per sim its log and output files.
    with page.expect_download() as download:
        page.click(f"button[data-download='/api/runs/{run_id}/archive']")
    assert download.value.suggested_filename == f"{run_id}.zip"
    names = zipfile.ZipFile(download.value.path()).namelist()
    assert len([n for n in names if n.endswith("/simulator.log")]) == 3 and "run.json" in names
    assert {n.split("/")[2] for n in names if n.count("/") == 3} == {"files"}

    # The runs list shows it, filtered by trace.
    page.goto(f"{cascade.url}/#/runs?trace=combo-vec-mm-xz")
    page.wait_for_selector(f"#runs-table tr[data-run='{run_id}'][data-state=succeeded]")
    # Its total cycles without opening it: one config, so the number alone, its three replicas alike.
    shown = page.locator(f"#runs-table tr[data-run='{run_id}'] .run-cycles [data-config=SM61_TITANX]")
    assert shown.inner_text() == "18,448"
    assert shown.get_attribute("title") == "gpu_tot_sim_cycle, median of 3 succeeded replicas that simulated every launch"
    shoot(page, "runs", "#runs-table")


def test_archive_upload_and_a_failed_trace(page: Any, cascade: LiveServer, api: httpx.Client, tmp_path: Any) -> None:
    archive = tmp_path / "vectoradd.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(TRACES / "vectoradd-100-32", arcname="vectoradd-100-32")
    broken = tmp_path / "no-kernelslist.tar.gz"
    with tarfile.open(broken, "w:gz") as tar:
        info = tarfile.TarInfo("notes/readme.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    sign_in(page, cascade.url, "#/traces")

    page.set_input_files("#pick-archive", str(archive))
    assert page.input_value("#upload-id") == "vectoradd"
    page.click("form.upload button[type=submit]")
    page.wait_for_selector("#upload-result [data-state=ready]", timeout=30_000)
    assert api.get("/api/traces/vectoradd").json()["kernel_count"] == 1

    # The id is taken now: the API's 409 is shown next to the id.
    page.set_input_files("#pick-archive", str(archive))
    page.click("form.upload button[type=submit]")
    taken = api.post("/api/traces?id=vectoradd", content=archive.read_bytes(), headers={"Content-Type": "application/x-xz"})
    assert taken.status_code == 409
    page.wait_for_selector(f"#upload-id-error:text-is('{taken.json()['detail']}')")

    page.set_input_files("#pick-archive", str(broken))
    page.click("form.upload button[type=submit]")
    page.wait_for_selector("#upload-result [data-state=failed]")
    error = api.get("/api/traces/no-kernelslist").json()["error"]
    assert page.inner_text("#upload-result p") == error
    page.wait_for_selector("#traces-table tr[data-trace='no-kernelslist'][data-state=failed] .row-error")
    assert page.inner_text("#traces-table tr[data-trace='no-kernelslist'] .row-error") == error
    assert_new_run_offered_where_the_api_takes_it(page, api)
    shoot(page, "traces-failed", "#traces-table")


def running_run(page: Any, cascade: LiveServer, api: httpx.Client, pace: str) -> dict[str, Any]:
    """A run of two sims on the combo trace, shown once both run (a kernel every `pace` s).

    The pace is the environment the runner starts each simulator with, so it is kept until
    both have started: a sim the runner started after it would finish at once."""
    ensure_trace(api, "combo-vec-mm-xz")
    with environment(CASCADE_FAKE_ACCELSIM_PACE=pace):
        run = create_run(api, "combo-vec-mm-xz", count=2, fresh=True)
        sign_in(page, cascade.url, f"#/runs/{run['id']}")
        page.wait_for_function(
            "() => { const rows = [...document.querySelectorAll('#sims-table tbody[data-sim] > tr:first-child')];"
            " return rows.length === 2 && rows.every(t => t.dataset.state === 'running'); }",
            timeout=30_000,
        )
    return run


def test_cancel_a_running_run(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    run = running_run(page, cascade, api, "10")  # unfinished while the dialog is used, on a loaded machine too
    shoot(page, "run-live", "#sims-table")
    page.click("#cancel-run")
    page.wait_for_selector("dialog[open]")
    shoot(page, "cancel-confirm", "dialog[open]")
    page.click("dialog[open] button[value=yes]")
    page.wait_for_selector(".title-badges [data-state=cancelled]")
    page.wait_for_function("() => [...document.querySelectorAll('#sims-table tbody[data-sim] > tr:first-child')].every(t => t.dataset.state === 'cancelled')")
    assert page.is_hidden("#cancel-run")
    assert api.get(f"/api/runs/{run['id']}").json()["state"] == "cancelled"
    shoot(page, "run-cancelled", "#sims-table")


def test_retry_a_cancelled_run_then_add_sims_to_it(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    run = running_run(page, cascade, api, "30")  # retried at the usual pace
    assert page.is_hidden("#retry-run")
    # Both running, so each is retried as its attempt 2.
    api.post(f"/api/runs/{run['id']}/cancel")
    page.wait_for_selector(".title-badges [data-state=cancelled]")
    page.wait_for_selector("#retry-run:not([hidden])")
    page.click("#retry-run")
    page.wait_for_selector(".title-badges [data-state=succeeded]", timeout=60_000)
    assert sim_states(page) == ["succeeded", "succeeded"] and page.is_hidden("#retry-run")
    detail = api.get(f"/api/runs/{run['id']}").json()
    for sim in detail["sims"]:
        row = f"#sims-table tbody[data-sim='{sim['id']}']"
        assert page.inner_text(f"{row} .sim-attempt").strip() == f"attempt {sim['attempt']}"
        assert page.inner_text(f"{row} .sim-attempts summary") == "1 earlier attempt"
    page.click(f"#sims-table tbody[data-sim='{detail['sims'][0]['id']}'] .sim-attempts summary")
    assert page.inner_text(f"#sims-table tbody[data-sim='{detail['sims'][0]['id']}'] .sim-attempts li").startswith("attempt 1 cancelled")
    assert len(api.get(f"/api/runs/{run['id']}/kernels").json()) == 6, "the new attempts' kernels, once each"
    page.wait_for_function("() => document.querySelector('.progress-text')?.textContent.startsWith('6 / 6')")
    shoot(page, "run-retried", "#sims-table")

    page.click("#add-sims")
    page.wait_for_selector("#add-sims-dialog[open] #add-config option[value=SM61_TITANX]", state="attached")
    page.fill("#add-count", "0")
    page.click("#add-submit")
    page.wait_for_selector("#add-error:has-text('greater than or equal to 1')")
    shoot(page, "add-sims-refused", "#add-sims-dialog[open]")
    page.fill("#add-count", "2")
    page.click("#add-submit")
    page.wait_for_selector("#add-sims-dialog", state="detached")
    page.wait_for_function("() => document.querySelectorAll('#sims-table tbody[data-sim]').length === 4")
    page.wait_for_selector(".title-badges [data-state=succeeded]", timeout=60_000)
    assert sim_states(page) == ["succeeded"] * 4
    assert api.get(f"/api/runs/{run['id']}").json()["entries"] == [{"gpu_config": "SM61_TITANX", "count": 2, "fresh": True}, {"gpu_config": "SM61_TITANX", "count": 2}]


def test_a_dropped_stream_resumes_from_the_last_event(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    ensure_trace(api, "combo-vec-mm-xz")
    streams: list[dict[str, str]] = []
    page.on("request", lambda r: r.url.endswith("/events") and streams.append(r.headers))
    with proxy_to(cascade.url) as proxy, environment(CASCADE_FAKE_ACCELSIM_PACE="1"):
        run = create_run(api, "combo-vec-mm-xz", count=2, fresh=True)
        sign_in(page, f"http://127.0.0.1:{proxy.port}", f"#/runs/{run['id']}/timeline")
        page.wait_for_selector("#timeline-canvas[data-kernels]:not([data-kernels='0'])", timeout=30_000)
        page.evaluate("window.__sameDocument = true")
        proxy.drop()
        page.wait_for_function("() => document.querySelector('.title-badges [data-state]')?.dataset.state === 'succeeded'", timeout=60_000)
        page.wait_for_selector("#timeline-canvas[data-kernels='6']")
    assert page.evaluate("window.__sameDocument") is True
    assert len(streams) >= 2 and "last-event-id" not in streams[0] and last_event_id(streams[1]["last-event-id"]) is not None
    bars = data_json(page, "#timeline-canvas", "bars")
    kernels = api.get(f"/api/runs/{run['id']}/kernels").json()
    assert sorted((b["sim_id"], b["kernel_index"]) for b in bars) == sorted((k["sim_id"], k["kernel_index"]) for k in kernels)


def test_samples_render_and_cannot_be_run(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    runs = {r["id"]: r for r in api.get("/api/runs").json()}
    sample = next((r for r in runs.values() if r["sample"] and r["entries"][0]["gpu_config"] == "SM90_H100"), None)
    if sample is None:
        pytest.skip("the server has no LLM-serving sample run")
    sign_in(page, cascade.url, f"#/runs/{sample['id']}/compare")
    comparison = api.get(f"/api/runs/{sample['id']}/comparison").json()
    assert comparison["has_real_timing"]
    page.wait_for_selector("#compare-summary [data-config=SM90_H100]")
    assert_shows_scores(page, "#correlation-table", comparison["correlation"])

    # The serving steps: TTFT / ITL / e2e, real vs simulated, per config.
    timelines = api.get(f"/api/runs/{sample['id']}/step-timelines").json()
    page.wait_for_selector("#requests-table")
    for metric in ("ttft_ms", "itl_ms_mean", "itl_ms_p50", "e2e_ms"):
        simulated = statistics.median(t["compare"]["requests"][0][metric]["simulated"] for t in timelines)
        shown = page.get_attribute(f"#requests-table tr[data-metric={metric}] td[data-config=SM90_H100]", "data-ms")
        assert float(shown or "nan") == pytest.approx(simulated)
    wait_for_rows(page, "#steps-table", len(timelines[0]["compare"]["steps"]))
    # Under 1 % of its kernels simulated: its near-zero errors come with a caveat saying so,
    # beside the mean errors and the requests' errors.
    fraction = statistics.median(t["simulated"]["summary"]["simulation"]["coverage"]["kernel_fraction"] for t in timelines)
    assert fraction < 0.01
    for caveat in ("#steps-summary [data-config=SM90_H100] .caveat", "#requests-table caption .caveat[data-config=SM90_H100]"):
        assert page.is_visible(caveat)
        assert f"{100 * fraction:.2f} %" in page.inner_text(caveat), page.inner_text(caveat)
    shoot(page, "compare-serving", "#steps-table")

    page.click("a[data-tab=timeline]")
    page.wait_for_selector("#timeline-canvas[data-bars]")
    shoot(page, "timeline-serving", "#timeline-canvas")
    page.emulate_media(color_scheme="dark")
    shoot(page, "timeline-serving-dark", "#timeline-canvas")
    page.emulate_media(color_scheme="light")

    # A sample trace cannot run (the API refuses it), so the form does not offer it, and
    # says why when asked for one.
    traces = api.get("/api/traces").json()
    trace = next(t for t in traces if t["sample"] and t["trace_gpu_arch"] == "sm_61")
    refused = api.post("/api/runs", json={"trace_id": trace["id"], "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
    assert refused.status_code == 409
    page.goto(f"{cascade.url}/#/runs/new?trace={trace['id']}")
    page.wait_for_selector("#new-run, .state-empty")
    offered = page.eval_on_selector_all("#run-trace option", "els => els.map(e => e.value)")
    assert offered == [t["id"] for t in traces if t["state"] == "ready" and not t["sample"]]
    assert "is a sample" in page.inner_text("#run-trace-note, .state-empty")
    shoot(page, "new-run-sample-refused", "#run-trace-note, .state-empty")


def test_the_counts_follow_the_sims_live(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """The pills over a run's page count the sims as the table shows them, in every frame,
    while the sims go from pending to running to succeeded (more sims than runner slots, so
    some wait while others finish)."""
    ensure_trace(api, "combo-vec-mm-xz")
    with environment(CASCADE_FAKE_ACCELSIM_PACE="0.5"):
        run = create_run(api, "combo-vec-mm-xz", count=6, fresh=True)
        sign_in(page, cascade.url, f"#/runs/{run['id']}")
        page.wait_for_selector("#sims-table tbody[data-sim]")
        page.evaluate(WATCH_COUNTS, 6)
        shoot(page, "run-counts-live", "#sims-table")
        page.wait_for_function("() => window.__counts.done", timeout=90_000)
    watched = page.evaluate("window.__counts")
    assert not watched["mismatches"], watched["mismatches"][:5]
    mixed = [json.loads(k) for k in watched["seen"] if len(json.loads(k)) > 1 and "succeeded" in dict(json.loads(k))]
    assert mixed, f"never saw some sims succeeded while others were not: {watched['seen']}"
    assert page.inner_text("#run-counts") == "6 succeeded"
    assert api.get(f"/api/runs/{run['id']}").json()["sim_counts"] == {"succeeded": 6}


COMBO_KERNELS = [("_Z6vecAddIfEvPT_S1_S1_i", 5533), ("_Z8mult_gpuIfEvPT_S1_S1_ii", 7506), ("_Z6vecAddIfEvPT_S1_S1_i", 5409)]
CLOCKS = {"SM61_TITANX": 1417.0, "SM7_QV100": 1132.0, "SM61_TITANX_L2x2_assoc16": 1417.0, "SM61_TITANX_L2x2_assoc32": 1417.0}


def seed_combo_run(cascade: LiveServer, run_id: str, trace_id: str, sims: list[tuple[str, str, int]], lives: Iterable[ev.Event]) -> None:
    """A ready trace of the combo's three kernels, a run of `sims` on it (a sample's, which no
    runner takes), and the sims' `lives`."""
    trace = w.trace_events(trace_id, arch="sm_61", kernel_count=3, step_timeline=False)
    seed(cascade, [*trace, w.run_created(run_id, sims, trace_id=trace_id, kernels_total=3, sample=True), *lives])


def test_compare_and_timeline_of_two_configs(page: Any, cascade: LiveServer) -> None:
    """Two configs with two replicas each: Compare's headers ("vs SM61_TITANX") are whole,
    and the timeline's lanes tell config and replica apart, at both sizes."""
    run_id = "run-twoconfigs001"
    sims = [(f"sim-twoconfigs{c}{r}", config, r) for c, config in enumerate(("SM61_TITANX", "SM7_QV100")) for r in range(2)]
    at = datetime(2026, 11, 8, 9, tzinfo=UTC)
    lives = (e for sim_id, config, r in sims for e in w.finished_sim(run_id, sim_id, [(n, c + 97 * r) for n, c in COMBO_KERNELS], CLOCKS[config], at))
    seed_combo_run(cascade, run_id, "two-configs", sims, lives)
    sign_in(page, cascade.url, f"#/runs/{run_id}/compare")
    page.wait_for_selector("#compare-table .vt-row")
    headers = page.eval_on_selector_all("#compare-table .vt-head > *", "els => els.map(e => e.textContent)")
    assert headers == ["#", "Kernel", "SM61_TITANX", "SM7_QV100", "vs SM61_TITANX"]
    shoot(page, "compare-configs", "#compare-table .vt-row")
    page.click("a[data-tab=timeline]")
    page.wait_for_selector("#timeline-canvas[data-kernels='12'][data-labels]")
    shoot(page, "timeline-configs", "#timeline-canvas", check=lanes_apart)


def test_timeline_lanes_of_long_configs_alike_but_for_their_end_stay_apart_on_a_phone(page: Any, cascade: LiveServer) -> None:
    """Two variants whose names differ only at their end: on a phone their lane labels are
    cut in the middle, never at the end that tells them apart."""
    run_id = "run-longconfigs01"
    configs = ("SM61_TITANX_L2x2_assoc16", "SM61_TITANX_L2x2_assoc32")
    sims = [(f"sim-longconfigs{c}{r}", config, r) for c, config in enumerate(configs) for r in range(2)]
    at = datetime(2026, 11, 8, 9, tzinfo=UTC)
    lives = (e for sim_id, config, r in sims for e in w.finished_sim(run_id, sim_id, [(n, c + 97 * r) for n, c in COMBO_KERNELS], CLOCKS[config], at))
    seed_combo_run(cascade, run_id, "long-configs", sims, lives)
    sign_in(page, cascade.url, f"#/runs/{run_id}/timeline")
    page.wait_for_selector("#timeline-canvas[data-kernels='12'][data-labels]")
    shoot(page, "timeline-long-configs", "#timeline-canvas", check=lambda p, size: lanes_apart(p, size, whole=False))
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function("() => JSON.parse(document.querySelector('#timeline-canvas').dataset.labels).some((l) => l.includes('…'))")
    labels = data_json(page, "#timeline-canvas", "labels")
    assert [label.split("…")[-1].split(" ")[0][-2:] for label in labels] == ["16", "16", "32", "32"], labels


def test_a_sample_trace_is_deleted_from_the_traces_page_with_its_runs(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    run_id = "run-sampledelete1"
    at = datetime(2026, 11, 8, 9, tzinfo=UTC)
    seed(
        cascade,
        [
            *w.trace_events("sample-to-delete", arch="sm_61", kernel_count=1, step_timeline=False, sample=True),
            w.run_created(run_id, [("sim-sampledelete0", "SM61_TITANX", 0)], trace_id="sample-to-delete", kernels_total=1, sample=True),
            *w.finished_sim(run_id, "sim-sampledelete0", [("_Z6vecAddIfEvPT_S1_S1_i", 5533)], 1417.0, at),
        ],
    )
    sign_in(page, cascade.url, "#/traces")
    row = "#traces-table tr[data-trace='sample-to-delete']"
    page.click(f"{row} button:has-text('Delete')")
    assert page.inner_text("#dialog-message") == "A sample that ships with Cascade: it and its sample runs are removed, and not loaded again."
    page.click(".dialog button[value=yes]")
    page.wait_for_selector(row, state="detached")
    assert api.get(f"/api/runs/{run_id}").status_code == 404


def test_compare_on_an_active_run_says_its_totals_are_partial(page: Any, cascade: LiveServer) -> None:
    """One config has finished every kernel, the other one of three and goes on: Compare says
    the comparison is partial, and totals both configs over the kernel both have."""
    run_id = "run-partial00001"
    sims = [("sim-partial0", "SM61_TITANX", 0), ("sim-partial1", "SM7_QV100", 0)]
    at = datetime(2026, 11, 8, 9, tzinfo=UTC)
    lives = [
        *w.finished_sim(run_id, sims[0][0], COMBO_KERNELS, CLOCKS["SM61_TITANX"], at),
        *w.finished_sim(run_id, sims[1][0], COMBO_KERNELS[:1], CLOCKS["SM7_QV100"], at)[:3],  # claimed, launched, its first kernel
    ]
    seed_combo_run(cascade, run_id, "partial", sims, lives)
    sign_in(page, cascade.url, f"#/runs/{run_id}/compare")
    page.wait_for_selector("#compare-partial")
    assert page.inner_text("#compare-partial") == "Partial: 1 of 3 kernels finished by every config. The totals and ratios below are over those."
    totals = [float(page.get_attribute(f"#compare-summary [data-config={c}]", "data-total") or "nan") for c in ("SM61_TITANX", "SM7_QV100")]
    assert totals == [pytest.approx(5533 / 1417.0 * 1000), pytest.approx(5533 / 1132.0 * 1000)]
    shoot(page, "compare-partial", "#compare-partial")


def test_a_sim_whose_runner_is_gone_says_so_on_the_run_and_in_its_row(page: Any, cascade: LiveServer) -> None:
    """A sim claimed by a runner that is no longer there: the run's page and the sim's row
    say it was lost (what Get a run says), at both sizes."""
    run_id = "run-lostrunner001"
    sims = [("sim-lostrunner0", "SM61_TITANX", 0), ("sim-lostrunner1", "SM61_TITANX", 1)]
    at = datetime.now(UTC)
    claimed = ev.SimClaimed(id=w.event_id(), at=at, run_id=run_id, sim_id=sims[1][0], attempt=1, runner_id="vm-gone", host="h")
    seed(
        cascade,
        [
            *w.trace_events("lost-runner", arch="sm_61", kernel_count=1, step_timeline=False),
            w.run_created(run_id, sims, trace_id="lost-runner", kernels_total=1, sample=True),
            *w.finished_sim(run_id, sims[0][0], [("_Z6vecAddIfEvPT_S1_S1_i", 5533)], 1417.0, at),
            claimed,
        ],
    )
    sign_in(page, cascade.url, f"#/runs/{run_id}")
    page.wait_for_selector("#run-attention:not([hidden])")
    assert page.inner_text("#run-attention") == "1 sim may never finish unless someone acts: runner vm-gone lost"
    assert page.inner_text(f'#sims-table tbody[data-sim="{sims[1][0]}"] .row-attention') == "runner vm-gone lost"
    assert not page.query_selector(f'#sims-table tbody[data-sim="{sims[0][0]}"] .row-attention')
    shoot(page, "run-runner-lost", "#run-attention")


def assert_shows_scores(page: Any, table: str, scores: dict[str, dict[str, float | None]]) -> None:
    """A scores table shows the API's: per config row, each score cell's number (all but
    hw_zero, which the caption mentions only when a kernel was left out for it)."""
    cells = page.eval_on_selector_all(
        f"{table} tbody tr", "rows => rows.map(r => [r.dataset.config, [...r.querySelectorAll('td')].map(c => [c.dataset.score, c.dataset.value])])"
    )
    shown = {config: {k: float(v) if v != "" else None for k, v in values} for config, values in cells}
    assert shown == {config: {k: v for k, v in values.items() if k != "hw_zero"} for config, values in scores.items()}
    assert all(values["hw_zero"] == 0 for values in scores.values()) == ("left out" not in page.inner_text(f"{table}-title"))


def test_compare_scores_real_time_and_cycles_with_the_spread_of_repetitions(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """Real timing attached through the API (ncu's raw page, two passes): Compare shows the
    API's scores per config against real time and against real cycles, and each kernel's
    real time with its repetitions' range."""
    run_id = "run-realtiming01"
    sims = [(f"sim-realtiming{c}", config, 0) for c, config in enumerate(("SM61_TITANX", "SM7_QV100"))]
    clocks = {"SM61_TITANX": 1417.0, "SM7_QV100": 1132.0}
    at = datetime(2026, 11, 8, 9, tzinfo=UTC)
    cycles = {"SM61_TITANX": [5533, 7506, 5409], "SM7_QV100": [6100, 7300, 6000]}
    seed(
        cascade,
        [
            *w.trace_events("real-timed", arch="sm_61", kernel_count=3, step_timeline=False),
            w.run_created(run_id, sims, trace_id="real-timed", kernels_total=3, sample=True),
            *(e for sim_id, config, _ in sims for e in w.finished_sim(run_id, sim_id, [(f"_Z6kernelv{i + 1}", c) for i, c in enumerate(cycles[config])], clocks[config], at)),
        ],
    )
    header = '"ID","Kernel Name","gpu__time_duration.sum","gpc__cycles_elapsed.avg"\n"","","usecond","cycle"\n'
    passes = [[(3.9, 5500), (5.1, 7000), (3.7, 5300)], [(4.1, 5700), (5.3, 7400), (3.9, 5500)]]
    body = "".join(header + "".join(f'"{i}","_Z6kernelv{i + 1}","{us}","{c:,}"\n' for i, (us, c) in enumerate(p)) for p in passes)
    attached = api.put("/api/traces/real-timed/real-timing", content=body, headers={"Content-Type": "text/csv"})
    assert attached.status_code == 200, attached.text
    comparison = api.get(f"/api/runs/{run_id}/comparison").json()

    sign_in(page, cascade.url, f"#/runs/{run_id}/compare")
    page.wait_for_selector("#cycles-correlation-table tbody tr[data-config=SM7_QV100]")
    assert_shows_scores(page, "#correlation-table", comparison["correlation"])
    assert_shows_scores(page, "#cycles-correlation-table", comparison["cycles_correlation"])
    headers = page.eval_on_selector_all("#correlation-table thead th", "els => els.map(e => e.textContent)")
    assert headers == ["Config", "Kernels", "Correl", "Err", "Agg_Err", "RPD", "NRMSE", "< 1 %", "< 10 %", "Over", "Under"]
    wait_for_rows(page, "#compare-table", len(comparison["rows"]))
    real = page.eval_on_selector_all("#compare-table .vt-row [data-real-ns]", "els => els.map(e => Number(e.dataset.realNs))")
    ranges = page.eval_on_selector_all("#compare-table .vt-row [data-real-min]", "els => els.map(e => [e.dataset.realMin, e.dataset.realMax].map(Number))")
    assert (real, ranges) == ([r["real_ns"] for r in comparison["rows"]], [[r["real_ns_spread"]["min"], r["real_ns_spread"]["max"]] for r in comparison["rows"]])
    first = comparison["rows"][0]
    above, below = ((first["real_ns_spread"]["max"] - 4000) / 40, (4000 - first["real_ns_spread"]["min"]) / 40)
    assert f"+{above:.2f} % / −{below:.2f} %" in page.inner_text("#compare-table .vt-row >> nth=0")
    card = page.inner_text("#compare-summary [data-config=SM61_TITANX]")
    assert f"{comparison['correlation']['SM61_TITANX']['err_under_10pct']} of 3" in card
    shoot(page, "compare-real-timing", "#cycles-correlation-table")


def test_ten_thousand_kernels_stay_smooth(page: Any, cascade: LiveServer) -> None:
    run_id, sim_id, n = "run-big000000001", "sim-big000000001", 10_000
    names = [f"_Z{len(f'kernel_{i}')}kernel_{i}Pf" for i in range(40)]
    kernels = [(names[i % 40], 1000 + (i * 7919) % 50_000) for i in range(n)]
    seed(
        cascade,
        [
            *w.trace_events("big", arch="sm_61", kernel_count=1, step_timeline=False),  # its kernel list: a stand-in
            w.run_created(run_id, ((sim_id, "SM61_TITANX", 0),), trace_id="big", kernels_total=n, sample=True),
            *w.finished_sim(run_id, sim_id, kernels, 1417.0, datetime(2026, 11, 8, 9, tzinfo=UTC)),
        ],
    )

    sign_in(page, cascade.url, f"#/runs/{run_id}/timeline")
    page.wait_for_selector(f"#timeline-canvas[data-kernels='{n}']", timeout=30_000)
    # A zoom step redraws within a frame's budget, however many kernels.
    frame_ms = page.evaluate(
        """async () => {
          const c = document.querySelector('#timeline-canvas');
          const r = c.getBoundingClientRect();
          const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
          await frame();
          const t0 = performance.now();
          for (let i = 0; i < 20; i++) {
            c.dispatchEvent(new WheelEvent('wheel', { deltaY: i < 10 ? -120 : 120, clientX: r.left + r.width / 2, clientY: r.top + 40, bubbles: true, cancelable: true }));
            await frame();
          }
          return (performance.now() - t0) / 20;
        }"""
    )
    assert frame_ms < 50, f"{frame_ms:.1f} ms a frame"
    assert page.locator("#timeline-kernels .vt-row").count() < 60  # virtualised: only what is in view
    # The box says how many rows it holds and which are in view, until its end is.
    page.wait_for_function("() => document.querySelector('.vt-foot[data-rows=\"10000\"]')")
    said = page.inner_text(".vt-foot[data-rows='10000']")
    assert re.fullmatch(r"rows 1–\d+ of 10,000 · scroll for more", said), said
    page.eval_on_selector("[aria-label='Kernels on the timeline, scrollable']", "body => body.scrollTop = body.scrollHeight")
    page.wait_for_function("() => /of 10,000$/.test(document.querySelector('.vt-foot[data-rows=\"10000\"]').textContent)")
    assert re.fullmatch(r"rows [\d,]+–10,000 of 10,000", page.inner_text(".vt-foot[data-rows='10000']"))
    page.click("a[data-tab=compare]")
    page.wait_for_selector("#compare-table .vt-row")
    assert page.locator("#compare-table .vt-row").count() < 60
    page.click("a[data-tab=sims]")
    page.wait_for_selector("#sims-table tbody[data-sim] .progress-text:has-text('10,000 / 10,000')")
    # Too large for one JSON document: the Results button downloads the zip of a file per sim.
    results = page.locator(f"button[data-download='/api/runs/{run_id}/results?format=zip']")
    assert results.inner_text() == "Results zip"
    with page.expect_download() as downloaded:
        results.click()
    assert downloaded.value.suggested_filename == f"{run_id}-results.zip"


def test_the_web_apps_sim_states_are_the_cores(page: Any, cascade: LiveServer) -> None:
    page.goto(f"{cascade.url}/")
    shown = page.evaluate(
        "async () => { const s = await import('/static/js/simstates.js'); "
        "return [s.SIM_STATES, ...[s.FINISHED, s.UNDER_WAY, s.RETRIABLE].map((set) => [...set])]; }"
    )
    every, finished, under_way, retriable = shown
    assert sorted(every) == sorted(SIM_STATES)
    assert (set(finished), set(under_way), set(retriable)) == (FINISHED, UNDER_WAY, RETRIABLE)


def test_folder_archives_built_in_the_browser_read_back(page: Any, cascade: LiveServer) -> None:
    """tar.js: ustar headers, pax records for long and non-ASCII paths, contents padded."""
    files = {"t/kernelslist.g": "kernel-1.traceg\n", "t/" + "d" * 120 + "/k.traceg": "x" * 1000, "t/ünïcode.txt": "", "t/b.bin": "\x00" * 513}
    page.goto(f"{cascade.url}/")
    encoded = page.evaluate(
        """async (files) => {
          const { tarBlob } = await import('/static/js/tar.js');
          const blob = tarBlob(Object.entries(files).map(([path, text]) => ({ path, file: new File([text], path.split('/').pop()) })));
          const bytes = new Uint8Array(await blob.arrayBuffer());
          let s = '';
          for (const b of bytes) s += String.fromCharCode(b);
          return btoa(s);
        }""",
        files,
    )
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(encoded))) as tar:
        read = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert read == files


def test_the_timeline_marks_a_split_sims_chunks(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """A sim split per kernel on the combo trace: its lane is its three kernels end to end, as
    for the sim run whole, marked where each chunk begins; the tooltip says the chunk."""
    ensure_trace(api, "combo-vec-mm-xz")
    entry = {"gpu_config": "SM61_TITANX", "count": 1, "split": {"kernels_per_chunk": 1, "warmup": 2}}
    created = api.post("/api/runs", json={"trace_id": "combo-vec-mm-xz", "entries": [entry]})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    sign_in(page, cascade.url, f"#/runs/{run_id}/timeline")
    page.wait_for_selector("#timeline-canvas[data-kernels='3'][data-chunks]")
    page.wait_for_function("JSON.parse(document.querySelector('#timeline-canvas').dataset.chunks).length === 3")
    chunks = data_json(page, "#timeline-canvas", "chunks")
    bars = data_json(page, "#timeline-canvas", "bars")
    assert [(c["index"], c["first"], c["last"], c["warmup"]) for c in chunks] == [(0, 1, 1, 0), (1, 2, 2, 1), (2, 3, 3, 2)]
    assert [(c["start_ns"], c["end_ns"]) for c in chunks] == [(b["start_ns"], b["start_ns"] + b["dur_ns"]) for b in bars]
    box = page.query_selector("#timeline-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 40, box["y"] + 28 + 12)  # the last bar: chunk 3
    page.wait_for_selector("#tooltip:not([hidden]) .tip-title")
    assert "3 of 3: launches 3–3, after 2 warm-up launches (succeeded, attempt 1)" in page.inner_text("#tooltip")
    shoot(page, "timeline-split", "#timeline-canvas")


def run_from_form(page: Any, cascade: LiveServer, api: httpx.Client, trace: str, picture: str, *boxes: str) -> str:
    """The id of the run the new-run form creates of `trace` with these boxes checked,
    pictured (`picture`) before it is created."""
    ensure_trace(api, trace)
    sign_in(page, cascade.url, f"#/runs/new?trace={trace}")
    page.wait_for_selector("#new-run")
    for box in boxes:
        page.check(box)
    shoot(page, picture, "#new-run")
    page.click("#new-run button[type=submit]")
    page.wait_for_url("**/#/runs/run-*")
    return str(page.url.rsplit("/", 1)[1])


def test_a_run_reusing_repeated_kernels_from_the_form(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """The new-run form's reuse box makes every entry reuse repeated kernels: matrixmul-x40's
    launches 3-40 take launch 2's result, which the timeline's tooltip says."""
    run_id = run_from_form(page, cascade, api, "matrixmul-x40", "new-run-reuse", "#run-reuse")
    assert api.get(f"/api/runs/{run_id}").json()["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1, "reuse": True}]
    page.goto(f"{cascade.url}/#/runs/{run_id}/timeline")
    page.wait_for_selector("#timeline-canvas[data-kernels='40']", timeout=60_000)
    box = page.query_selector("#timeline-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 40, box["y"] + 28 + 12)  # the last bar: launch 40
    page.wait_for_selector("#tooltip:not([hidden]) .tip-title")
    assert "not simulated: the result of launch 2" in page.inner_text("#tooltip")


def test_a_sim_cut_short_says_so_on_the_run_and_in_its_row(page: Any, cascade: LiveServer) -> None:
    """A sim the simulator stopped at its cycle limit: succeeded, with a notice on the run's
    page and a badge and the API's words in its row; the runs list counts it."""
    run_id = "run-cutshort0001"
    sims = [("sim-cutshort0", "SM61_TITANX", 0), ("sim-cutshort1", "SM61_TITANX", 1)]
    at = datetime.now(UTC)
    cut = ev.CutShort(
        limit_option="-gpgpu_max_cycle", limit_value=1000, kernels_done=0, kernels_total=1,
        partial=ev.PartialKernel(uid=1, name="_Z6vecAddIfEvPT_S1_S1_i", gpu_sim_cycle=1000, gpu_sim_insn=0),
    )
    common: dict[str, Any] = {"run_id": run_id, "sim_id": sims[1][0], "attempt": 1}
    seed(
        cascade,
        [
            *w.trace_events("cut-short", arch="sm_61", kernel_count=1, step_timeline=False),
            w.run_created(run_id, sims, trace_id="cut-short", kernels_total=1, sample=False),
            *w.finished_sim(run_id, sims[0][0], [("_Z6vecAddIfEvPT_S1_S1_i", 5533)], 1417.0, at),
            ev.SimClaimed(id=w.event_id(), at=at, runner_id="runner-seeded", host="h", **common),
            ev.SimLaunched(id=w.event_id(), at=at, launcher_ref="1", host="h", config_digests={}, **common),
            ev.SimFinished(id=w.event_id(), at=at, outcome="succeeded", exit_code=0, cut_short=cut, **common),
        ],
    )
    said = "stopped at its limit -gpgpu_max_cycle 1000: 0 of 1 launches simulated; launch 1, cut after 1000 cycles, is left out of every total"
    sign_in(page, cascade.url, f"#/runs/{run_id}")
    page.wait_for_selector("#run-cut-short:not([hidden])")
    assert page.inner_text("#run-cut-short") == f"1 sim cut short, its totals over the launches it simulated: SM61_TITANX r1 {said}"
    row = f'#sims-table tbody[data-sim="{sims[1][0]}"]'
    assert page.inner_text(f"{row} .row-cut-short") == f"cut short {said}"
    assert page.inner_text(f'{row} tr[data-sim="{sims[1][0]}"]').count("succeeded") >= 1
    assert not page.query_selector(f'#sims-table tbody[data-sim="{sims[0][0]}"] .row-cut-short')
    shoot(page, "run-cut-short", "#run-cut-short")
    page.goto(f"{cascade.url}/#/runs")
    page.wait_for_selector(f'tr:has-text("{run_id}") .badge.cut-short')
    assert page.inner_text(f'tr:has-text("{run_id}") .badge.cut-short') == "1 cut short"


def test_a_cached_sim_is_marked_in_its_row_and_links_its_source(page: Any, cascade: LiveServer) -> None:
    """A sim that took another run's result (`cached_from`) says "cached" in the sims table;
    the marker opens the source sim's run, at 1280 wide and on a phone."""
    source_run, cached_run = "run-cachesrc0001", "run-cachehit0001"
    source, cached = ("sim-cachesrc0", "SM61_TITANX", 0), ("sim-cachehit0", "SM61_TITANX", 0)
    at = datetime.now(UTC)
    common: dict[str, Any] = {"run_id": cached_run, "sim_id": cached[0], "attempt": 1}
    seed(
        cascade,
        [
            *w.trace_events("cached", arch="sm_61", kernel_count=1, step_timeline=False),
            w.run_created(source_run, [source], trace_id="cached", kernels_total=1, sample=False),
            *w.finished_sim(source_run, source[0], [("_Z6vecAddIfEvPT_S1_S1_i", 5533)], 1417.0, at),
            w.run_created(cached_run, [cached], trace_id="cached", kernels_total=1, sample=False),
            ev.SimClaimed(id=w.event_id(), at=at, runner_id="runner-seeded", host="h", **common),
            ev.SimLaunched(id=w.event_id(), at=at, launcher_ref="cache", host="h", config_digests={}, cached_from=source[0], **common),
            ev.SimFinished(id=w.event_id(), at=at, outcome="succeeded", exit_code=0, **common),
        ],
    )
    sign_in(page, cascade.url, "#/runs")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"{cascade.url}/#/runs/{cached_run}")
        marker = f'#sims-table tbody[data-sim="{cached[0]}"] a.badge.cached'
        page.wait_for_selector(marker)
        assert page.inner_text(marker) == "cached" and source[0] in (page.get_attribute(marker, "title") or "")
        assert not page.query_selector(f'#sims-table tbody[data-sim="{source[0]}"] .badge.cached')
        shoot(page, f"run-cached-{size['width']}", "#sims-table")
        page.click(marker)
        page.wait_for_url(f"**/#/runs/{source_run}")
        page.wait_for_selector(f'#sims-table tbody[data-sim="{source[0]}"]')
    page.set_viewport_size(DESKTOP)


def test_a_split_run_from_the_form(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """The new-run form's split: a size the API refuses is said beside the split, in the API's
    words; chunks of one launch without warm-up make a sim of three chunks that succeeds."""
    ensure_trace(api, "combo-vec-mm-xz")
    sign_in(page, cascade.url, "#/runs/new?trace=combo-vec-mm-xz")
    page.wait_for_selector("#new-run")
    assert page.is_disabled("#run-split-k") and page.is_disabled("#run-split-warmup")
    page.select_option("#run-split", "chunks")
    page.fill("#run-split-k", "0")
    page.click("#new-run button[type=submit]")
    page.wait_for_selector("#run-split-error:not(:empty)")
    refused = api.post("/api/runs", json={"trace_id": "combo-vec-mm-xz", "entries": [{"gpu_config": "SM61_TITANX", "count": 1, "split": {"kernels_per_chunk": 0}}]})
    assert refused.status_code == 422 and page.inner_text("#run-split-error") == refused.json()["detail"][0]["msg"]

    page.fill("#run-split-k", "1")
    page.fill("#run-split-warmup", "0")
    shoot(page, "new-run-split", "#new-run")
    page.click("#new-run button[type=submit]")
    page.wait_for_url("**/#/runs/run-*")
    run_id = page.url.rsplit("/", 1)[1]
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1, "split": {"kernels_per_chunk": 1, "warmup": 0}}]
    page.wait_for_selector("#sims-table tbody[data-sim] > tr[data-state=succeeded]", timeout=60_000)
    (sim,) = api.get(f"/api/runs/{run_id}").json()["sims"]
    assert sim["state"] == "succeeded" and len(sim["split"]["chunks"]) == 3
