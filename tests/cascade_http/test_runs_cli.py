"""The runs CLI (`cascade run`, `runs`, `run show`, `run cancel`, `results`) as a user runs it:
a `cascade` process against a real server whose runner drives the fake simulator."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from cascade_app.config import Settings
from cascade_cli.client import COMMENT, ApiClient, ServerEvent, server_events
from cascade_cli.run_watch import Screen, get_run, watch
from cascade_cli import runs_cli
from cascade_cli.main import main as cli_main
from cascade_cli.runs_cli import parse_entries
from cascade_cli.runs_text import bar, comparison_table, compact, ipc
from cascade_core import events as ev
from cascade_core import attention
from cascade_api.models import Comparison, ComparisonRow
from cascade_core.gpu_configs import config_digest
from cascade_core.runs import RunEntry
from cascade_http import run_events
from tests.browser.proxy import proxy_to
from tests.cascade_http import runs_world as w
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_http.trace_archives import files_of, tar_of
from tests.cascade_sim.world import TITANX, accelsim_tree, add_config_lines
from tests.support import TRACES, wait_until

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROGRESS = re.compile(r"^(SM61_\w+) r(\d)\s+(\w+)\s+\[([#.]{20})\]\s+(\d)/3\s+(.*)$")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The fake simulator's tree, plus SM61_BROKEN: SM61_TITANX with an option no simulator knows."""
    root = accelsim_tree(tmp_path / "accel-sim")
    shutil.copytree(root / TITANX, root / TITANX.parent / "SM61_BROKEN")
    add_config_lines(root, "SM61_BROKEN", "-no_such_option 1")
    return root


@pytest.fixture
def live(tmp_path: Path, nats_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    # Each kernel takes a moment, so a watcher sees sims in the middle of their kernels.
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "0.3")
    settings = Settings(
        token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner=True, runner_slots=2, samples=False
    )
    with live_server(settings) as server:
        yield server


def cli_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CASCADE_")}
    return {**clean, "CASCADE_TOKEN": TOKEN, **extra}


