"""The web app's pictures against the API's numbers, in headless Chromium at 1280×800 and
390×844: Compare's simulated-against-real scatter, config-against-config bars and the spread
of replicas, and the Stats tab's explorer (search the catalogue, bars per kernel and config,
heatmaps of per-unit tables). The run's kernels carry real Accel-Sim stats maps
(tests/cascade_http/stats_world.py) and its trace real timing from ncu (two passes)."""

from __future__ import annotations

import csv
import io
import statistics
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest

from cascade_core.gpu_configs import config_digest
from tests.browser.conftest import data_json, missing, seed, shoot, sign_in
from tests.cascade_http import runs_world as w
from tests.cascade_http import stats_world
from tests.cascade_http.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing() is not None, reason=missing() or "")]

RUN = "run-pictures0001"
# ncu's raw page, two passes over the trace's three kernels: duration (µs), cycles, and the
# L2 and L1D read sectors (hardware counters; SM61_TITANX's log has no L1D stats, SM7_QV100's has).
NCU_HEADER = (
    '"ID","Kernel Name","gpu__time_duration.sum","gpc__cycles_elapsed.avg","lts__t_sectors_srcunit_tex_op_read.sum",'
    '"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"\n"","","usecond","cycle","sector","sector"\n'
)
PASSES = [
    [(3.9, 5500, 30, 26), (5.1, 7000, 250, 282), (3.7, 5300, 28, 26)],
    [(4.1, 5700, 34, 26), (5.3, 7400, 262, 282), (3.9, 5500, 28, 26)],
]


@pytest.fixture(scope="module")
def run(cascade: LiveServer, api: httpx.Client) -> str:
    seed(cascade, stats_world.events(RUN))
    body = "".join(
        NCU_HEADER + "".join(f'"{i}","_Z6kernelv{i + 1}","{us}","{c:,}","{l2}","{l1}"\n' for i, (us, c, l2, l1) in enumerate(p)) for p in PASSES
    )
    attached = api.put(f"/api/traces/{stats_world.TRACE}/real-timing", content=body, headers={"Content-Type": "text/csv"})
    assert attached.status_code == 200, attached.text
    return RUN


def point_at(page: Any, selector: str, x: float, y: float, size: str) -> None:
    """Point at (x, y) in the element as a person would at this size: the mouse over it on a
    desktop, a finger's tap on a phone (touch events, not a mouse)."""
    page.locator(selector).scroll_into_view_if_needed()
    box = page.locator(selector).bounding_box()
    if size == "desktop":
        page.mouse.move(box["x"] + x, box["y"] + y)
        return
    cdp = page.context.new_cdp_session(page)
    touch = {"x": box["x"] + x, "y": box["y"] + y}
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [touch]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    cdp.detach()


def look_away(page: Any, size: str) -> None:
    """The mouse off, or a tap on the page outside the pictures: the tip goes."""
    if size == "desktop":
        page.mouse.move(0, 0)
    else:
        point_at(page, ".run-title", 2, 2, size)
    page.wait_for_selector("#tooltip", state="hidden")
    page.evaluate("window.scrollTo(0, 0)")


