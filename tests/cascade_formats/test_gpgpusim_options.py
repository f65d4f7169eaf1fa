"""GPGPU-Sim's options as Cascade reads them: the set a build knows, learnt from a real log's
option dump (the catalogue file is what the logs give), each option's type, the checks of a
value (the IPOLY rule of gpu-cache.h and hashing.cc among them), and config files read and
rewritten with other values."""

from __future__ import annotations

import pytest

from cascade_formats import gpgpusim_options as g
from tests.support import TREE

LOG = "/work/shared/accelsim/logs/vectoradd-100-32__SM61_TITANX.log"
TITANX = TREE / "gpu-simulator/gpgpu-sim/configs/tested-cfgs/SM61_TITANX/gpgpusim.config"


def test_the_catalogue_holds_what_the_real_logs_option_dump_lists() -> None:
    with open(LOG) as lines:
        build, options = g.learn(lines)
    assert build is not None and build in g.catalogue()
    assert g.catalogue()[build] == {name: spec for name, spec in options.items() if name != "-trace"}
    assert len(options) > 200 and options["-gpgpu_n_clusters"] == g.OptionSpec(kind="int", default="28", help="number of processing clusters")


@pytest.mark.parametrize(
    ("option", "kind"),
    [
        ("-gpgpu_n_clusters", "int"),
        ("-trace_enabled", "flag"),
        ("-gpgpu_cache:dl2", "cache"),
        ("-gpgpu_clock_domains", "float_list"),
        ("-gpgpu_shader_core_pipeline", "int_list"),
        ("-gpgpu_scheduler", "text"),
        ("-power_simulation_mode", "int"),  # 0=Sim, 1=HW, 2=HW-Sim Hybrid: not a flag
    ],
)
def test_an_options_type_is_told_from_its_value_and_help(option: str, kind: str) -> None:
    assert all(specs[option].kind == kind for specs in g.catalogue().values())


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"-gpgpu_warp_drive": "1"}, "option -gpgpu_warp_drive: GPGPU-Sim does not know it"),
        ({"gpgpu_n_clusters": "1"}, "option gpgpu_n_clusters: an option's name starts with '-'"),
        ({"-gpgpu_n_clusters": "14.5"}, "option -gpgpu_n_clusters: '14.5' is not an integer"),
        ({"-trace_enabled": "2"}, "option -trace_enabled: '2' is not 0 or 1"),
        ({"-gpgpu_clock_domains": "1417:fast"}, "option -gpgpu_clock_domains: '1417:fast' is not a list of numbers separated by ':'"),
        ({"-gpgpu_cache:dl2": "S:128:128:16,L:B:m:L:P,A:256:64,16:0,32"}, "option -gpgpu_cache:dl2: 128 sets with the IPOLY set-index hash (P)"),
        ({"-gpgpu_cache:dl2": "S:8:128:16,L:B:m:L:P,A:256:64,16:0,32"}, "option -gpgpu_cache:dl2: 8 sets with the IPOLY"),
        ({"-gpgpu_cache:dl2": "S:64:64:16,L:B:m:L:P,A:256:64,16:0,32"}, "a sector cache (S) has 128-byte lines"),
        ({"-gpgpu_cache:dl2": "N:64:128:16,L:B:f:L:L,A:256:64,16:0,32"}, "a write-back cache (B) cannot allocate on fill"),
        ({"-gpgpu_cache:dl2": "64:128:16"}, "option -gpgpu_cache:dl2: '64:128:16' is not a cache config"),
        ({"-gpgpu_scheduler": 'gto"\n-x 1'}, "is no value"),
    ],
)
def test_a_value_the_simulator_would_refuse_or_abort_on_is_refused_saying_why(options: dict[str, str], why: str) -> None:
    with pytest.raises(g.InvalidOption) as refused:
        g.check(options)
    assert why in str(refused.value)


@pytest.mark.parametrize(
    "options",
    [
        {"-gpgpu_cache:dl2": "S:64:128:32,L:B:m:L:P,A:192:4,32:0,32"},
        {"-gpgpu_cache:dl2": "S:128:128:16,L:B:m:L:L,A:256:64,16:0,32"},  # 128 sets with the linear index
        {"-gpgpu_cache:dl1": "none"},
        {"-gpgpu_n_clusters": "14", "-trace_enabled": "1", "-trace_components": "LIVENESS", "-gpgpu_clock_domains": "1000.0:1000.0:1000.0:2500.0"},
    ],
)
def test_values_the_simulator_takes_pass(options: dict[str, str]) -> None:
    g.check(options)


def test_a_config_rewritten_has_a_lines_value_replaced_and_other_options_appended() -> None:
    text = TITANX.read_text()
    changed = g.with_options(text, {"-gpgpu_n_clusters": "14", "-gpgpu_max_insn": "1000", "-gpgpu_scheduler": "two_level_active 8"})
    assert g.read_config(changed) == {**g.read_config(text), "-gpgpu_n_clusters": "14", "-gpgpu_max_insn": "1000", "-gpgpu_scheduler": "two_level_active 8"}
    assert "-gpgpu_n_clusters 14" in changed.splitlines() and changed.count("-gpgpu_n_clusters") == text.count("-gpgpu_n_clusters")
    assert changed.splitlines()[-1] == "-gpgpu_max_insn 1000"


def test_a_config_file_reads_as_gpgpu_sim_reads_it() -> None:
    text = '-a 1 # a comment\n#-b 2\n-c "x:y\n  z"\n-a 3\n'
    assert g.read_config(text) == {"-a": "3", "-c": "x:y z"}
