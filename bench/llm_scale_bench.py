"""Runs at LLM scale: 4 sims x 10,152 kernels and 1 sim x 100,000 kernels, every read of them.

    .venv/bin/python bench/llm_scale_bench.py [--only 4x10k|100k] [--sims N] [--kernels N]
        [--db-memory-bytes N] [--route-timeout 900] [--no-browser] [--skip-read WHAT ...] [--python PATH]

Each case on a fresh data dir: `cascade serve --no-runner` (its embedded nats-server, the
default DuckDB budget unless --db-memory-bytes) and one `cascade worker` with a slot per sim,
so that the runner's CPU is its own process's (runner_bench does the same); the fake
simulator replays the combo log with its kernel section repeated to --kernels (campaign_bench's
`sim_log`, runner_bench's `big_log`). One run of --sims fresh sims (replicas alike would
otherwise simulate once). Reported, as markdown tables on stdout (progress on stderr):

- ingest: wall time from the run's creation until it is final and projected (polled every 10 s; serve's CPU
  for those polls is measured after and shown taken out too); CPU per kernel of
  serve, nats-server and the runner over that time; serve's peak RSS meanwhile.
- bytes per kernel: the event stream's bytes from JetStream's stream info; the read model's
  DuckDB file (after serve has stopped and checkpointed) and each table's estimated_size and
  its blocks in storage.
- every read route of the run, one at a time, read to the end and dropped: status, time to
  first byte and to the end, bytes received, and serve's peak RSS during it (VmRSS sampled
  every 50 ms). A route that fails (an error status, a cut body, a timeout) is a row saying
  so, and the bench carries on. `cascade replay --verify` is its route, POST /api/replay/verify.
- the web app's tabs in Chromium (/usr/bin/chromium through playwright): time from opening
  each tab to its content drawn, or the error it shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, cast
from urllib.parse import quote

import duckdb
import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import bench.runner_bench as runner_bench  # noqa: E402
from bench.campaign_bench import sim_log  # noqa: E402
from bench.runner_bench import CONFIG, TOKEN, Sampler, cpu_seconds, request, served, upload  # noqa: E402
from bench.sse_load_bench import processes  # noqa: E402
from cascade_nats import subjects  # noqa: E402
from cascade_nats.access import parse  # noqa: E402
from cascade_nats.connect import connect  # noqa: E402
from cascade_process import event_log  # noqa: E402
from tests.cascade_sim.world import accelsim_tree  # noqa: E402

CASES = {"4x10k": (4, 10_152), "100k": (1, 100_000)}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MiB = 1024 * 1024
# A stat every kernel of the combo log prints once, and one it prints per L2 bank (the
# issue's failing example).
PLAIN_STAT = "L2_total_cache_accesses"
UNIT_STAT = "L2_cache_bank[*].Miss_rate"


class Outcome(NamedTuple):
    what: str
    status: str  # the HTTP status, or what went wrong
    seconds: float
    first_byte_s: float | None
    received: int
    peak_rss_mib: float | None
    note: str


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def rss_peak(pid: int) -> Iterator[Sampler]:
    """serve's resident memory sampled for as long as the block runs."""
    sampler = Sampler(pid)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.running = False
        sampler.join()


def peak_mib(sampler: Sampler) -> float | None:
    return sampler.peak_kb / 1024 if sampler.samples else None


def fetch(http: httpx.Client, server: int, what: str, method: str, path: str, timeout: float) -> Outcome:
    """One route read to its end (or its failure), its bytes dropped as they come."""
    received, first, status, note = 0, None, "", ""
    started = time.perf_counter()
    with rss_peak(server) as sampler:
        try:
            with http.stream(method, path, timeout=httpx.Timeout(timeout, connect=30)) as response:
                status = str(response.status_code)
                for chunk in response.iter_raw(1 << 20):
                    first = time.perf_counter() - started if first is None else first
                    received += len(chunk)
                    if response.status_code >= 400 and len(note) < 160:
                        note += chunk.decode(errors="replace")
                    if time.perf_counter() - started > timeout:
                        status, note = f"{status}, cut by the bench", f"still sending after {timeout:.0f} s"
                        break
        except httpx.HTTPError as e:
            status = f"{status + ', ' if status else ''}{type(e).__name__}"
            note = str(e)
    outcome = Outcome(what, status, time.perf_counter() - started, first, received, peak_mib(sampler), " ".join(note.split())[:160])
    log(f"  {outcome}")
    return outcome