def test_compare_draws_the_comparison_kernel_by_kernel(page: Any, cascade: LiveServer, api: httpx.Client, run: str) -> None:
    comparison = api.get(f"/api/runs/{run}/comparison").json()
    kernels = api.get(f"/api/runs/{run}/kernels").json()
    sims = {s["id"]: s for s in api.get(f"/api/runs/{run}").json()["sims"]}
    sign_in(page, cascade.url, f"#/runs/{run}/compare")
    page.wait_for_selector("#scatter-chart[data-points]")
    assert not page.query_selector("#compare-chart"), "the line through unrelated kernels is gone"

    # Sim against real: a point per kernel and config with both, at the API's numbers.
    expected = [
        {"gpu_config": cfg, "kernel_index": r["kernel_index"], "real": r["real_ns"], "sim": r["sim_ns"][cfg]}
        for cfg in comparison["configs"] for r in comparison["rows"] if r["real_ns"] and r["sim_ns"][cfg]
    ]
    assert data_json(page, "#scatter-chart", "points") == expected
    assert len(expected) == 6
    # And against real cycles, with each config's median gpu_sim_cycle.
    page.select_option("#scatter-measure", "cycles")
    page.wait_for_selector("#scatter-chart[data-measure=cycles]")
    cycles = [
        {"gpu_config": cfg, "kernel_index": r["kernel_index"], "real": r["real_cycles"], "sim": r["sim_cycles"][cfg]}
        for cfg in comparison["configs"] for r in comparison["rows"]
    ]
    assert data_json(page, "#scatter-chart", "points") == cycles
    page.select_option("#scatter-measure", "time")

    # Config against config: each kernel's time over the first config's.
    base, other = comparison["configs"]
    ratios = [{"gpu_config": other, "kernel_index": r["kernel_index"], "ratio": pytest.approx(r["sim_ns"][other] / r["sim_ns"][base])} for r in comparison["rows"]]
    assert data_json(page, "#ratio-chart", "ratios") == ratios

    # Across replicas: from every replica's kernels, whose median is the comparison's.
    times: dict[tuple[str, int], list[float]] = {}
    for k in kernels:
        times.setdefault((sims[k["sim_id"]]["gpu_config"], k["kernel_index"]), []).append(k["sim_time_ns"])
    spread = [
        {"gpu_config": cfg, "kernel_index": i, "replicas": len(t), "min_ns": min(t), "median_ns": pytest.approx(statistics.median(t)), "max_ns": max(t)}
        for (cfg, i), t in sorted(times.items(), key=lambda item: item[0][1]) if len(t) > 1
    ]
    assert data_json(page, "#spread-chart", "spread") == spread
    # Every chart says what its axes are.
    assert data_json(page, "#scatter-chart", "axes") == {"x": "real", "y": "simulated"}
    assert data_json(page, "#ratio-chart", "axes") == {"x": "kernel (index)", "y": "simulated time ÷ first config's"}
    assert data_json(page, "#spread-chart", "axes") == {"x": "kernel (index)", "y": "replica ÷ median − 1"}

    # Downloads: the Compare table as CSV, every row at the API's numbers; the run as Parquet.
    with page.expect_download() as downloaded:
        page.click("#compare-csv")
    assert downloaded.value.suggested_filename == f"{run}-compare.csv"
    rows = list(csv.DictReader(io.StringIO(Path(downloaded.value.path()).read_text())))
    assert [(int(r["kernel_index"]), r["kernel_name"], float(r["real_ns"])) for r in rows] == [
        (c["kernel_index"], c["kernel_name"], pytest.approx(c["real_ns"], rel=1e-15)) for c in comparison["rows"]
    ]
    for cfg in comparison["configs"]:
        assert [float(r[f"{cfg}_sim_ns"]) for r in rows] == [pytest.approx(c["sim_ns"][cfg], rel=1e-15) for c in comparison["rows"]]
    with page.expect_download() as downloaded:
        page.click(f"button[data-download='/api/runs/{run}/export']")
    assert downloaded.value.suggested_filename == f"{run}-parquet.zip"
    assert "kernels.parquet" in zipfile.ZipFile(downloaded.value.path()).namelist()
    assert [s["median_ns"] for s in spread] == [pytest.approx(r["sim_ns"][base]) for r in comparison["rows"]]
    assert "SM7_QV100: one replica, no spread." in page.inner_text("#pic-spread")

    def names_the_kernel(page: Any, size: str) -> None:
        """Pointing at (or tapping) the first point names its kernel with its numbers."""
        first = comparison["rows"][0]
        x, y = page.evaluate(POINT_AT, {"id": "scatter-chart", "real": first["real_ns"], "sim": first["sim_ns"][base]})
        point_at(page, "#scatter-chart", x, y, size)
        page.wait_for_selector("#tooltip:not([hidden])")
        tip = page.inner_text("#tooltip")
        assert f"#0 {first['kernel_name'][3:9]}" in tip and base in tip and first["kernel_name"] in tip, tip
        assert "Error" in tip and "Real range" in tip, tip
        look_away(page, size)

    shoot(page, "compare-pictures", "#spread-chart", check=names_the_kernel)

    # From the keyboard: the points in turn, the first config's first.
    page.focus("#scatter-chart")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#tooltip:not([hidden])")
    assert base in page.inner_text("#tooltip") and comparison["rows"][0]["kernel_name"] in page.inner_text("#tooltip")
    page.keyboard.press("Escape")
    page.wait_for_selector("#tooltip", state="hidden")
    page.evaluate("document.activeElement.blur(); window.scrollTo(0, 0)")
    page.emulate_media(color_scheme="dark")
    shoot(page, "compare-pictures-dark", "#spread-chart")
    page.emulate_media(color_scheme="light")


