"""The everyday commands (issue 27): watching a run again, traces listed, deleted and uploaded
from archives, the configs a run may name, a sim's log and following it, the version; each
as a user runs it, a `cascade` process against a real server whose runner drives the fake
simulator, and checked against what the API answers."""

from __future__ import annotations

import gzip
import json
import lzma
import re
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from cascade_cli.history import describe
from cascade_core import events as ev
from tests.cascade_http.live import LiveServer
from tests.cascade_http.test_runs_cli import AUTH, api, cascade, cli_env, live, progress_lines, tree, upload_combo
from tests.cascade_http.trace_archives import files_of, tar_of

__all__ = ["live", "tree"]  # the fixtures, used here by name


def test_run_watch_follows_a_run_made_elsewhere_and_one_that_has_ended(live: LiveServer) -> None:
    upload_combo(live)
    created = cascade(live, "run", "combo", "SM61_TITANXx2")
    assert created.returncode == 0, created.stderr
    run_id = created.stdout.strip()

    watched = cascade(live, "run", "watch", run_id)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    lines = watched.stdout.splitlines()
    assert lines[0] == run_id and lines[-1] == f"run {run_id} succeeded: 2 succeeded"
    assert {(config, replica, state) for config, replica, state, *_ in progress_lines(watched.stdout) if state == "succeeded"} == {
        ("SM61_TITANX", "0", "succeeded"), ("SM61_TITANX", "1", "succeeded")
    }

    again = cascade(live, "run", "watch", run_id, "--json")  # an ended run: at once, as it ended
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == api(live, f"/api/runs/{run_id}").json()
    missing = cascade(live, "run", "watch", "run-000000000000")
    assert (missing.returncode, missing.stderr) == (2, "cascade: error: GET /api/runs/run-000000000000: 404 run run-000000000000 not found\n")


