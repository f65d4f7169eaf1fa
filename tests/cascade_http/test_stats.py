"""A run's stats by name: the catalogue of names its kernels have and one stat's values per
kernel and config (medians over replicas, per unit for a name with [*]), on a real
nats-server and DuckDB, with the stats maps of real Accel-Sim blocks (combo-vec-mm-xz on
SM61_TITANX, two replicas, and on SM7_QV100, one). Every expected number is computed here
from the maps themselves."""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_formats import stat_kinds
from cascade_nats import server
from cascade_process.service import starlette_app
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import TOKEN
from tests.cascade_http.stats_world import CELL, CLOCKS, MISSING, TRACE, config_maps, events, real_maps

RUN = "run-statnames01"
STATS = f"/api/runs/{RUN}/stats"
VALUES = f"{STATS}/values"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("stats")
    empty = w.run_created("run-statsempty", [("sim-stats-empty", "SM61_TITANX", 0)], trace_id=TRACE, kernels_total=3, sample=True)
    with server.running(tmp / "jetstream") as nats:
        with TestClient(starlette_app(w.settings(tmp, nats.url)), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            w.append(client, [*events(RUN), empty])
            yield client


def expected_names(q: str) -> list[dict[str, Any]]:
    found = re.compile(re.escape(q).replace(re.escape("[*]"), r"\[[0-9]+\]"), re.IGNORECASE)
    names: dict[str, dict[str, int]] = {}
    for config in CLOCKS:
        replicas = config_maps(config)
        for index in range(3):
            for name in {n for r in replicas for n in r[index]}:
                if found.search(name):
                    counts = names.setdefault(name, {})
                    counts[config] = counts.get(config, 0) + 1
    return [{"name": n, "kernels": names[n]} for n in sorted(names, key=by_index)]


def by_index(name: str) -> list[Any]:
    """Names in order of their text, their indices as numbers: bracketed, or ending a part of
    the name after a space or a letter (`Memory Partition 10`, `bk10`)."""
    parts = re.split(r"(?:(?<=\[)|(?<=[A-Za-z ]))([0-9]+)(?=\]|\.|$)", name)
    return [int(p) if i % 2 else p for i, p in enumerate(parts)]


def test_the_catalogue_lists_the_names_that_hold_q_with_their_kernels_per_config(world: TestClient) -> None:
    answer = world.get(STATS, params={"q": "miss_RATE"}).json()
    assert answer["names"] == expected_names("miss_RATE")
    assert not answer["truncated"]
    # Every config has each of its names in all three kernels (the first through one replica
    # only, for MISSING); the QV100 has more units.
    assert {"name": MISSING, "kernels": {"SM61_TITANX": 3, "SM7_QV100": 3}} in answer["names"]
    assert {"name": "L2_cache_bank[63].Miss_rate", "kernels": {"SM7_QV100": 3}} in answer["names"]
    banks = {n for m in real_maps("SM7_QV100") for n in m if n.startswith("L2_cache_bank[") and n.endswith("].Miss_rate")}
    assert {"name": "L2_cache_bank[*].Miss_rate", "stats": len(banks)} in answer["tables"]
    assert [t["name"] for t in answer["tables"]] == sorted({re.sub(r"\[[0-9]+\]", "[*]", n["name"]) for n in answer["names"]} - {n["name"] for n in answer["names"]})
    assert [n["name"] for n in answer["names"]][:3] == ["L1D_cache_core[0].Miss_rate", "L1D_cache_core[1].Miss_rate", "L1D_cache_core[2].Miss_rate"]


def test_a_search_with_any_index_and_the_cap(world: TestClient) -> None:
    answer = world.get(STATS, params={"q": "same ROW.dram[*][11]"}).json()
    assert answer["names"] == expected_names("same ROW.dram[*][11]")
    assert CELL in [n["name"] for n in answer["names"]]
    everything = world.get(STATS).json()
    assert everything["truncated"] is True
    assert everything["names"] == expected_names("")[:200]
    assert {"name": "Warp Occupancy Distribution.W0_Scoreboard", "kernels": {"SM61_TITANX": 3, "SM7_QV100": 3}} in expected_names("")


def rows_of(answer: dict[str, Any]) -> list[tuple[int, str, list[int], int, float | None, float | None, float | None]]:
    return [(r["kernel_index"], r["gpu_config"], r["units"], r["replicas"], r["median"], r["min"], r["max"]) for r in answer["rows"]]


def numbers(values: list[Any]) -> list[float]:
    """The finite numbers among stats values (nan and infinities are strings in JSON)."""
    read = [float(v) for v in values if not isinstance(v, str) or v in ("NaN", "Infinity", "-Infinity")]
    return [v for v in read if v - v == 0]


def units(name: str) -> list[int]:
    return [int(i) for i in re.findall(r"\[([0-9]+)\]", name)]


def number(value: Any) -> float:
    return float(value) if not isinstance(value, str) or value in ("NaN", "Infinity", "-Infinity") else math.nan


def own_values(maps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A replica's maps as each kernel's own values: a running total less the map before's
    (0 where it has none), a ratio of them from those differences, the rest as printed."""
    out = []
    for i, m in enumerate(maps):
        before = maps[i - 1] if i else {}
        own = {n: v - number(before.get(n, 0.0)) if stat_kinds.kind_of(n) == "running_total" and not isinstance(v, str) else v for n, v in m.items()}
        for n in m:
            if stat_kinds.kind_of(n) != "ratio_of_totals":
                continue
            parts = stat_kinds.ratio_parts(n)
            if parts is not None and parts[0] in m and parts[1] in m:
                top, bottom = number(own[parts[0]]), number(own[parts[1]])
                own[n] = top / bottom if bottom else math.nan
            else:
                own[n] = "no number: a ratio without its parts"
        out.append(own)
    return out


@functools.cache
def own_maps(config: str) -> list[list[dict[str, Any]]]:
    return [own_values(maps) for maps in config_maps(config)]


def expected_values(names: dict[str, list[int]]) -> list[tuple[int, str, list[int], int, float | None, float | None, float | None]]:
    out = []
    for index in range(3):
        for config in CLOCKS:
            for name, cells in names.items():
                have = [r[index][name] for r in own_maps(config) if name in r[index]]
                finite = numbers(have)
                if have:
                    out.append((index, config, cells, len(have), statistics.median(finite) if finite else None, min(finite, default=None), max(finite, default=None)))
    return out


def test_a_stat_per_kernel_and_config_is_the_median_of_its_replicas(world: TestClient) -> None:
    answer = world.get(VALUES, params={"name": "gpu_sim_cycle"}).json()
    assert (answer["name"], answer["configs"], answer["stats"], answer["truncated"]) == ("gpu_sim_cycle", ["SM61_TITANX", "SM7_QV100"], ["gpu_sim_cycle"], False)
    titanx = [m["gpu_sim_cycle"] for m in real_maps("SM61_TITANX")]
    assert [r["kernel_name"] for r in answer["rows"]] == [m["kernel_name"] for m in real_maps("SM61_TITANX") for _ in CLOCKS]
    assert rows_of(answer)[0] == (0, "SM61_TITANX", [], 2, titanx[0] + 50, titanx[0], titanx[0] + 100)
    assert rows_of(answer) == expected_values({"gpu_sim_cycle": []})
    # A name with a `/` (a JSON pointer's separator) and one whose value is text.
    rate = world.get(VALUES, params={"name": "gpgpu_simulation_rate (inst/sec)"}).json()
    assert rows_of(rate) == expected_values({"gpgpu_simulation_rate (inst/sec)": []})
    text = world.get(VALUES, params={"name": "kernel_name"}).json()
    assert [(r["replicas"], r["median"]) for r in text["rows"]] == [(2, None), (1, None)] * 3


def test_a_name_with_any_index_gives_each_unit(world: TestClient) -> None:
    name = "maximum service time to same row.dram[*][*]"
    answer = world.get(VALUES, params={"name": name}).json()
    cells = {n: units(n) for m in [*real_maps("SM61_TITANX"), *real_maps("SM7_QV100")] for n in m if n.startswith("maximum service time to same row.dram[")}
    assert answer["stats"] == sorted(cells, key=cells.__getitem__)
    expected = expected_values({n: cells[n] for n in answer["stats"]})
    assert rows_of(answer) == expected
    assert (0, "SM61_TITANX", [2, 11], 2) in [r[:4] for r in expected]
    cell = next(r for r in rows_of(answer) if r[:3] == (0, "SM61_TITANX", [2, 11]))
    value = real_maps("SM61_TITANX")[0][CELL]
    assert cell[4:] == (value + 25, value, value + 50)
    # nan (a core that read nothing) is no number: a kernel whose replicas all say nan has none.
    rates = world.get(VALUES, params={"name": "L1D_cache_core[*].Miss_rate"}).json()
    assert any(r["median"] is None and r["replicas"] == 2 for r in rates["rows"])
    assert rows_of(rates) == expected_values({n: units(n) for n in rates["stats"]})
    banks = world.get(VALUES, params={"name": "L2_cache_bank[*].Miss_rate"}).json()
    assert (0, "SM61_TITANX", [0], 1) in [r[:4] for r in rows_of(banks)]
    assert rows_of(banks) == expected_values({n: units(n) for n in banks["stats"]})


def test_a_name_no_kernel_has_and_a_run_without_kernels_give_nothing(world: TestClient) -> None:
    for name in ("no such stat", "no[*].such"):
        assert world.get(VALUES, params={"name": name}).json() == {"name": name, "configs": ["SM61_TITANX", "SM7_QV100"], "stats": [], "rows": [], "truncated": False}
    assert world.get("/api/runs/run-statsempty/stats").json() == {"names": [], "tables": [], "truncated": False}
    assert world.get("/api/runs/run-statsempty/stats/values", params={"name": "gpu_sim_cycle"}).json()["rows"] == []


def test_refusals(world: TestClient) -> None:
    for path in ("/api/runs/run-000000000000/stats", "/api/runs/run-000000000000/stats/values?name=gpu_sim_cycle"):
        response = world.get(path)
        assert (response.status_code, response.json()) == (404, {"detail": "run run-000000000000 not found"}), path
    for params, detail in [
        ({}, "name is required: a stat's name, with [*] for any index"),
        ({"name": ""}, "name is required: a stat's name, with [*] for any index"),
        ({"name": "L2_cache_bank*"}, "name may hold * only as [*], for any index: 'L2_cache_bank*'"),
        ({"name": "x" * 501}, "name is over 500 characters"),
    ]:
        response = world.get(VALUES, params=params)
        assert (response.status_code, response.json()) == (422, {"detail": detail}), params
    response = world.get(STATS, params={"q": "a" * 501})
    assert (response.status_code, response.json()) == (422, {"detail": "q is over 500 characters"})
    for path in (STATS, f"{VALUES}?name=gpu_sim_cycle"):
        for headers in ({"Authorization": "Bearer wrong"}, {"Authorization": ""}):
            response = world.get(path, headers=headers)
            assert response.status_code == 401, (path, headers)