# Where the scatter draws a point: by its log scales, from the geometry it drew with.
POINT_AT = """({ id, real, sim }) => {
  const g = JSON.parse(document.getElementById(id).dataset.geometry);
  const at = (v) => (Math.log10(v) - Math.log10(g.domain[0])) / (Math.log10(g.domain[1]) - Math.log10(g.domain[0])) * g.side;
  return [g.left + at(real), g.top + g.side - at(sim)];
}"""


def test_compare_draws_each_hardware_counter_against_its_stats(page: Any, cascade: LiveServer, api: httpx.Client, run: str) -> None:
    comparison = api.get(f"/api/runs/{run}/comparison").json()
    counters = comparison["counters"]
    assert list(counters) == ["l2_reads", "l1d_reads"]
    sign_in(page, cascade.url, f"#/runs/{run}/compare")
    page.wait_for_selector("#counters-chart[data-measure=l2_reads]")

    def expected(name: str) -> list[dict[str, Any]]:
        rows = counters[name]["rows"]
        return [
            {"gpu_config": cfg, "kernel_index": r["kernel_index"], "real": r["real"], "sim": r["sim"][cfg]}
            for cfg in comparison["configs"] for r in rows if r["real"] and r["sim"][cfg]
        ]

    # L2 reads: each kernel's own, on both configs (their logs print running totals).
    l2 = expected("l2_reads")
    assert data_json(page, "#counters-chart", "points") == l2
    assert {p["gpu_config"] for p in l2} == set(comparison["configs"]) and len(l2) == 6
    assert [p["real"] for p in l2[:3]] == [32.0, 256.0, 28.0]  # the mean of the two passes
    # L1D reads: only SM7_QV100 has the stats.
    page.select_option("#counters-measure", "l1d_reads")
    page.wait_for_selector("#counters-chart[data-measure=l1d_reads]")
    l1 = expected("l1d_reads")
    assert data_json(page, "#counters-chart", "points") == l1
    assert {p["gpu_config"] for p in l1} == {"SM7_QV100"} and len(l1) == 3
    assert page.is_visible("#pic-scatter") and page.is_visible("#pic-counters")
    # Their scores, a row per counter and config, as the API gives them.
    cells = page.eval_on_selector_all(
        "#counters-correlation-table tbody tr",
        "rows => rows.map(r => [r.dataset.counter, r.dataset.config, [...r.querySelectorAll('td[data-score]')].map(c => [c.dataset.score, c.dataset.value])])",
    )
    shown = {(name, cfg): {k: float(v) if v != "" else None for k, v in values} for name, cfg, values in cells}
    assert shown == {
        (name, cfg): {k: v for k, v in scores.items() if k != "hw_zero"} for name, c in counters.items() for cfg, scores in c["correlation"].items()
    }