@pytest.mark.parametrize(("suffix", "pack"), [(".tar", lambda b: b), (".tar.gz", gzip.compress), (".tar.xz", lzma.compress)])
def test_a_trace_uploaded_from_an_archive_is_listed_and_deleted(live: LiveServer, tmp_path: Path, suffix: str, pack: object) -> None:
    archive = tmp_path / f"combo{suffix}"
    archive.write_bytes(pack(tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")))  # type: ignore[operator]
    uploaded = cascade(live, "trace", "upload", str(archive), "--id", "from-archive")
    assert uploaded.returncode == 0, uploaded.stderr
    assert uploaded.stdout.splitlines()[-1].startswith("trace from-archive: ready: 3 kernels, sm_61, ")

    listed = cascade(live, "trace", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["trace", "state", "kernels", "arch", "suggested", "config", "size", "created"]
    assert [row.split()[:4] for row in rows] == [["from-archive", "ready", "3", "sm_61"]]
    assert json.loads(cascade(live, "trace", "list", "--json").stdout) == api(live, "/api/traces").json()

    deleted = cascade(live, "trace", "delete", "from-archive")
    assert (deleted.returncode, deleted.stdout) == (0, "trace from-archive: deleted\n")
    assert cascade(live, "trace", "list").stdout == "no traces\n"
    # --json: the Trace uploaded, in its final state; and as it was just before it was deleted.
    as_json = cascade(live, "trace", "upload", str(archive), "--id", "again", "--json")
    assert as_json.returncode == 0, as_json.stderr
    trace = json.loads(as_json.stdout)
    assert [trace] == api(live, "/api/traces").json() and trace["state"] == "ready"
    detail = api(live, "/api/traces/again").json()
    gone = cascade(live, "trace", "delete", "again", "--json")
    assert gone.returncode == 0 and json.loads(gone.stdout) == detail
    again = cascade(live, "trace", "delete", "from-archive")
    assert again.returncode == 2 and again.stderr.startswith("cascade: error: DELETE /api/traces/from-archive: 404 ")

    neither = tmp_path / "notes.txt"
    neither.write_text("x")
    refused = cascade(live, "trace", "upload", str(neither))
    assert refused.returncode == 2 and "neither a directory nor an archive" in refused.stderr


def test_configs_lists_what_a_run_may_name_and_where_it_runs(live: LiveServer) -> None:
    shown = cascade(live, "configs")
    assert shown.returncode == 0, shown.stderr
    offered = api(live, "/api/gpu-configs").json()
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["config", "arch", "clock", "MHz", "digest", "base", "runs", "on"]
    assert [row.split()[0] for row in rows] == [c["name"] for c in offered]
    titanx = next(row for row in rows if row.startswith("SM61_TITANX "))
    config = next(c for c in offered if c["name"] == "SM61_TITANX")
    assert titanx.split()[:4] == ["SM61_TITANX", "sm_61", f"{config['core_clock_mhz']:g}", config["digest"][:12]]
    assert "this server" in titanx
    assert json.loads(cascade(live, "configs", "--json").stdout) == offered

    upload_combo(live)
    typo = cascade(live, "run", "combo", "SM61_TITANY")
    assert typo.returncode == 2
    assert typo.stderr == (
        "cascade: error: POST /api/runs: 422 unknown GPU config SM61_TITANY: no live runner has it, nor this server's Accel-Sim "
        "install (configs offered for sm_61 traces: SM61_BROKEN, SM61_TITANX; 2 more of other archs); did you mean SM61_TITANX?\n"
    )


def test_sim_log_prints_the_log_and_follows_a_running_sim_to_its_end(live: LiveServer) -> None:
    upload_combo(live)
    run_id = cascade(live, "run", "combo", "SM61_TITANX").stdout.strip()
    sim_id = api(live, f"/api/runs/{run_id}").json()["sims"][0]["id"]
    command = [sys.executable, "-m", "cascade_cli", "sim", "log", sim_id, "--follow", "--url", live.url]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env()) as follower:
        out, err = follower.communicate(timeout=120)
    assert follower.returncode == 0, err
    assert api(live, f"/api/runs/{run_id}").json()["state"] == "succeeded"
    whole = api(live, f"/api/sims/{sim_id}/log").content
    assert out == whole and whole.endswith(b"\n") and b"gpu_tot_sim_cycle" in whole
    printed = cascade(live, "sim", "log", sim_id)
    assert printed.returncode == 0 and printed.stdout.encode() == whole

    lines = whole.splitlines(keepends=True)
    for after in (0, 1, len(lines) // 2, len(lines) - 1, len(lines), len(lines) + 5):
        part = api(live, f"/api/sims/{sim_id}/log?after_line={after}")
        assert part.content == b"".join(lines[after:]), after
        assert (part.headers["X-Sim-State"], part.headers["X-Sim-Attempt"]) == ("succeeded", "1")
    for bad in ("-1", "x", "1.5", "１", ["1", "2"]):
        refused = httpx.get(f"{live.url}/api/sims/{sim_id}/log", params={"after_line": bad}, headers=AUTH)
        assert refused.status_code == 422 and "after_line" in refused.json()["detail"], bad


def test_sim_log_follow_ends_failed_with_a_failed_sim(live: LiveServer) -> None:
    upload_combo(live)
    run_id = cascade(live, "run", "combo", "SM61_BROKEN").stdout.strip()
    sim_id = api(live, f"/api/runs/{run_id}").json()["sims"][0]["id"]
    followed = cascade(live, "sim", "log", sim_id, "--follow")
    assert followed.returncode == 1
    assert followed.stdout.encode() == api(live, f"/api/sims/{sim_id}/log").content


def test_version_and_heartbeats_read_as_text() -> None:
    version = subprocess.run([sys.executable, "-m", "cascade_cli", "--version"], capture_output=True, text=True, env=cli_env())
    assert version.returncode == 0 and re.fullmatch(r"cascade \d+\.\d+\.\d+\n", version.stdout)
    beat = ev.SimHeartbeat(
        id="e1", at=datetime(2026, 12, 4, tzinfo=UTC), run_id="run-a", sim_id="sim-a1", attempt=1, kernels_done=0, current_kernel=None,
        latest=ev.SimMetrics(), first_line_seq=1, log_deflated=zlib.compress(b"GPGPU-Sim version 4.2.0\nkernel 1\nkernel 2"),
    )
    line = describe(7, beat)
    assert "log=[3 lines]" in line and "b'" not in line and "log_deflated" not in line, line