def cascade(live: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    """`cascade ARGS` finding the server in CASCADE_URL and the token in CASCADE_TOKEN."""
    command = [sys.executable, "-m", "cascade_cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=cli_env(CASCADE_URL=live.url))


def api(live: LiveServer, path: str) -> httpx.Response:
    response = httpx.get(live.url + path, headers=AUTH, timeout=30)
    assert response.status_code == 200, response.text
    return response


def upload_combo(live: LiveServer) -> None:
    body = tar_of(files_of("combo-vec-mm-xz"), top="combo-vec-mm-xz")
    response = httpx.post(f"{live.url}/api/traces?id=combo", content=body, headers={**AUTH, "Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text


def progress_lines(out: str) -> list[tuple[str, ...]]:
    return [m.groups() for line in out.splitlines() if (m := PROGRESS.match(line))]


# --- the pure parts ---------------------------------------------------------------------------


def test_config_tokens_become_entries() -> None:
    known = {"SM61_TITANX", "SM7_QV100", "ODDx2"}
    assert parse_entries(["SM61_TITANXx3", "SM7_QV100", "SM61_TITANX", "ODDx2", "ODDx2x4", "NOPEx0", "SM61_TITANXX3"], known) == [
        RunEntry(gpu_config="SM61_TITANX", count=3),
        RunEntry(gpu_config="SM7_QV100", count=1),
        RunEntry(gpu_config="SM61_TITANX", count=1),
        RunEntry(gpu_config="ODDx2", count=1),  # a config's own name wins over the suffix
        RunEntry(gpu_config="ODDx2", count=4),
        RunEntry(gpu_config="NOPE", count=0),  # for the API to refuse
        RunEntry(gpu_config="SM61_TITANXX3", count=1),  # an uppercase X is part of the name
    ]


def test_numbers_read_as_the_web_app_shows_them() -> None:
    assert [compact(n) for n in (None, 0.5, 999, 999.5, 10516, 999950, 26560256)] == ["-", "0.5", "999", "1 k", "10.5 k", "1 M", "26.6 M"]
    assert [ipc(x) for x in (None, 1.90031, 18.5537, 346.2289)] == ["-", "1.9", "18.6", "346.2"]
    assert [bar(0, 3, 6), bar(2, 3, 6), bar(3, 3, 6), bar(1, 0, 6)] == ["[......]", "[####..]", "[######]", "[......]"]


def test_a_partial_comparison_totals_the_kernels_every_config_has_and_says_so() -> None:
    ns = [(1000.0, 2000.0), (3000.0, None), (5000.0, None)]  # B has finished the first kernel only
    rows = [ComparisonRow(kernel_index=i, kernel_name="k", real_ns=None, sim_ns={"A": a, "B": b}) for i, (a, b) in enumerate(ns)]
    partial = Comparison(has_real_timing=False, configs=["A", "B"], rows=rows, partial=True, kernels_done={"A": 3, "B": 1},
                         kernels_compared=1, kernels_total=4)  # fmt: skip
    lines = comparison_table(partial)
    total, ratio = (line.split() for line in lines[-3:-1])
    assert (total, ratio) == (["total", "1.000", "µs", "2.000", "µs"], ["vs", "A", "1.000x", "2.000x"])
    assert lines[-1] == "partial: 1 of 4 kernels finished by every config; totals and ratios are over those"
    final = comparison_table(Comparison(has_real_timing=False, configs=["A"], rows=rows[:1]))
    assert not any(line.startswith("partial") for line in final)


def test_server_events_are_read_as_the_html_standard_says() -> None:
    lines = [": keep-alive", "event: snapshot", "id: 7", "data: {\"a\":", "data: 1}", "", "data: x", "", "event: sim", "id: 8.1", "data: y"]
    assert list(server_events(lines, "3")) == [
        ServerEvent("snapshot", "7", '{"a":\n1}'),
        ServerEvent("message", "7", "x"),  # no id of its own: the last one carries on
        # the cut-off `sim` event has no blank line yet: it is not an event
    ]
    assert list(server_events(["data:no space", "id:9", ""])) == [ServerEvent("message", "9", "no space")]
    assert list(server_events(lines, "3", comments=True))[0] == ServerEvent(COMMENT, "3", "keep-alive")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_is_redrawn_in_place_and_a_pipe_gets_each_changed_line() -> None:
    tty, pipe = Terminal(), io.StringIO()
    for out in (tty, pipe):
        screen = Screen(out)
        screen.show(["a 1", "b 1"])
        screen.show(["a 1", "b 1"])
        screen.show(["a 2", "b 1"])
    assert tty.getvalue() == "\x1b[Ja 1\nb 1\n" + "\r\x1b[2A\x1b[Ja 2\nb 1\n"
    assert pipe.getvalue() == "a 1\nb 1\na 2\n"


# --- against a server ---------------------------------------------------------------------------


def test_run_watch_shows_each_sims_progress_and_the_outcome(live: LiveServer, tmp_path: Path) -> None:
    uploaded = cascade(live, "trace", "upload", str(TRACES / "combo-vec-mm-xz"), "--id", "combo")
    assert uploaded.returncode == 0, uploaded.stderr

    watched = cascade(live, "run", "combo", "SM61_TITANXx2", "--watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert watched.stderr == ""
    lines = watched.stdout.splitlines()
    run_id = lines[0]
    assert re.fullmatch(r"run-[0-9a-f]{12}", run_id)
    assert lines[-1] == f"run {run_id} succeeded: 2 succeeded"
    assert "\x1b" not in watched.stdout, "not a terminal: no cursor moves"

    seen = progress_lines(watched.stdout)
    assert {(config, replica) for config, replica, *_ in seen} == {("SM61_TITANX", "0"), ("SM61_TITANX", "1")}
    running = [rest for _, _, state, _, done, rest in seen if state == "running" and done in "12"]
    assert running, "a line shows a sim between kernels"
    assert any(re.fullmatch(r"IPC\s+[0-9.]+\s+[0-9.]+ [kMG]?\s?inst/s\s+(vecAdd|mult_gpu)", rest) for rest in running), running
    finals = [(replica, bar, done) for _, replica, state, bar, done, _ in seen if state == "succeeded"]
    assert sorted(finals) == [("0", "#" * 20, "3"), ("1", "#" * 20, "3")], "each sim's last line, once"

    detail = api(live, f"/api/runs/{run_id}").json()
    assert detail["entries"] == [{"gpu_config": "SM61_TITANX", "count": 2}]
    assert [s["state"] for s in detail["sims"]] == ["succeeded", "succeeded"]

    # On a terminal the lines are redrawn in place.
    on_tty = watch_on_a_terminal(live, "run", "combo", "SM61_TITANX", "--watch")
    assert on_tty.returncode == 0
    assert "\x1b[J" in on_tty.stdout and re.search(r"\r\x1b\[1A", on_tty.stdout)
    assert on_tty.stdout.rstrip().endswith("succeeded: 1 succeeded")

    # With --json, stdout is the run as it ended, and what a person reads goes to stderr.
    as_json = cascade(live, "run", "combo", "SM61_TITANX", "--watch", "--json")
    assert as_json.returncode == 0, as_json.stderr
    ended = json.loads(as_json.stdout)
    assert ended == api(live, f"/api/runs/{ended['id']}").json() and ended["state"] == "succeeded"
    assert as_json.stderr.splitlines()[0] == ended["id"] and as_json.stderr.endswith(f"run {ended['id']} succeeded: 1 succeeded\n")

    listed = cascade(live, "runs")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["run", "trace", "state", "sims", "cycles", "created"]
    newest = api(live, "/api/runs?cycles=true").json()
    assert [row.split()[0] for row in rows] == [r["id"] for r in newest] and newest[2]["id"] == run_id
    created = datetime.fromisoformat(newest[2]["created_at"]).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    # 18,448: the combo log's last gpu_tot_sim_cycle, both replicas alike.
    assert rows[2].split("  ")[0] == run_id and rows[2].endswith(f"succeeded  2 succeeded  18,448  {created}")
    as_json = cascade(live, "runs", "--json")
    assert json.loads(as_json.stdout) == newest

    compared = cascade(live, "compare", run_id)
    assert compared.returncode == 0, compared.stderr
    comparison = api(live, f"/api/runs/{run_id}/comparison").json()
    head, *kernel_rows, total, ratio = compared.stdout.splitlines()
    assert head.split() == ["#", "kernel", "SM61_TITANX"]
    assert [r.split()[:2] for r in kernel_rows] == [[str(k), n] for k, n in ((0, "vecAdd"), (1, "mult_gpu"), (2, "vecAdd"))]
    assert [float(r.split()[2]) for r in kernel_rows] == [round(row["sim_ns"]["SM61_TITANX"] / 1e3, 3) for row in comparison["rows"]]
    assert total.split()[0] == "total" and ratio.split() == ["vs", "SM61_TITANX", "1.000x"]
    assert json.loads(cascade(live, "compare", run_id, "--json").stdout) == comparison

    out = tmp_path / "downloaded"
    fetched = cascade(live, "results", run_id, "-o", str(out))
    assert fetched.returncode == 0, fetched.stderr
    expected = {out / "results.json": f"/api/runs/{run_id}/results"}
    whole = api(live, f"/api/runs/{run_id}/results").json()
    assert json.loads((out / "run.json").read_bytes()) == {**whole, "sims": [{**s, "kernels": []} for s in whole["sims"]]}
    for sim in detail["sims"]:  # a folder per sim by config and replica
        folder = out / sim["gpu_config"] / f"r{sim['replica']}"
        expected[folder / "results.json"] = f"/api/sims/{sim['id']}/results"
        expected[folder / "simulator.log"] = f"/api/sims/{sim['id']}/log"
        for file in api(live, f"/api/sims/{sim['id']}/files").json():
            expected[folder / "files" / file["name"]] = f"/api/sims/{sim['id']}/files/{file['name']}"
    assert len(expected) == 1 + 2 * (2 + 4)
    assert {p for p in out.rglob("*") if p.is_file()} == {*expected, out / "run.json"}
    for path, route in expected.items():
        assert path.read_bytes() == api(live, route).content, path
        assert f"{path}  {path.stat().st_size:,} bytes" in fetched.stdout.splitlines()
    written = [*expected, out / "run.json"]
    assert f"{out / 'run.json'}  {(out / 'run.json').stat().st_size:,} bytes" in fetched.stdout.splitlines()
    assert fetched.stdout.splitlines()[-1] == f"14 files, {sum(p.stat().st_size for p in written):,} bytes, in {out}"


def watch_on_a_terminal(live: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    """`cascade ARGS` with its stdout on a pseudo-terminal, and what it drew there."""
    controller, terminal = pty.openpty()
    command = [sys.executable, "-m", "cascade_cli", *args, "--url", live.url]
    process = subprocess.Popen(command, stdout=terminal, stderr=subprocess.PIPE, env=cli_env(), text=True)
    os.close(terminal)
    drawn = bytearray()
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    _, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(command, process.returncode, drawn.decode(), err)


def test_a_watch_on_a_quiet_stream_says_which_sims_may_never_finish(tmp_path: Path, nats_url: str, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No runner at all: the stream stays quiet, and at its keep-alives the watch reads the
    run and shows why its sims wait, until someone cancels it."""
    monkeypatch.setattr(run_events, "KEEP_ALIVE_S", 0.2)
    monkeypatch.setattr(attention, "UNTAKEN_AFTER_S", 0.0)
    settings = Settings(token=TOKEN, data_dir=tmp_path / "data", nats_url=nats_url, accelsim_dir=tree, runner=False, samples=False)
    with live_server(settings) as server:
        assert cascade(server, "trace", "upload", str(TRACES / "combo-vec-mm-xz"), "--id", "combo").returncode == 0
        client = ApiClient(server.url, TOKEN)
        body = json.dumps({"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]}).encode()
        created = get_run(client, json.loads(client.post("/api/runs", body, {"Content-Type": "application/json"}))["id"])
        shown = io.StringIO()
        watching = threading.Thread(target=watch, args=(client, created, Screen(shown)), daemon=True)
        watching.start()
        wait_until(lambda: "needs attention" in shown.getvalue(), 30, "the watch never said why the sim waits")
        line = next(line for line in shown.getvalue().splitlines() if "needs attention" in line)
        assert re.fullmatch(
            r"SM61_TITANX r0\s+pending\s+\[\.{20}\]\s+0/3\s+needs attention: no runner has taken this for \d+ s; "
            r"no live runner has GPU config SM61_TITANX", line
        ), line
        client.post(f"/api/runs/{created.id}/cancel")
        watching.join(30)
        assert not watching.is_alive(), "the watch ends with the run"
        assert shown.getvalue().splitlines()[-1].startswith("SM61_TITANX r0  cancelled")


def test_a_failed_sim_exits_1_and_run_show_tells_why(live: LiveServer) -> None:
    upload_combo(live)
    watched = cascade(live, "run", "combo", "SM61_TITANX", "SM61_BROKEN", "--watch")
    assert watched.returncode == 1, watched.stdout + watched.stderr
    lines = watched.stdout.splitlines()
    run_id = lines[0]
    detail = api(live, f"/api/runs/{run_id}").json()
    broken = next(s for s in detail["sims"] if s["gpu_config"] == "SM61_BROKEN")
    assert lines[-2:] == [
        f"run {run_id} failed: 1 succeeded, 1 failed",
        f"  SM61_BROKEN r0 {broken['id']} failed: {broken['error']}",
    ]
    assert broken["error"].startswith("GPGPU-Sim ** ERROR: Unknown Option: '-no_such_option'")
    assert any(line.startswith("SM61_BROKEN r0  failed") and line.endswith(f"error: {broken['error']}") for line in lines)

    shown = cascade(live, "run", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.splitlines()
    assert text[:4] == [
        f"run      {run_id}  failed  (1 succeeded, 1 failed)",
        "trace    combo  (sm_61, 3 kernels)",
        f"created  {datetime.fromisoformat(detail['created_at']).astimezone():%Y-%m-%d %H:%M:%S}",
        "entries  SM61_TITANX x1, SM61_BROKEN x1",
    ]
    table = {line.split()[0]: line.split() for line in text[5:8]}
    assert table["config"] == ["config", "replica", "sim", "state", "attempt", "kernels", "cycles", "instructions", "IPC", "rate", "exit"]
    good = next(s for s in detail["sims"] if s["gpu_config"] == "SM61_TITANX")
    cycles, insn = (f"{good['latest'][k]:,.0f}" for k in ("gpu_tot_sim_cycle", "gpu_tot_sim_insn"))
    assert table["SM61_TITANX"][:8] == ["SM61_TITANX", "0", good["id"], "succeeded", "1", "3/3", cycles, insn]
    assert table["SM61_TITANX"][-1] == "0" and table["SM61_BROKEN"][3:6] == ["failed", "1", "0/3"] and table["SM61_BROKEN"][-1] == "1"
    failed_block = text[text.index(f"{broken['id']} (SM61_BROKEN r0) failed: {broken['error']}") + 1 :]
    assert failed_block == [f"  last {len(broken['log_tail'])} log lines:", *(f"  | {line}" for line in broken["log_tail"])]
    assert broken["log_tail"]

    as_json = cascade(live, "run", "show", run_id, "--json")
    assert as_json.returncode == 0 and as_json.stdout.count("\n") == 1
    assert json.loads(as_json.stdout) == detail


TIMING = Path(__file__).parents[1] / "cascade_formats" / "timing"


def test_real_timing_attached_from_the_command_line_is_scored_by_compare(live: LiveServer, tmp_path: Path) -> None:
    upload_combo(live)
    watched = cascade(live, "run", "combo", "SM61_TITANX", "--watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    run_id = watched.stdout.splitlines()[0]
    # Two hardware passes, two nsys outputs concatenated (the fixture's own comment aside),
    # the second 10 % slower.
    nsys = (TIMING / "nsys-cuda-gpu-trace.csv").read_text()
    output = nsys[nsys.index("Generating SQLite file"):]
    slower = output.replace(",3232,", ",3555,").replace(",5856,", ",6442,").replace(",3104,", ",3414,")
    (tmp_path / "nsys.csv").write_text(output + slower)

    attached = cascade(live, "trace", "timing", "combo", str(tmp_path / "nsys.csv"))
    assert attached.returncode == 0, attached.stderr
    timing_id = re.search(r"real timing (timing-[0-9a-f]+) attached", attached.stdout)
    assert timing_id and attached.stdout == f"trace combo: real timing {timing_id[1]} attached (nsys: 3 kernels, 2 repeats, duration_ns)\n"

    compared = cascade(live, "compare", run_id)
    assert compared.returncode == 0, compared.stderr
    comparison = api(live, f"/api/runs/{run_id}/comparison").json()
    lines = compared.stdout.splitlines()
    assert lines[0].split() == ["#", "kernel", "SM61_TITANX", "real", "real", "range"]
    for line, row in zip(lines[1:4], comparison["rows"]):
        assert line.split()[4:6] == [f"{row['real_ns'] / 1e3:,.3f}", "µs"]
        spread = row["real_ns_spread"]
        assert line.split()[6] == f"+{(spread['max'] - row['real_ns']) / row['real_ns'] * 100:.2f}%/-{(row['real_ns'] - spread['min']) / row['real_ns'] * 100:.2f}%"
    scores = comparison["correlation"]["SM61_TITANX"]
    assert lines[6:8] == ["", "against real time, as Accel-Sim's plot-correlation.py scores it:"]
    assert lines[8].split() == ["config", "kernels", "Correl", "Err", "Agg_Err", "RPD", "NRMSE", "<1%", "<10%", "over", "under"]
    assert lines[9].split() == [
        "SM61_TITANX", "3", f"{scores['correl']:.4}", f"{scores['err_pct']:.2f}%", f"{scores['agg_err_pct']:.2f}%", f"{scores['rpd_pct']:.2f}%",
        f"{scores['nrmse']:.2f}", *(str(scores[k]) for k in ("err_under_1pct", "err_under_10pct", "over", "under")),
    ]
    assert len(lines) == 10

    again = cascade(live, "trace", "timing", "combo", str(TIMING / "ncu-details.csv"))
    assert (again.returncode, again.stderr) == (
        2,
        f"cascade: error: PUT /api/traces/combo/real-timing: 409 trace combo already has real timing ({timing_id[1]}); "
        "replace it with ?replace=true (cascade trace timing --replace)\n",
    )
    replaced = cascade(live, "trace", "timing", "combo", str(TIMING / "ncu-details.csv"), "--replace", "--json")
    assert replaced.returncode == 0, replaced.stderr
    answer = json.loads(replaced.stdout)
    assert (answer["format"], answer["measures"], answer["replaced"]) == ("ncu", ["duration_ns", "cycles"], timing_id[1])
    with_cycles = cascade(live, "compare", run_id).stdout.splitlines()
    assert with_cycles[0].split() == ["#", "kernel", "SM61_TITANX", "real", "real", "cycles"]
    assert with_cycles[-3] == "against real cycles, as Accel-Sim's plot-correlation.py scores it:"

    missing = cascade(live, "trace", "timing", "combo", str(tmp_path / "nope.csv"))
    assert (missing.returncode, missing.stderr) == (2, f"cascade: error: {tmp_path / 'nope.csv'}: No such file or directory\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("kernel_id,kernel_name,duration_ns\n1,vecAdd,soon\n")
    refused = cascade(live, "trace", "timing", "combo", str(bad), "--replace")
    assert refused.stderr == "cascade: error: PUT /api/traces/combo/real-timing?replace=true: 422 the timing file line 2: duration_ns 'soon' is not a non-negative number\n"


def test_compare_on_an_active_run_says_its_totals_are_partial(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "60")  # the sim holds after each kernel
    upload_combo(live)
    created = httpx.post(f"{live.url}/api/runs", headers=AUTH, json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
    run_id = created.json()["id"]
    wait_until(lambda: api(live, f"/api/runs/{run_id}").json()["sims"][0]["kernels_done"] >= 1, 30, "the sim finishes a kernel")
    compared = cascade(live, "compare", run_id)
    assert compared.returncode == 0, compared.stderr
    finished = len(api(live, f"/api/runs/{run_id}/comparison").json()["rows"])
    assert 1 <= finished < 3
    assert compared.stdout.splitlines()[-1] == f"partial: {finished} of 3 kernels finished by every config; totals and ratios are over those"
    assert cascade(live, "run", "cancel", run_id).returncode == 0


def test_ctrl_c_leaves_the_run_running_and_run_cancel_cancels_it(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_FAKE_ACCELSIM_PACE", "60")
    upload_combo(live)
    command = [sys.executable, "-m", "cascade_cli", "run", "combo", "SM61_TITANX", "--watch", "--url", live.url]
    seen: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), text=True) as process:
        reader = threading.Thread(target=lambda: seen.extend(iter(process.stdout.readline, "")))  # type: ignore[union-attr]
        reader.start()
        try:
            wait_until(lambda: any(" running " in line for line in seen), 30, "the watcher shows the sim running")
            process.send_signal(signal.SIGINT)
            process.wait(30)
        finally:
            process.kill()
            reader.join()
        err = process.stderr.read()  # type: ignore[union-attr]
    run_id = seen[0].strip()
    assert process.returncode == 130
    assert err == f"cascade: stopped watching; run {run_id} goes on (watch it again with: cascade run watch {run_id}; cancel it with: cascade run cancel {run_id})\n"
    assert api(live, f"/api/runs/{run_id}").json()["state"] == "active"

    cancelled = cascade(live, "run", "cancel", run_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"run {run_id} cancelled: 1 cancelled\n"
    again = cascade(live, "run", "cancel", run_id, "--json")
    assert json.loads(again.stdout) == api(live, f"/api/runs/{run_id}").json()


def test_the_watch_resumes_a_dropped_stream_from_the_last_event_id(live: LiveServer) -> None:
    upload_combo(live)
    seen: list[str] = []
    with proxy_to(live.url) as proxy:
        command = [sys.executable, "-m", "cascade_cli", "run", "combo", "SM61_TITANX", "--watch", "--url", f"http://127.0.0.1:{proxy.port}"]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), text=True) as process:
            reader = threading.Thread(target=lambda: seen.extend(iter(process.stdout.readline, "")))  # type: ignore[union-attr]
            reader.start()
            wait_until(lambda: any(" running " in line for line in seen), 30, "the watcher shows the sim running")
            proxy.drop()
            process.wait(60)
            reader.join()
        streams = [t for t in proxy.traffic if b"/events " in t[0]]
    assert process.returncode == 0, seen
    assert seen[-1] == f"run {seen[0].strip()} succeeded: 1 succeeded\n"
    assert any("resuming" in line for line in seen), seen
    (first, sent), (resumed, _) = streams[:2]
    assert b"last-event-id" not in first.lower()
    last_id = re.search(rb"\r\nLast-Event-ID: (\S+)\r\n", resumed, re.IGNORECASE)
    assert last_id is not None, resumed
    # The id of the last whole event that came through before the cut.
    whole = sent[: sent.rindex(b"\r\n\r\n")]
    assert last_id[1] == re.findall(rb"\r\nid: (\S+)\r\n", whole)[-1]


def test_results_refuses_a_file_name_that_would_leave_its_directory(live: LiveServer, tmp_path: Path) -> None:
    upload_combo(live)
    run = httpx.post(f"{live.url}/api/runs", headers=AUTH, json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 1}]})
    run_id, sim_id = run.json()["id"], run.json()["sims"][0]["id"]
    wait_until(lambda: api(live, f"/api/runs/{run_id}").json()["state"] != "active", 60)
    # A rogue worker on the cluster's NATS can name a file anything.
    evil = ev.SimFileStored(
        id=uuid.uuid4().hex, at=datetime.now(UTC), run_id=run_id, sim_id=sim_id, attempt=1, name="../../escaped",
        size=4, content_type="text/plain", object_name=f"sims/{sim_id}/1/evil", digest="x",
    )
    live.seed([evil], {f"sims/{sim_id}/1/evil": b"evil"})
    assert "../../escaped" in [f["name"] for f in api(live, f"/api/runs/{run_id}/files").json()]

    out = tmp_path / "out" / "here"
    fetched = cascade(live, "results", run_id, "-o", str(out))
    assert fetched.returncode == 2
    assert fetched.stderr == "cascade: error: the server named a file '../../escaped', which is not a safe file name\n"
    assert not (tmp_path / "escaped").exists() and not (out.parent / "escaped").exists()


def test_results_of_a_large_run_leave_out_the_whole_json(live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Past WHOLE_JSON_KERNELS (here 2, the combo's sim has 3) the sims' files and run.json are all there is."""
    upload_combo(live)
    run = httpx.post(f"{live.url}/api/runs", headers=AUTH, json={"trace_id": "combo", "entries": [{"gpu_config": "SM61_TITANX", "count": 2}]})
    run_id = run.json()["id"]
    wait_until(lambda: api(live, f"/api/runs/{run_id}").json()["state"] != "active", 60)
    monkeypatch.setattr(runs_cli, "WHOLE_JSON_KERNELS", 2)
    for name, value in cli_env(CASCADE_URL=live.url).items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "big"
    assert cli_main(["results", run_id, "-o", str(out)]) == 0
    sims = [s["id"] for s in api(live, f"/api/runs/{run_id}").json()["sims"]]
    assert {p.relative_to(out).as_posix() for p in out.glob("**/*.json")} == {"run.json", "SM61_TITANX/r0/results.json", "SM61_TITANX/r1/results.json"}
    for replica, sim in enumerate(sims):
        assert (out / "SM61_TITANX" / f"r{replica}" / "results.json").read_bytes() == api(live, f"/api/sims/{sim}/results").content
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{sum(1 for p in out.rglob('*') if p.is_file())} files, ")


def test_json_into_a_closed_pipe_ends_quietly(live: LiveServer, nats_url: str) -> None:
    upload_combo(live)
    for args in (["runs", "--json", "--url", live.url], ["events", "combo", "--json", "--nats-url", nats_url]):
        reader, writer = os.pipe()
        os.close(reader)  # as `| head` does once it has its line
        try:
            done = subprocess.run([sys.executable, "-m", "cascade_cli", *args], stdout=writer, stderr=subprocess.PIPE, env=cli_env(), timeout=60)
        finally:
            os.close(writer)
        assert (done.returncode, done.stderr) == (128 + signal.SIGPIPE, b""), done.stderr.decode()

    piped = subprocess.run(
        f"{sys.executable} -m cascade_cli runs --json --url {live.url} | head -1", shell=True, capture_output=True, text=True,
        env=cli_env(), timeout=60,
    )
    assert piped.stderr == "" and json.loads(piped.stdout) == api(live, "/api/runs").json()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_compare_and_run_show_keep_replicas_of_different_config_files_apart(live: LiveServer) -> None:
    run_id, old, new = "run-digests00001", {"gpgpusim.config": "1" * 64}, {"gpgpusim.config": "2" * 64}
    sims = [("sim-digests-r0", "SM61_TITANX", 0), ("sim-digests-r1", "SM61_TITANX", 1)]
    at = datetime(2026, 11, 8, 10, tzinfo=UTC)
    events = [
        *w.trace_events("digests", arch="sm_61", kernel_count=1, step_timeline=False),
        w.run_created(run_id, sims, trace_id="digests", kernels_total=1),
    ]
    for (sim_id, _, _), cycles, files in zip(sims, (1000, 500), (old, new), strict=True):
        events += w.finished_sim(run_id, sim_id, [("_Z6kernelv1", cycles)], 1000.0, at, config_digests=files)
    live.seed(events)
    labels = [f"SM61_TITANX@{config_digest(old)[:6]}", f"SM61_TITANX@{config_digest(new)[:6]}"]

    compared = cascade(live, "compare", run_id)
    assert compared.returncode == 0, compared.stderr
    head, row, total, ratio = compared.stdout.splitlines()
    assert head.split() == ["#", "kernel", *labels]
    assert row.split() == ["0", "_Z6kernelv1", "1.000", "µs", "0.500", "µs"], "each digest's own, never pooled"
    assert ratio.split() == ["vs", labels[0], "1.000x", "0.500x"]

    shown = cascade(live, "run", "show", run_id).stdout.splitlines()
    assert [line.split()[:3] for line in shown if "sim-digests" in line] == [[labels[0], "0", "sim-digests-r0"], [labels[1], "1", "sim-digests-r1"]]
    assert "SM61_TITANX: replicas ran config files of different digests, shown apart as NAME@<digest> and never pooled" in shown


def test_errors_are_one_line_with_the_apis_detail(live: LiveServer) -> None:
    upload_combo(live)
    cases = {
        ("run", "show", "run-000000000000"): "GET /api/runs/run-000000000000: 404 run run-000000000000 not found",
        ("run", "cancel", "run-000000000000"): "POST /api/runs/run-000000000000/cancel: 404 run run-000000000000 not found",
        ("results", "run-000000000000"): "GET /api/runs/run-000000000000: 404 run run-000000000000 not found",
        ("run", "combo", "SM99_NOPE"): "POST /api/runs: 422 unknown GPU config SM99_NOPE: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_61 traces: SM61_BROKEN, SM61_TITANX; 2 more of other archs)",
        ("run", "combo", "SM61_TITANXx0"): "POST /api/runs: 422 body.entries.0.count: Input should be greater than or equal to 1",
        ("run", "nope", "SM61_TITANX"): "POST /api/runs: 404 trace nope not found",
        # `show` right after `run` is the command; after -- it is a trace.
        ("run", "--", "show", "SM61_TITANX"): "POST /api/runs: 404 trace show not found",
    }
    for args, detail in cases.items():
        out = cascade(live, *args)
        assert (out.returncode, out.stdout, out.stderr) == (2, "", f"cascade: error: {detail}\n"), args

    port = free_port()
    command = [sys.executable, "-m", "cascade_cli", "runs", "--url", f"http://127.0.0.1:{port}"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=cli_env())
    assert (out.returncode, out.stderr) == (2, f"cascade: error: http://127.0.0.1:{port}: unreachable (Connection refused) (URL from --url)\n")


def test_run_split_cuts_each_sim_into_chunks_stitched_into_one(live: LiveServer) -> None:
    upload_combo(live)
    watched = cascade(live, "run", "combo", "SM61_TITANX", "--split", "1", "--warmup", "2", "--watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    detail = api(live, f"/api/runs/{watched.stdout.splitlines()[0]}").json()
    assert detail["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1, "split": {"kernels_per_chunk": 1, "warmup": 2}}]
    (sim,) = detail["sims"]
    assert sim["state"] == "succeeded" and sim["kernels_done"] == 3 and len(sim["split"]["chunks"]) == 3
    assert sim["latest"]["gpu_tot_sim_cycle"] == 18448  # as the sim run whole: per kernel with 2 warm-up launches, exact

    for args, error in {
        ("--warmup", "1"): "cascade: error: --warmup goes with --split K\n",
        ("--split", "auto", "--warmup", "1"): "cascade: error: --warmup goes with --split K\n",
        ("--split", "0"): "argument --split: expected a number of kernel launches (1 or more) or auto, not '0'\n",
    }.items():
        out = cascade(live, "run", "combo", "SM61_TITANX", *args)
        assert out.returncode == 2 and out.stderr.endswith(error), (args, out.stderr)


def test_run_reuse_simulates_each_kernel_twice_and_reuses_the_warm_result(live: LiveServer) -> None:
    body = tar_of(files_of("matrixmul-x40"), top="matrixmul-x40")
    response = httpx.post(f"{live.url}/api/traces?id=x40", content=body, headers={**AUTH, "Content-Type": "application/x-tar"})
    assert response.status_code == 202 and response.json()["state"] == "ready", response.text
    watched = cascade(live, "run", "x40", "SM61_TITANX", "--reuse", "--watch")
    assert watched.returncode == 0, watched.stdout + watched.stderr
    run_id = watched.stdout.splitlines()[0]
    detail = api(live, f"/api/runs/{run_id}").json()
    assert detail["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1, "reuse": True}]
    (sim,) = detail["sims"]
    assert sim["state"] == "succeeded" and sim["reuse"] is True and sim["kernels_done"] == 40
    assert sim["latest"]["gpu_tot_sim_cycle"] == 297142  # launch 1 cold, launch 2 warm, reused 38 times
    reused = [k.get("reused_from") for k in api(live, f"/api/runs/{run_id}/kernels").json()]
    assert reused == [None, None] + [2] * 38

    both = cascade(live, "run", "x40", "SM61_TITANX", "--reuse", "--split", "20", "--watch")
    assert both.returncode == 0, both.stdout + both.stderr
    detail = api(live, f"/api/runs/{both.stdout.splitlines()[0]}").json()
    assert detail["entries"] == [{"gpu_config": "SM61_TITANX", "count": 1, "split": {"kernels_per_chunk": 20, "warmup": 2}, "reuse": True}]
    assert detail["sims"][0]["latest"]["gpu_tot_sim_cycle"] == 297142  # each chunk reuses its own launches' warm result