def test_compare_shows_a_config_edited_between_replicas_apart_per_digest(page: Any, cascade: LiveServer, api: httpx.Client) -> None:
    """SM61_TITANX run twice on its old files and once on edited ones: Compare's table and
    spread keep the two apart, as the comparison lists them (`NAME@<6 hex>`), never pooled."""
    run_id, old, new = "run-digests00001", {"gpgpusim.config": "1" * 64}, {"gpgpusim.config": "2" * 64}
    sims = [("sim-digests-r0", "SM61_TITANX", 0), ("sim-digests-r1", "SM61_TITANX", 1), ("sim-digests-r2", "SM61_TITANX", 2)]
    at = datetime(2026, 11, 8, 10, tzinfo=UTC)
    events = [
        *w.trace_events("digests-demo", arch="sm_61", kernel_count=2, step_timeline=False),
        w.run_created(run_id, sims, trace_id="digests-demo", kernels_total=2),
    ]
    for (sim_id, _, _), cycles, files in zip(sims, (1000, 1100, 500), (old, old, new), strict=True):
        events += w.finished_sim(run_id, sim_id, [("_Z6kernelv1", cycles), ("_Z6kernelv2", cycles * 2)], 1000.0, at, config_digests=files)
    seed(cascade, events)
    labels = [f"SM61_TITANX@{config_digest(old)[:6]}", f"SM61_TITANX@{config_digest(new)[:6]}"]
    assert api.get(f"/api/runs/{run_id}/comparison").json()["configs"] == labels

    sign_in(page, cascade.url, f"#/runs/{run_id}/compare")
    page.wait_for_selector("#spread-chart[data-spread]")
    for label, ns in zip(labels, (1050.0, 500.0), strict=True):  # the old replicas' median, the edited one's own
        page.wait_for_selector(f'[data-config="{label}"][data-ns="{ns:g}"]')
    assert page.query_selector('[data-config="SM61_TITANX"]') is None, "no column pools them"
    spread = data_json(page, "#spread-chart", "spread")
    assert [(s["gpu_config"], s["replicas"], s["min_ns"], s["max_ns"]) for s in spread] == [(labels[0], 2, 1000.0, 1100.0), (labels[0], 2, 2000.0, 2200.0)]
    assert f"{labels[1]}: one replica, no spread." in page.inner_text("#pic-spread")


