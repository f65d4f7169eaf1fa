"""A run's derived metrics and per-unit names spelt without brackets, on a real nats-server and
DuckDB, with the stats maps of real Accel-Sim blocks (stats_world: combo-vec-mm-xz on
SM61_TITANX, two replicas, the second's cycles 100 more, and on SM7_QV100, one). The
expected numbers are worked by hand from the logs' own lines, written out below."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from cascade_nats import server
from cascade_process.service import starlette_app
from tests.cascade_http import runs_world as w
from tests.cascade_http.conftest import TOKEN
from tests.cascade_http.stats_world import events, real_maps

RUN = "run-derived0001"
DERIVED = f"/api/runs/{RUN}/stats/derived"
VALUES = f"/api/runs/{RUN}/stats/values"

# From combo-vec-mm-xz__SM7_QV100.log, kernels 1 to 3 (vecAdd, mult_gpu, vecAdd): as printed,
# running totals since the start where so marked.
QV100_CYCLES = [5714, 8023, 5572]  # gpu_sim_cycle
QV100_INSN = [10516, 139264, 10516]  # gpu_sim_insn
QV100_L1D = [(39, 39), (423, 423), (462, 462)]  # L1D_total_cache_accesses, _misses: running totals
L2 = [(39, 39), (423, 423), (462, 423)]  # L2_total_cache_accesses, _misses: running totals, both configs
DRAM_READS = [26, 282, 282]  # total dram reads (the sum of every partition's n_rd): running totals, both configs
TITANX_CYCLES = [5534, 7506, 5408]
# Options (tested-cfgs/*/gpgpusim.config): -gpgpu_dram_burst_length x -gpgpu_dram_buswidth x
# -gpgpu_n_mem_per_ctrlr bytes a command; peak -gpgpu_n_mem x chips x busW x
# -dram_data_command_freq_ratio x DRAM clock; SMs -gpgpu_n_clusters x -gpgpu_n_cores_per_cluster.
QV100_ATOM, QV100_PEAK, QV100_SMS, QV100_MHZ = 2 * 16 * 1, 32 * 1 * 16 * 2 * 850e6, 80, 1132.0
TITANX_ATOM, TITANX_PEAK, TITANX_SMS, TITANX_MHZ = 8 * 4 * 1, 12 * 1 * 4 * 4 * 2500e6, 28, 1417.0


def own(totals: list[int]) -> list[int]:
    return [t - (totals[i - 1] if i else 0) for i, t in enumerate(totals)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("derived")
    with server.running(tmp / "jetstream") as nats:
        with TestClient(starlette_app(w.settings(tmp, nats.url)), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            w.append(client, events(RUN))
            yield client


def same(actual: dict[str, float | None], expected: dict[str, float | None]) -> bool:
    """The same metrics, the numbers to 12 digits, None (no number) where expected."""
    return actual.keys() == expected.keys() and all(
        (a is None) == (e is None) and (a is None or e is None or math.isclose(a, e, rel_tol=1e-12)) for a, e in ((actual[n], expected[n]) for n in expected)
    )


def kernel_values(answer: dict[str, Any], config: str) -> list[dict[str, float | None]]:
    return [k["values"] for k in answer["kernels"] if k["gpu_config"] == config]


def test_each_kernels_metrics_are_its_own_worked_from_the_logs_numbers(world: TestClient) -> None:
    answer = world.get(DERIVED).json()
    qv100 = kernel_values(answer, "SM7_QV100")
    l1d_accesses, l1d_misses = own([a for a, _ in QV100_L1D]), own([m for _, m in QV100_L1D])
    l2_accesses, l2_misses = own([a for a, _ in L2]), own([m for _, m in L2])
    reads = own(DRAM_READS)
    assert (l2_accesses, l2_misses, reads) == ([39, 384, 39], [39, 384, 0], [26, 256, 0])
    for k, values in enumerate(qv100):
        seconds = QV100_CYCLES[k] / (QV100_MHZ * 1e6)
        expected = {
            "l1d_hit_rate": (l1d_accesses[k] - l1d_misses[k]) / l1d_accesses[k],
            "l2_hit_rate": (l2_accesses[k] - l2_misses[k]) / l2_accesses[k],
            "dram_read_bytes": reads[k] * QV100_ATOM,
            "dram_write_bytes": 0.0,
            "dram_read_gbps": reads[k] * QV100_ATOM / 1e9 / seconds,
            "dram_write_gbps": 0.0,
            "dram_utilisation": reads[k] * QV100_ATOM / seconds / QV100_PEAK,
            "achieved_occupancy": None,  # every shared log prints gpu_occupancy = -nan%
            "ipc_per_sm": QV100_INSN[k] / QV100_CYCLES[k] / QV100_SMS,
        }
        assert same(values, expected), (k, values, expected)
    # The third kernel (the second vecAdd) hit in L2 on every access: the first vecAdd's lines.
    assert [v["l2_hit_rate"] for v in qv100] == [0.0, 0.0, 1.0]
    # The log's own DRAM utilisation of the first kernel (its running totals are its own): the
    # mean of the channels' bw_util, counted in DRAM command cycles rather than core cycles.
    first = real_maps("SM7_QV100")[0]
    printed = statistics.mean(v for n, v in first.items() if n.startswith("Memory Partition ") and n.endswith(".bw_util"))
    assert qv100[0]["dram_utilisation"] == pytest.approx(printed, rel=0.01)
    # TITAN X: two replicas, the second's cycles 100 more: a time's metric is their median.
    titanx = kernel_values(answer, "SM61_TITANX")
    for k, values in enumerate(titanx):
        rates = [reads[k] * TITANX_ATOM / 1e9 / ((TITANX_CYCLES[k] + extra) / (TITANX_MHZ * 1e6)) for extra in (0, 100)]
        assert values["dram_read_gbps"] == pytest.approx(statistics.median(rates), rel=1e-12)
        assert values["dram_read_bytes"] == reads[k] * TITANX_ATOM
        assert values["l1d_hit_rate"] is None  # the TITAN X's L1D saw no access (0 / 0)
    assert [k["replicas"] for k in answer["kernels"]] == [2, 1] * 3


def test_a_configs_metrics_are_ratios_of_its_kernels_sums(world: TestClient) -> None:
    answer = world.get(DERIVED).json()
    configs = {c["gpu_config"]: c for c in answer["configs"]}
    assert list(configs) == ["SM61_TITANX", "SM7_QV100"]
    qv100 = configs["SM7_QV100"]
    assert (qv100["replicas"], qv100["kernels"], qv100["sms"], qv100["error"]) == (1, 3, QV100_SMS, None)
    assert qv100["options_from"] == "config"  # these sims have no log: the config's files, as this server has them
    assert qv100["dram_peak_gbps"] == pytest.approx(870.4)
    assert configs["SM61_TITANX"]["dram_peak_gbps"] == pytest.approx(480.0)
    assert qv100["options"]["-gpgpu_clock_domains"] == "1132.0:1132.0:1132.0:850.0"
    seconds = sum(QV100_CYCLES) / (QV100_MHZ * 1e6)
    assert same(
        qv100["values"],
        {
            "l1d_hit_rate": 0.0,
            "l2_hit_rate": 39 / 462,
            "dram_read_bytes": 282 * QV100_ATOM,
            "dram_write_bytes": 0.0,
            "dram_read_gbps": 282 * QV100_ATOM / 1e9 / seconds,
            "dram_write_gbps": 0.0,
            "dram_utilisation": 282 * QV100_ATOM / seconds / QV100_PEAK,
            "achieved_occupancy": None,
            "ipc_per_sm": sum(QV100_INSN) / sum(QV100_CYCLES) / QV100_SMS,
        },
    ), qv100["values"]
    titanx = configs["SM61_TITANX"]["values"]
    per_replica = [sum(QV100_INSN) / (sum(TITANX_CYCLES) + extra) / TITANX_SMS for extra in (0, 300)]
    assert titanx["ipc_per_sm"] == pytest.approx(statistics.median(per_replica), rel=1e-12)
    formulas = {m["name"]: m for m in answer["metrics"]}
    assert "-dram_data_command_freq_ratio" in formulas["dram_utilisation"]["options"]
    assert formulas["l2_hit_rate"]["formula"].startswith("(L2_total_cache_accesses − L2_total_cache_misses)")
    assert not answer["truncated"]


def test_per_unit_names_without_brackets_are_tables_in_numeric_order(world: TestClient) -> None:
    answer = world.get(VALUES, params={"name": "Memory Partition [*].bw_util"}).json()
    assert answer["stats"] == [f"Memory Partition {i}.bw_util" for i in range(32)]
    first = [r for r in answer["rows"] if r["kernel_index"] == 0 and r["gpu_config"] == "SM61_TITANX"]
    assert [r["units"] for r in first] == [[i] for i in range(12)]
    assert [r["median"] for r in first] == [real_maps("SM61_TITANX")[0][f"Memory Partition {i}.bw_util"] for i in range(12)]
    banks = world.get(VALUES, params={"name": "Memory Partition [*].bk[*].a"}).json()
    assert banks["stats"][:3] == ["Memory Partition 0.bk0.a", "Memory Partition 0.bk1.a", "Memory Partition 0.bk2.a"]
    assert banks["stats"].index("Memory Partition 0.bk10.a") < banks["stats"].index("Memory Partition 1.bk0.a")
    catalogue = world.get(f"/api/runs/{RUN}/stats", params={"q": "partition [*].bw_util"}).json()
    assert [n["name"] for n in catalogue["names"]][:12] == [f"Memory Partition {i}.bw_util" for i in range(12)]
    assert {"name": "Memory Partition [*].bw_util", "stats": 32} in catalogue["tables"]
    tables = {t["name"] for t in world.get(f"/api/runs/{RUN}/stats", params={"q": "issue_nums"}).json()["tables"]}
    assert tables == {"single_issue_nums.WS[*]", "dual_issue_nums.WS[*]"}
    # Traffic class 0 is the only class these configs have: its names are no table.
    classes = world.get(f"/api/runs/{RUN}/stats", params={"q": "class 0"}).json()
    assert classes["names"] and classes["tables"] == []
    assert math.isfinite(first[0]["median"])


def test_an_unknown_run_is_404(world: TestClient) -> None:
    response = world.get("/api/runs/run-000000000000/stats/derived")
    assert (response.status_code, response.json()) == (404, {"detail": "run run-000000000000 not found"})
