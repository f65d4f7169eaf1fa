"""The derived metrics' facts from the shared configs' own options, worked by hand, and what a
config without them, or a kernel without a stat, gives."""

from __future__ import annotations

import pytest

from cascade_formats import derived_metrics as dm
from cascade_formats.gpgpusim_options import read_config
from tests.support import TREE

CONFIGS = TREE / "gpu-simulator" / "gpgpu-sim" / "configs" / "tested-cfgs"


@pytest.mark.parametrize(
    ("config", "core_mhz", "atom", "peak_gbps", "sms"),
    [
        # -gpgpu_dram_burst_length x -gpgpu_dram_buswidth x -gpgpu_n_mem_per_ctrlr; -gpgpu_n_mem x
        # chips x busW x -dram_data_command_freq_ratio x DRAM MHz; clusters x cores per cluster.
        ("SM61_TITANX", 1417.0, 8 * 4 * 1, 12 * 1 * 4 * 4 * 2500.0 / 1e3, 28 * 1),  # TITAN X Pascal: 480 GB/s
        ("SM7_QV100", 1132.0, 2 * 16 * 1, 32 * 1 * 16 * 2 * 850.0 / 1e3, 80 * 1),  # V100 (HBM2): 870.4 GB/s
        ("SM86_RTX3070", 1132.0, 16 * 2 * 1, 16 * 1 * 2 * 4 * 3500.5 / 1e3, 46 * 1),  # RTX 3070 (GDDR6): 448 GB/s
    ],
)
def test_a_configs_facts_come_from_its_own_options(config: str, core_mhz: float, atom: float, peak_gbps: float, sms: float) -> None:
    facts = dm.config_facts(read_config((CONFIGS / config / "gpgpusim.config").read_text()))
    assert (facts.core_mhz, facts.atom_bytes, facts.sms) == (core_mhz, atom, sms)
    assert facts.peak_bytes_per_s == pytest.approx(peak_gbps * 1e9, rel=1e-12)


def test_what_cannot_be_worked_out_is_none() -> None:
    nothing = dm.config_facts({})
    assert (nothing.core_mhz, nothing.atom_bytes, nothing.peak_bytes_per_s, nothing.sms) == (None, None, None, None)
    kernel = {"cycles": 100.0, "instructions": 400.0, "l2_accesses": 10.0, "l2_misses": 4.0, "dram_reads": 3.0, "l1d_accesses": 0.0, "l1d_misses": 0.0}
    values = dm.kernel_metrics(kernel, nothing)
    # Options are needed for bytes, rates and IPC per SM; the hit rates need none; an L1D no access reached has none.
    assert {n for n, v in values.items() if v is not None} == {"l2_hit_rate"}
    assert values["l2_hit_rate"] == 0.6
    facts = dm.config_facts({"-gpgpu_clock_domains": "1000:1000:1000:500", "-gpgpu_dram_burst_length": "2", "-gpgpu_dram_buswidth": "16", "-gpgpu_n_mem_per_ctrlr": "1"})
    both = dm.over_kernels([kernel, {**kernel, "dram_reads": 5.0, "cycles": 300.0}], facts)
    assert both["dram_read_bytes"] == (3 + 5) * 32  # an amount: summed
    assert both["dram_read_gbps"] == pytest.approx((3 + 5) * 32 / 1e9 / (400 / 1e9))  # total bytes over total time
    assert both["dram_utilisation"] is None  # no -gpgpu_n_mem nor data rate: no peak