def test_the_stat_explorer_finds_a_stat_and_draws_it_per_kernel_and_config(page: Any, cascade: LiveServer, api: httpx.Client, run: str) -> None:
    sign_in(page, cascade.url, f"#/runs/{run}/stats")
    page.wait_for_selector("#stat-names li")
    page.fill("#stat-search", "miss_rate")
    catalogue = api.get(f"/api/runs/{run}/stats", params={"q": "miss_rate"}).json()
    page.wait_for_selector(f"#stat-names li >> nth={len(catalogue['names']) - 1}")
    page.wait_for_function("(n) => document.querySelectorAll('#stat-names li').length === n", arg=len(catalogue["names"]))
    assert page.eval_on_selector_all("#stat-names li", "els => els.map(e => e.dataset.name)") == [n["name"] for n in catalogue["names"]]
    assert page.eval_on_selector_all("#stat-tables li", "els => els.map(e => e.dataset.table)") == [t["name"] for t in catalogue["tables"]]
    shoot(page, "stats-search", "#stat-names li")

    # A plain stat: bars per kernel and config at the API's medians, minima and maxima.
    page.fill("#stat-search", "gpu_sim_cycle")
    page.click("#stat-names li[data-name=gpu_sim_cycle] button")
    page.wait_for_selector("#stat-bars[data-bars]")
    assert page.url.endswith("/stats?name=gpu_sim_cycle")
    values = api.get(f"/api/runs/{run}/stats/values", params={"name": "gpu_sim_cycle"}).json()
    assert data_json(page, "#stat-bars", "bars") == [{k: r[k] for k in ("kernel_index", "gpu_config", "median", "min", "max")} for r in values["rows"]]
    assert data_json(page, "#stat-bars", "axes") == {"x": "kernel (index)", "y": "gpu_sim_cycle (median of replicas)"}
    table_lists(page, values["rows"])
    shown = page.eval_on_selector_all("#stat-table .vt-row", "rows => rows.map(r => [Number(r.dataset.kernelIndex), r.dataset.config, Number(r.querySelector('[data-median]').dataset.median)])")
    assert shown == [[r["kernel_index"], r["gpu_config"], r["median"]] for r in values["rows"]]
    assert values["rows"][0]["min"] < values["rows"][0]["max"]  # the replicas differ: whiskers

    def names_a_kernel(page: Any, size: str) -> None:
        geometry = data_json(page, "#stat-bars", "geometry")
        x, y = geometry["left"] + geometry["slot"] / 2, geometry["top"] + 20  # over the first kernel's slot
        point_at(page, "#stat-bars", x, y, size)
        page.wait_for_selector("#tooltip:not([hidden])")
        tip = page.inner_text("#tooltip")
        assert tip.startswith("#0 ") and "SM61_TITANX" in tip and "2 replicas" in tip, tip
        look_away(page, size)

    shoot(page, "stats-bars", "#stat-bars", check=names_a_kernel)

    # A running total (the log's 39, 423, 462): each kernel's own value drawn, its total beside it.
    page.goto(f"{cascade.url}/#/runs/{run}/stats?name=L2_total_cache_accesses")
    page.wait_for_selector("#stat-own")
    values = api.get(f"/api/runs/{run}/stats/values", params={"name": "L2_total_cache_accesses"}).json()
    assert [(r["median"], r["running_total"]) for r in values["rows"] if r["gpu_config"] == "SM61_TITANX"] == [(39, 39), (384, 423), (39, 462)]
    page.wait_for_function("() => JSON.parse(document.querySelector('#stat-bars').dataset.bars ?? '[]')[0]?.median === 39")
    assert data_json(page, "#stat-bars", "bars") == [{k: r[k] for k in ("kernel_index", "gpu_config", "median", "min", "max")} for r in values["rows"]]
    table_lists(page, values["rows"])  # the same kernels and configs as the last stat's: wait for this one's totals
    page.wait_for_selector("#stat-table .vt-row [data-running-total]")
    totals = page.eval_on_selector_all("#stat-table .vt-row [data-running-total]", "els => els.map(e => Number(e.dataset.runningTotal))")
    assert totals == [r["running_total"] for r in values["rows"]]

    # A per-unit table of one index: kernels by L2 bank, a heatmap per config.
    name = "L2_cache_bank[*].Miss_rate"
    page.goto(f"{cascade.url}/#/runs/{run}/stats?name={quote(name)}")
    page.wait_for_selector("#stat-heat-1[data-cells]")
    values = api.get(f"/api/runs/{run}/stats/values", params={"name": name}).json()
    for i, config in enumerate(values["configs"]):
        cells = data_json(page, f"#stat-heat-{i}", "cells")
        assert cells == [{k: r[k] for k in ("kernel_index", "gpu_config", "units", "median")} for r in values["rows"] if r["gpu_config"] == config]
    assert len({tuple(r["units"]) for r in values["rows"] if r["gpu_config"] == "SM7_QV100"}) == 64
    shoot(page, "stats-heatmap-banks", "#stat-heat-1")

    # A table of two indices, reached from one of its cells: channels by banks, for a kernel.
    page.goto(f"{cascade.url}/#/runs/{run}/stats?name={quote(stats_world.CELL)}")
    page.wait_for_selector("#stat-all-units")
    page.click("#stat-all-units")
    table = "maximum service time to same row.dram[*][*]"
    page.wait_for_function("(n) => document.querySelector('#stat-title')?.textContent === n", arg=table)
    assert unquote(page.url).endswith(f"/stats?name={table}")
    page.wait_for_selector("#stat-heat-0[data-cells]")
    values = api.get(f"/api/runs/{run}/stats/values", params={"name": table}).json()
    for kernel in (0, 2):
        if kernel:
            page.select_option("#stat-kernel", str(kernel))
            page.wait_for_function("(k) => JSON.parse(document.querySelector('#stat-heat-0').dataset.cells)[0].kernel_index === k", arg=kernel)
        for i, config in enumerate(values["configs"]):
            assert data_json(page, f"#stat-heat-{i}", "cells") == [
                {k: r[k] for k in ("kernel_index", "gpu_config", "units", "median")} for r in values["rows"] if (r["kernel_index"], r["gpu_config"]) == (kernel, config)
            ]
    cell = next(r for r in values["rows"] if (r["kernel_index"], r["gpu_config"], r["units"]) == (2, "SM61_TITANX", [2, 11]))
    assert (cell["min"], cell["max"]) == (cell["median"] - 25, cell["median"] + 25)

    def names_a_cell(page: Any, size: str) -> None:
        x, y = page.evaluate(CELL_AT, {"id": "stat-heat-0", "row": 2, "col": 11})
        point_at(page, "#stat-heat-0", x, y, size)
        page.wait_for_selector("#tooltip:not([hidden])")
        tip = page.inner_text("#tooltip")
        assert stats_world.CELL in tip and "SM61_TITANX" in tip and "#2 " in tip, tip
        look_away(page, size)

    shoot(page, "stats-heatmap-dram", "#stat-heat-1", check=names_a_cell)

    # A stat whose values are no numbers, and a search nothing matches, say so.
    page.goto(f"{cascade.url}/#/runs/{run}/stats?name=kernel_name")
    page.wait_for_selector("#stat-view .state-empty:has-text('No value of it is a number.')")
    values = api.get(f"/api/runs/{run}/stats/values", params={"name": "kernel_name"}).json()
    assert len(values["rows"]) == 6
    table_lists(page, values["rows"])
    page.fill("#stat-search", "no such stat")
    page.wait_for_selector("#stat-results .state-empty:has-text('No stat')")