# Every read of a run, in the order the bench makes them: what it is, its method and path
# ({run} and {sim}, the run's first sim, filled in), columns two spaces or more apart.
READS = """
run                  GET   /api/runs/{run}
kernels              GET   /api/runs/{run}/kernels
comparison           GET   /api/runs/{run}/comparison
stats (catalogue)    GET   /api/runs/{run}/stats
stats/values plain   GET   /api/runs/{run}/stats/values?name={plain}
stats/values [*]     GET   /api/runs/{run}/stats/values?name={units}
step-timelines       GET   /api/runs/{run}/step-timelines
files (run)          GET   /api/runs/{run}/files
files (sim)          GET   /api/sims/{sim}/files
perfetto             GET   /api/runs/{run}/perfetto
results (sim)        GET   /api/sims/{sim}/results
results (run)        GET   /api/runs/{run}/results
export               GET   /api/runs/{run}/export
log (sim)            GET   /api/sims/{sim}/log
replay --verify      POST  /api/replay/verify
"""


def routes(run: dict[str, Any], skipped: list[str]) -> list[tuple[str, str, str]]:
    """READS of this run, as (what, method, path), but those `skipped`."""
    names = {"run": run["id"], "sim": run["sims"][0]["id"], "plain": quote(PLAIN_STAT), "units": quote(UNIT_STAT)}
    rows = [re.split(r"\s{2,}", line) for line in READS.strip().splitlines()]
    return [(what, method, path.format(**names)) for what, method, path in rows if what not in skipped]


def tabs(url: str, run: dict[str, Any], kernels: int, server: int, timeout: float) -> list[Outcome]:
    """Each tab of the run's page opened afresh in Chromium: the time until it has drawn the
    run (or shows an error), and serve's peak RSS meanwhile."""
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import ARGS, CHROMIUM

    page_of = f"{url}/#/runs/{run['id']}"
    drawn = {
        "sims": ("", f"#sims-table tbody[data-sim]:nth-of-type({len(run['sims'])})"),
        "timeline": ("/timeline", f"#timeline-canvas[data-kernels='{kernels}']"),
        "compare": ("/compare", "#compare-table .vt-row"),
        "stats (catalogue)": ("/stats", "#stat-names li"),
        "stats plain": (f"/stats?name={quote(PLAIN_STAT)}", "#stat-table .vt-row"),
        "stats [*]": (f"/stats?name={quote(UNIT_STAT)}", "#stat-view .heat, #stat-table .vt-row"),
    }
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{url}/#/runs")
            page.fill("#token", TOKEN)
            page.click("form button[type=submit]")
            page.wait_for_selector("#token", state="detached")
            for name, (path, selector) in drawn.items():
                page.goto("about:blank")
                started, status, note = time.perf_counter(), "drawn", ""
                with rss_peak(server) as sampler:
                    try:
                        page.goto(page_of + path)
                        shown = page.wait_for_selector(f"{selector}, .state-error", timeout=timeout * 1000)
                        if shown is not None and shown.evaluate("e => e.matches('.state-error')"):
                            status, note = "error shown", shown.inner_text()
                    except Exception as e:  # playwright's timeouts and a crashed page alike are this tab's outcome
                        status, note = type(e).__name__, str(e)
                outcome = Outcome(f"tab: {name}", status, time.perf_counter() - started, None, 0, peak_mib(sampler), " ".join(note.split())[:160])
                log(f"  {outcome}")
                out.append(outcome)
        finally:
            browser.close()
    return out


async def stream_bytes(nats_url: str) -> tuple[int, int]:
    """The event stream's bytes and messages, from JetStream's stream info."""
    nc = await connect(parse(nats_url))
    try:
        info = await nc.jetstream().stream_info(subjects.STREAM)
        return info.state.bytes, info.state.messages
    finally:
        await nc.close()


