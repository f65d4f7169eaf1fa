from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest

from cascade_core.gpu_configs import (
    GpuConfig,
    arch_from_config_name,
    config_digest,
    config_labels,
    core_clock_from_config,
    offered,
    suggested_config,
)
from cascade_core.runners import Runner
from tests.support import TREE

CONFIGS = TREE / "gpu-simulator/gpgpu-sim/configs/tested-cfgs"


@pytest.mark.parametrize(
    ("name", "arch"),
    [
        ("SM90_H100", "sm_90"),
        ("SM7_QV100", "sm_70"),
        ("SM61_TITANX", "sm_61"),
        ("SM86_RTX3070", "sm_86"),
        ("SM75_RTX2060", "sm_75"),
        ("SM100_B200", "sm_100"),
        ("SM6_TITANX", "sm_60"),
        ("SM90", None),
        ("SM_H100", None),
        ("SM0_X", None),
        ("sm90_h100", None),
        ("H100", None),
        ("", None),
    ],
)
def test_arch_from_config_name(name: str, arch: str | None) -> None:
    assert arch_from_config_name(name) == arch


@pytest.mark.parametrize(
    ("name", "clock"),
    [("SM61_TITANX", 1417.0), ("SM7_QV100", 1132.0), ("SM86_RTX3070", 1132.0)],
)
def test_core_clock_of_the_shared_configs(name: str, clock: float) -> None:
    assert core_clock_from_config((CONFIGS / name / "gpgpusim.config").read_text()) == clock


@pytest.mark.parametrize(
    ("text", "clock"),
    [
        # commented-out lines, whole or in part, do not count; later lines do not override
        ("#-gpgpu_clock_domains 1.0:1.0:1.0:1.0\n-gpgpu_clock_domains 1410.0:1410.0:1410.0:1215.0\n", 1410.0),
        ("  -gpgpu_clock_domains\t1980:1980:1980:2619 # H100\n-gpgpu_clock_domains 5:5:5:5\n", 1980.0),
        ("# -gpgpu_clock_domains 1628.0:1628.0:1628.0:850.0\n", None),
        ("-gpgpu_clock_domains_extra 1.0:1.0:1.0:1.0\n", None),
        ("-gpgpu_clock_domains\n", None),
        ("-gpgpu_clock_domains fast:1:1:1\n", None),
        ("-gpgpu_clock_domains 0:1:1:1\n", None),
        ("-gpgpu_clock_domains nan:1:1:1\n", None),
        ("", None),
    ],
)
def test_core_clock_from_config(text: str, clock: float | None) -> None:
    assert core_clock_from_config(text) == clock


def test_suggested_config_is_the_first_by_name_of_the_arch() -> None:
    configs = [
        GpuConfig(name="SM90_H200", arch="sm_90", core_clock_mhz=1980.0),
        GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0),
        GpuConfig(name="SM90_H100", arch="sm_90", core_clock_mhz=1980.0),
    ]
    assert suggested_config("sm_90", configs) == "SM90_H100"
    assert suggested_config("sm_61", configs) == "SM61_TITANX"
    assert suggested_config("sm_86", configs) is None


def test_offered_configs_are_the_local_ones_and_the_runners_once_per_name_and_digest() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)

    def runner(id: str, *configs: GpuConfig) -> Runner:
        names = [c.name for c in configs]
        return Runner(id=id, host="h", slots=1, running=[], configs=names, started_at=at, last_seen_at=at, gpu_configs=list(configs))

    titanx = GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0, digest="b" * 64)
    changed = GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0, digest="a" * 64)
    volta = GpuConfig(name="SM7_QV100", arch="sm_70", core_clock_mhz=1132.0, digest="c" * 64)
    older = Runner(id="r-old", host="h", slots=1, running=[], configs=["SM90_H100"], started_at=at, last_seen_at=at)  # names only
    shown = offered([titanx], [runner("r2", titanx, volta), runner("r1", changed, titanx), older])
    assert [(c.name, c.digest, c.local, c.runners) for c in shown] == [
        ("SM61_TITANX", "a" * 64, False, ["r1"]),
        ("SM61_TITANX", "b" * 64, True, ["r1", "r2"]),
        ("SM7_QV100", "c" * 64, False, ["r2"]),
    ]
    assert (shown[1].arch, shown[1].core_clock_mhz) == ("sm_61", 1417.0)


def test_a_configs_digest_is_sha256_over_its_files_sha256sum_lines() -> None:
    files = {"trace.config": "1" * 64, "gpgpusim.config": "2" * 64}
    lines = f"{'2' * 64}  gpgpusim.config\n{'1' * 64}  trace.config\n"
    assert config_digest(files) == hashlib.sha256(lines.encode()).hexdigest()
    assert config_digest(files | {"gpgpusim.config": "3" * 64}) != config_digest(files)


def test_a_config_of_one_digest_keeps_its_name_and_one_of_several_is_labelled_per_digest() -> None:
    old, new = {"gpgpusim.config": "1" * 64}, {"gpgpusim.config": "2" * 64}
    old_label, new_label = f"SM61_TITANX@{config_digest(old)[:6]}", f"SM61_TITANX@{config_digest(new)[:6]}"
    assert config_labels([("a", "SM61_TITANX", old), ("b", "SM61_TITANX", old), ("c", "SM61_TITANX", None)]) == dict.fromkeys("abc", "SM61_TITANX")
    sims = [("a", "SM61_TITANX", old), ("b", "SM61_TITANX", new), ("c", "SM61_TITANX", None), ("d", "SM7_QV100", new)]
    assert config_labels(sims) == {"a": old_label, "b": new_label, "c": "SM61_TITANX", "d": "SM7_QV100"}