def table_lists(page: Any, rows: list[dict[str, Any]]) -> None:
    """Wait until the stat's table lists these rows of the API's answer, by kernel and config.
    The table draws its rows on a later frame than the view (vtable.js draws per frame): until
    then it lists the last stat's, or none. Its row count is no sign of which stat it shows."""
    keys = [[r["kernel_index"], r["gpu_config"]] for r in rows]
    page.wait_for_function(
        "(keys) => JSON.stringify([...document.querySelectorAll('#stat-table .vt-row')]"
        ".map((r) => [Number(r.dataset.kernelIndex), r.dataset.config])) === JSON.stringify(keys)",
        arg=keys,
    )


# The middle of a heatmap's cell, from the geometry it drew with.
CELL_AT = """({ id, row, col }) => {
  const g = JSON.parse(document.getElementById(id).dataset.geometry);
  return [g.left + (col + 0.5) * g.cell[0], g.top + (row + 0.5) * g.cell[1]];
}"""


def test_the_stats_tab_shows_derived_metrics_with_their_formulas_and_per_unit_names(page: Any, cascade: LiveServer, api: httpx.Client, run: str) -> None:
    sign_in(page, cascade.url, f"#/runs/{run}/stats")
    answer = api.get(f"/api/runs/{run}/stats/derived").json()
    page.wait_for_function("(n) => document.querySelectorAll('#derived-configs tbody tr').length === n", arg=len(answer["metrics"]))
    # Per config: a row per metric, its formula under its name and in its tooltip, each cell the API's value.
    rows = page.eval_on_selector_all(
        "#derived-configs tbody tr",
        "rows => rows.map(r => [r.dataset.metric, r.querySelector('.derived-formula').textContent, r.querySelector('th').title,"
        " [...r.querySelectorAll('td')].map(c => c.dataset.value === '' ? null : Number(c.dataset.value))])",
    )
    assert [(name, formula) for name, formula, _, _ in rows] == [(m["name"], m["formula"]) for m in answer["metrics"]]
    assert all(formula in title for _, formula, title, _ in rows)
    assert [values for _, _, _, values in rows] == [[c["values"][m["name"]] for c in answer["configs"]] for m in answer["metrics"]]
    # Per kernel: the metric picked, per kernel and config.
    page.select_option("#derived-metric", "l2_hit_rate")
    page.wait_for_selector("#derived-kernels[data-metric=l2_hit_rate]")
    cells = page.eval_on_selector_all("#derived-kernels tbody tr", "rows => rows.map(r => [...r.querySelectorAll('td')].map(c => Number(c.dataset.value)))")
    assert cells == [[1.0 if i == 2 else 0.0] * 2 for i in range(3)]
    assert "(L2_total_cache_accesses − L2_total_cache_misses)" in page.inner_text("#derived-formula")
    shoot(page, "stats-derived", "#derived-kernels tbody tr")

    # A per-unit table spelt without brackets: every DRAM channel's bw_util, units in numeric order.
    name = "Memory Partition [*].bw_util"
    page.goto(f"{cascade.url}/#/runs/{run}/stats?name={quote(name)}")
    page.wait_for_selector("#stat-heat-1[data-cells]")
    units = [c["units"][0] for c in data_json(page, "#stat-heat-0", "cells") if c["kernel_index"] == 0]
    assert units == list(range(12))
    page.fill("#stat-search", "Memory Partition 1.bw_util")
    page.wait_for_selector("#stat-names li[data-name='Memory Partition 1.bw_util']")
    page.click("#stat-names li[data-name='Memory Partition 1.bw_util'] button")
    page.wait_for_selector("#stat-all-units")
    assert page.inner_text("#stat-all-units").endswith(name)
    shoot(page, "stats-per-unit-partitions", "#stat-bars[data-bars]")