def read_model(data: Path) -> tuple[int, list[tuple[str, int, int, int]]]:
    """The read model's bytes (DuckDB's files and kernel_stats' Parquet parts), and per table:
    rows (estimated_size), columns and bytes in storage (its distinct blocks times the block
    size), the parts as one. Opened once serve has closed it."""
    files = sum(f.stat().st_size for f in data.glob("readmodel.duckdb*") if f.is_file())
    parts = sum(f.stat().st_size for f in (data / "readmodel.duckdb.parts").glob("*"))
    with duckdb.connect(str(data / "readmodel.duckdb"), read_only=True) as db:
        block = db.execute("SELECT block_size FROM pragma_database_size()").fetchall()[0][0]
        tables = db.execute("SELECT table_name, estimated_size, column_count FROM duckdb_tables() ORDER BY table_name").fetchall()
        sized = []
        for name, rows, columns in tables:
            blocks = db.execute(f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{name}') WHERE persistent").fetchall()[0][0]
            sized.append((name, rows, columns, blocks * block))
        ((part_rows,),) = db.execute("SELECT coalesce(sum(row_count), 0) FROM stats_parts").fetchall()
    sized.append(("kernel_stats' parts (Parquet)", int(part_rows), 6, parts))
    return files + parts, sorted(sized, key=lambda t: -t[3])


def poll(url: str, run_id: str) -> tuple[dict[str, Any], bool]:
    """The run, and whether it is final with the read model holding the stream's last event."""
    run = cast(dict[str, Any], request(url, f"/api/runs/{run_id}"))
    health: Any = request(url, "/api/health")
    return run, run["state"] != "active" and health["projected_seq"] >= health["stream_seq"]


def finished(url: str, run_id: str, timeout: float) -> tuple[dict[str, Any], int]:
    """The run once it is final and projected, and how many polls that took."""
    deadline, polls = time.monotonic() + timeout, 1
    while not (done := poll(url, run_id))[1]:
        assert time.monotonic() < deadline, f"the run did not finish in {timeout:.0f} s"
        # Each poll is a run detail query in serve, counted in its ingest CPU (then taken out: `polls_cpu`).
        time.sleep(10)
        polls += 1
    return done[0], polls


def polls_cpu(url: str, run_id: str, server: int, polls: int) -> float:
    """serve's CPU seconds for `polls` polls of the finished run, from 3 of them."""
    before = cpu_seconds(server)
    for _ in range(3):
        poll(url, run_id)
    return (cpu_seconds(server) - before) / 3 * polls


def case(name: str, sims: int, kernels: int, budget: int | None, timeout: float, tab_timeout: float, browser: bool, skipped: list[str]) -> str:
    tmp = Path(tempfile.mkdtemp(prefix="cascade-llm-scale-"))
    env = {**os.environ, "CASCADE_TOKEN": TOKEN}
    python = runner_bench.PYTHON
    try:
        logs, kernels = sim_log(tmp, kernels)
        log(f"{name}: {sims} x {kernels} kernels, log {(logs / runner_bench.LOG_NAME).stat().st_size / 1e9:.2f} GB")
        tree = accelsim_tree(tmp / "accel-sim")
        data = tmp / "data"
        serve_argv = [python, "-m", "cascade_cli", "serve", "--port", "0", "--data-dir", str(data), "--accelsim-dir", str(tree), "--no-runner", "--no-samples"]
        serve_argv += [] if budget is None else ["--db-memory-bytes", str(budget)]
        server = subprocess.Popen(serve_argv, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "serve.log", "w"))
        try:
            service = served(data)
            url, nats_url = service.api_url, event_log.live_nats_url(data, service)
            upload(url, runner_bench.TRACE)
            worker = subprocess.Popen(
                [python, "-m", "cascade_cli", "worker", "--accelsim-dir", str(tree), "--slots", str(sims), "--work-dir", str(tmp / "worker")],
                env={**env, "CASCADE_NATS_URL": nats_url, "CASCADE_FAKE_ACCELSIM_LOGS": str(logs)},
                stdout=subprocess.DEVNULL, stderr=open(tmp / "worker.log", "w"),
            )
            try:
                pids = {**processes(server.pid), "runner": worker.pid}
                before = {p: cpu_seconds(pid) for p, pid in pids.items()}
                load, started = os.getloadavg(), time.perf_counter()
                with rss_peak(server.pid) as ingest_rss:
                    created: Any = request(url, "/api/runs", {"trace_id": "combo", "entries": [{"gpu_config": CONFIG, "count": sims, "fresh": True}]})
                    run, polls = finished(url, created["id"], timeout=4 * 3600)
                wall = time.perf_counter() - started
                cpu = {p: cpu_seconds(pid) - before[p] for p, pid in pids.items()}
            finally:
                worker.terminate()
                worker.wait()
            total = sum(s["kernels_done"] for s in run["sims"])
            log(f"  ingest: {run['state']}, {total} kernels in {wall:.0f} s; CPU s {cpu}")
            cpu["serve less the bench's polls"] = cpu["serve"] - polls_cpu(url, run["id"], server.pid, polls)
            stream, messages = asyncio.run(stream_bytes(nats_url))
            with httpx.Client(base_url=url, headers=AUTH) as http:
                reads = [fetch(http, server.pid, what, method, path, timeout) for what, method, path in routes(run, skipped)]
            reads += tabs(url, run, total, server.pid, tab_timeout) if browser else []
            hwm = int(next(line.split()[1] for line in Path(f"/proc/{server.pid}/status").read_text().splitlines() if line.startswith("VmHWM")))
        finally:
            server.terminate()
            server.wait(300)
        if any(not r.status.startswith("2") for r in reads):  # why, as serve logged it
            log("\n".join(line for line in (tmp / "serve.log").read_text().splitlines() if " INFO " not in line))
        files, tables = read_model(data)
        return report(name, sims, total, budget, load, wall, cpu, peak_mib(ingest_rss), stream, messages, files, tables, reads, hwm / 1024)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sized(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} B"


