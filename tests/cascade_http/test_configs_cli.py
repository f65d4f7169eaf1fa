"""`cascade config derive|show|diff` as a user runs them, against a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cascade_app.config import Settings
from cascade_cli.configs_cli import joined_options
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_http.test_runs_cli import TOKEN, cascade
from tests.cascade_sim.world import accelsim_tree

L2 = "S:64:128:32,L:B:m:L:P,A:192:4,32:0,32"


@pytest.fixture
def live(tmp_path: Path, nats_url: str) -> Iterator[LiveServer]:
    tree = accelsim_tree(tmp_path / "accel-sim")
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner=False, samples=False)
    with live_server(settings) as server:
        yield server


def test_an_option_flag_takes_a_value_that_starts_with_a_dash() -> None:
    assert joined_options(["config", "derive", "X", "--option", "-a=1", "--base", "B"]) == ["config", "derive", "X", "--option=-a=1", "--base", "B"]


def test_a_variant_derived_shown_and_diffed_from_the_command_line(live: LiveServer) -> None:
    derived = cascade(live, "config", "derive", "SM61_TITANX_L2x2", "--base", "SM61_TITANX", "--option", f"-gpgpu_cache:dl2={L2}")
    assert derived.returncode == 0, derived.stderr
    assert derived.stdout.splitlines()[1:] == ["  derived from SM61_TITANX with:", f"    -gpgpu_cache:dl2 {L2}"]
    shown = cascade(live, "config", "show", "SM61_TITANX_L2x2", "--json")
    assert json.loads(shown.stdout)["options"] == {"-gpgpu_cache:dl2": L2}
    diff = cascade(live, "config", "diff", "SM61_TITANX", "SM61_TITANX_L2x2")
    assert diff.stdout.splitlines() == [
        "option            SM61_TITANX | SM61_TITANX_L2x2",
        f"-gpgpu_cache:dl2  S:64:128:16,L:B:m:L:P,A:256:64,16:0,32 | {L2}",
    ]
    refused = cascade(live, "config", "derive", "SM61_TITANX_X", "--base", "SM61_TITANX", "--option", "-gpgpu_warp_drive=9")
    assert refused.returncode == 2 and "option -gpgpu_warp_drive: GPGPU-Sim does not know it" in refused.stderr
