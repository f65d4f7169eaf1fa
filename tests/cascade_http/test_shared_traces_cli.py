"""`cascade trace add --path DIR [--id ID]` as a user runs it, a `cascade` process against a
real server that allows a shared root and whose runner runs the trace where it lies; and
`serve --shared-trace-root` read into the settings, repeated, or from the environment."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cascade_app.config import Settings
from cascade_cli.main import _settings, build_parser
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_http.test_runs_cli import TOKEN, api, cascade, tree
from tests.support import TRACES

__all__ = ["tree"]  # the fixture, used here by name


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    shutil.copytree(TRACES / "combo-vec-mm-xz", root / "combo")
    return root


@pytest.fixture
def live(tmp_path: Path, nats_url: str, tree: Path, shared: Path) -> Iterator[LiveServer]:
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner=True, runner_slots=2, samples=False,
        shared_trace_roots=str(shared),
    )
    with live_server(settings) as server:
        yield server


def test_trace_add_reads_a_shared_trace_in_place_and_a_run_of_it_succeeds(live: LiveServer, shared: Path) -> None:
    folder = shared / "combo"
    added = cascade(live, "trace", "add", "--path", str(folder), "--id", "combo")
    assert added.returncode == 0, added.stderr
    size = sum(p.stat().st_size for p in folder.iterdir())
    assert added.stdout == f"trace combo: ready: 3 kernels, sm_61, {size} bytes, read in place at {folder}\n"
    as_json = cascade(live, "trace", "add", "--path", str(folder), "--id", "again", "--json")
    assert as_json.returncode == 0, as_json.stderr
    listed = {t["id"]: t for t in api(live, "/api/traces").json()}
    assert json.loads(as_json.stdout) == listed["again"] and listed["again"]["state"] == "ready"
    copied = cascade(live, "trace", "add", "--path", str(folder), "--id", "copied", "--copy")
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.endswith(f"read in place at {folder}, a copy stored for runners that cannot see it\n")

    ran = cascade(live, "run", "combo", "SM61_TITANX", "--watch")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[-1].endswith("succeeded: 1 succeeded")

    taken = cascade(live, "trace", "add", "--path", str(folder), "--id", "combo")
    assert (taken.returncode, taken.stderr) == (2, "cascade: error: POST /api/traces/shared: 409 trace combo already exists\n")
    outside = cascade(live, "trace", "add", "--path", str(TRACES / "combo-vec-mm-xz"))
    assert outside.returncode == 2
    assert outside.stderr == (
        f"cascade: error: POST /api/traces/shared: 422 {TRACES / 'combo-vec-mm-xz'} is not under a shared trace root of this server ({shared})\n"
    )


def test_serve_takes_shared_trace_roots_from_its_flag_repeated_or_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CASCADE_SHARED_TRACE_ROOTS", raising=False)
    assert _settings(build_parser().parse_args(["serve"])).shared_roots == []
    args = build_parser().parse_args(["serve", "--shared-trace-root", str(tmp_path / "a"), "--shared-trace-root", str(tmp_path / "b")])
    assert _settings(args).shared_roots == [tmp_path / "a", tmp_path / "b"]
    monkeypatch.setenv("CASCADE_SHARED_TRACE_ROOTS", f"{tmp_path / 'c'}{os.pathsep}{tmp_path / 'd'}")
    assert _settings(build_parser().parse_args(["serve"])).shared_roots == [tmp_path / "c", tmp_path / "d"]