def report(name: str, sims: int, kernels: int, budget: int | None, load: tuple[float, float, float], wall: float, cpu: dict[str, float],
           ingest_rss: float | None, stream: int, messages: int, files: int, tables: list[tuple[str, int, int, int]], reads: list[Outcome], hwm: float) -> str:
    per_kernel = {p: f"{s * 1e3 / kernels:.2f}" for p, s in cpu.items()}
    lines = [
        f"### {name}: {sims} sim(s), {kernels:,} kernels in all, DuckDB budget {'the default' if budget is None else f'{budget / MiB:.0f} MiB'}",
        "",
        f"Load average at the start: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) on {os.cpu_count()} cores.",
        "",
        "| ingest | value |",
        "|---|---|",
        f"| wall, created -> final and projected | {wall:.0f} s ({kernels / wall:.0f} kernels/s) |",
        *(f"| CPU per kernel, {p} | {ms} ms ({cpu[p]:.0f} s) |" for p, ms in per_kernel.items()),
        f"| serve's peak RSS during ingest | {ingest_rss or 0:.0f} MiB |",
        f"| event stream (JetStream info) | {stream / 1e9:.2f} GB, {messages:,} messages: {stream / kernels / 1e3:.1f} KB per kernel |",
        f"| read model (DuckDB files and Parquet parts) | {files / 1e9:.2f} GB: {files / kernels / 1e3:.1f} KB per kernel |",
        f"| stream + read model | {(stream + files) / kernels / 1e3:.1f} KB per kernel |",
        "",
        "| table | rows (estimated_size) | columns | bytes in storage | per kernel |",
        "|---|--:|--:|--:|--:|",
        *(f"| {t} | {rows:,} | {cols} | {size / 1e6:.1f} MB | {size / kernels:,.0f} B |" for t, rows, cols, size in tables[:4]),
        f"| the other {len(tables[4:])} tables | | | {sum(t[3] for t in tables[4:]) / 1e6:.1f} MB | |",
        "",
        "| read | status | time | first byte | received | serve peak RSS | note |",
        "|---|---|--:|--:|--:|--:|---|",
        *(f"| {o.what} | {o.status} | {o.seconds:.1f} s | {'' if o.first_byte_s is None else f'{o.first_byte_s:.1f} s'} | "
          f"{'' if o.what.startswith('tab:') else sized(o.received)} | {'' if o.peak_rss_mib is None else f'{o.peak_rss_mib:.0f} MiB'} | "
          f"{o.note.replace('|', '/')} |" for o in reads),
        "",
        f"serve's peak RSS over its whole life (VmHWM): {hwm:.0f} MiB.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=CASES, help="one case (default: both, 4x10k first)")
    parser.add_argument("--sims", type=int, help="sims in the run (instead of the case's)")
    parser.add_argument("--kernels", type=int, help="kernels per sim, a multiple of 3 (instead of the case's)")
    parser.add_argument("--db-memory-bytes", type=int, help="serve's DuckDB budget (default: serve's own default)")
    parser.add_argument("--route-timeout", type=float, default=900, help="seconds a read may take before the bench cuts it")
    parser.add_argument("--tab-timeout", type=float, default=300, help="seconds a tab may take to draw before the bench gives up on it")
    parser.add_argument("--no-browser", dest="browser", action="store_false", help="skip the web app's tabs")
    parser.add_argument("--skip-read", dest="skipped", action="append", default=[], choices=[r.split("  ")[0] for r in READS.strip().splitlines()],
                        help="a read not to make (the run's results: 6.9 GB at 4 x 10k)")
    parser.add_argument("--python", default=sys.executable, help="the cascade processes' interpreter")
    args = parser.parse_args()
    runner_bench.PYTHON = args.python
    for name, (sims, kernels) in CASES.items():
        if args.only in (None, name):
            print(case(name, args.sims or sims, args.kernels or kernels, args.db_memory_bytes, args.route_timeout, args.tab_timeout, args.browser, args.skipped), flush=True)
