"""The `cascade` command.

    cascade serve      start the service (embedded nats-server unless --nats-url): `cascade_process.serve`
    cascade worker     run sims for a cluster, needing only its NATS: `cascade_process.worker`
    cascade slurm      workers as Slurm jobs, as many as the queue needs: `cascade_process.slurm`
    cascade replay     rebuild a read model from the log, or verify the live one
    cascade events     print an aggregate's history
    cascade timeline   a serving step timeline from files, offline (`timeline_cli`)
    cascade trace list, trace delete TRACE, trace upload DIR|FILE.tar[.gz|.xz], trace add --path DIR [--id ID]
                       traces through the API (`traces_cli`)
    cascade trace timing TRACE FILE   attach real kernel timing to a ready trace
    cascade run TRACE CONFIG[xN]... [--watch], run show|watch|cancel|retry RUN, run add RUN CONFIG[xN]...,
                       runs, results RUN
                       runs through the API (`runs_cli`)
    cascade sim log SIM [--follow]   a sim's simulator log (`sim_log_cli`)
    cascade configs    the GPU configs a run may name, and where they run (`configs_cli`)
    cascade sql SELECT, export RUN   the read model's rows through the API (`data_cli`)
    cascade config derive NAME --base B --option=-OPT=V..., config show NAME, config diff A B
                       GPU config variants through the API (`configs_cli`)

Exit status: 0 done; 1 what was asked ended badly (a sim or run that did not succeed, a
failed upload, a verify that found differences, no events); 2 an unusable setting or a
request the server refused, in one line `cascade: error: ...`; 130 Ctrl-C; a reader that
stops reading (`| head`) ends it quietly with status 141, as SIGPIPE would.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from cascade_app.config import NATS_FILES, ConfigError, Settings, absolute, check_accelsim_dir, resolve
from cascade_cli import campaigns_cli, configs_cli, data_cli, locate, runs_cli, sim_log_cli, traces_cli
from cascade_process import datadir, event_log, logs

if TYPE_CHECKING:
    from projections.replay import Verification

# Commands that write a data dir (or a worker's work dir, or a replayed read model): what they
# make is their user's alone, and so is what the embedded nats-server they start makes.
PRIVATE = {"serve", "worker", "slurm", "replay", "events"}


def _common(parser: argparse.ArgumentParser, *, api: bool = False) -> None:
    if api:
        locate.add_arguments(parser)
    else:
        parser.add_argument("--data-dir", help="where the read model and the embedded NATS store live (CASCADE_DATA_DIR)")
    _nats(parser, "use this NATS server or cluster instead of the embedded one")


def _nats(parser: argparse.ArgumentParser, what: str) -> None:
    """Where NATS is and how to log in there (`cascade_nats.access`)."""
    parser.add_argument(
        "--nats-url", help=f"{what}: URLs comma-separated, nats:// or tls://, a user:password@ or token@ in them (CASCADE_NATS_URL)"
    )
    parser.add_argument("--nats-ca", help="the CA file that NATS servers' TLS certificates are checked against (CASCADE_NATS_CA)")
    parser.add_argument("--nats-cert", help="a client certificate to present to NATS (CASCADE_NATS_CERT)")
    parser.add_argument("--nats-key", help="the client certificate's key (CASCADE_NATS_KEY)")
    parser.add_argument("--nats-nkey", help="log in to NATS with the nkey seed in this file (CASCADE_NATS_NKEY)")
    parser.add_argument("--nats-creds", help="log in to NATS with this .creds file: a user JWT and its seed (CASCADE_NATS_CREDS)")


def _json(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as the API answers it")


def _on_a_run(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, shows: str) -> argparse.ArgumentParser:
    """A command of the API on one run, which prints what it answers (`shows`) with --json."""
    command = sub.add_parser(name, help=help)
    command.add_argument("run_id", metavar="RUN", help="a run's id")
    _json(command, shows)
    locate.add_arguments(command)
    return command


def _watch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--watch", action="store_true", help="show each sim's progress until the run ends")


def _fast_sim_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--split", type=runs_cli.split_arg, metavar="K|auto",
        help="cut each sim into chunks of K kernel launches run concurrently on any runners (auto: chosen from the "
        "trace's launches and the free slots)",
    )
    parser.add_argument("--warmup", type=int, metavar="W", help="with --split K: launches simulated before each chunk and discarded (default 2)")
    parser.add_argument(
        "--reuse", action="store_true",
        help="simulate each kernel only the first two times the trace launches it; later launches take the second's result",
    )
    parser.add_argument(
        "--reference", action="store_true",
        help="with --split or --reuse: a reference for each sim, the trace run whole and in sequence on the same config, "
        "to measure the fast sim against (cascade sim reference SIM)",
    )
    parser.add_argument(
        "--fresh", action="store_true",
        help="simulate even when a sim of the same trace, config files, simulator build and settings already succeeded "
        "(without it, such a sim takes that result and says cached_from)",
    )


# `cascade run show|cancel|retry|add|delete RUN` are commands of their own; any other word after
# `run` is a trace. `cascade run -- show CONFIG` runs a trace named `show`.
RUN_ACTIONS = ("show", "watch", "cancel", "retry", "add", "delete")
RUN_EPILOG = """\
CONFIG is a GPU config's name (cascade runs it once) or a name with a trailing xN for N
replicas: SM61_TITANXx3 is SM61_TITANX three times. A name that is itself a config is that
config, once. Configs given twice stay two entries.

  cascade run show RUN      a run's summary (--json: its RunDetail)
  cascade run watch RUN     follow a run's sims until it ends, as --watch does (again after Ctrl-C)
  cascade run cancel RUN    cancel a run's unfinished sims
  cascade run retry RUN     a new attempt of every failed or cancelled sim [--watch]
  cascade run add RUN CONFIG[xN]...   more sims for a run: replicas or configs [--watch]
  cascade run delete RUN    delete a finished or cancelled run from every list [--yes]

`show`, `watch`, `cancel`, `retry`, `add` and `delete` right after `run` are those commands; to run a trace
of one of those names, put -- before it: cascade run -- show SM61_TITANX.

--split K cuts each sim's kernel launches into chunks of K, simulated at once on any runners
with the config and stitched into one sim; each chunk first simulates the W launches before
it (--warmup, default 2) and discards them, which keeps the caches as warm as in sequence.

--reuse simulates each kernel (a kernel file's content, its -kernel id line aside) only the
first two times the trace launches it, cold then warm; every later launch takes the warm one's result, marked
reused_from in the results; with --split, each chunk so within its own launches.

--reference adds, for each split or reusing sim, its reference: the same trace and config
run whole and in sequence; cascade sim reference SIM compares the two (per kernel and in
total: cycle and instruction errors, wall times, speed-up).

--fresh simulates each sim even when one of the same trace contents, config files, simulator
build and settings already succeeded, in any run; without it such a sim takes that result at
once (its cached_from names the source sim), and replicas queued together simulate once.

--watch shows a progress line per sim until the run ends and exits 0 only if every sim
succeeded (1 otherwise); Ctrl-C stops watching (exit 130) and leaves the run running.
With --json, stdout holds only the RunDetail: as created, or with --watch as it ended
(the progress goes to stderr then)."""


def _route(argv: list[str]) -> list[str]:
    if len(argv) >= 2 and argv[0] == "run" and argv[1] in RUN_ACTIONS:
        return [f"run {argv[1]}", *argv[2:]]
    if argv[:1] == ["config"]:
        return configs_cli.joined_options(argv)
    return argv


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cascade", description="Run Accel-Sim at scale.")
    parser.add_argument("--version", action="version", version=f"cascade {importlib.metadata.version('cascade')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="start the service")
    _common(serve)
    serve.add_argument("--host", help="address to listen on (CASCADE_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (CASCADE_PORT, default 8000)")
    serve.add_argument(
        "--allowed-hosts", metavar="NAMES",
        help="names clients reach this server by besides its address, comma-separated: a proxy's, a DNS name (CASCADE_ALLOWED_HOSTS)",
    )
    serve.add_argument("--accelsim-dir", help="an Accel-Sim install (CASCADE_ACCELSIM_DIR)")
    serve.add_argument(
        "--shared-trace-root", dest="shared_trace_roots", metavar="DIR", action="append",
        help="a folder traces may be added from where they lie (cascade trace add --path); repeatable "
        f"(CASCADE_SHARED_TRACE_ROOTS, folders separated by {os.pathsep!r}); none by default",
    )
    serve.add_argument("--no-runner", dest="runner", action="store_const", const=False, help="do not run sims here")
    serve.add_argument("--runner-slots", type=int, help="sims this process runs at once (CASCADE_RUNNER_SLOTS)")
    serve.add_argument(
        "--no-samples", dest="samples", action="store_const", const=False,
        help="never load the sample traces and runs (CASCADE_SAMPLES=false); those loaded before stay until their traces are deleted",
    )
    serve.add_argument(
        "--replicas", type=int,
        help="copies JetStream keeps of the event stream, the runners' bucket and the object store (CASCADE_REPLICAS; "
        "default: the cluster's servers, up to 3; never fewer than a stream has)",
    )
    serve.add_argument(
        "--nats-sync-interval",
        help="how often the embedded nats-server syncs its store to disk: always (the default: nothing acked is lost "
        "on power loss) or a duration such as 2m (CASCADE_NATS_SYNC_INTERVAL)",
    )
    serve.add_argument(
        "--db-memory-bytes", type=int,
        help="what the read model's DuckDB may hold in memory, at least 64 MiB (CASCADE_DB_MEMORY_BYTES; default: 64 MiB)",
    )

    replay = sub.add_parser("replay", help="rebuild a read model from the event log, or verify the live one")
    _common(replay, api=True)
    what = replay.add_mutually_exclusive_group(required=True)
    what.add_argument("--db", help="build a fresh DuckDB read model in this file")
    what.add_argument("--verify", action="store_true", help="check that a fresh replay equals the live read model")
    replay.add_argument("--force", action="store_true", help="overwrite --db if it exists")

    worker = sub.add_parser("worker", help="run sims on this machine for a Cascade cluster (needs only NATS)")
    _nats(worker, "the cluster's NATS")
    worker.add_argument("--accelsim-dir", help="the local Accel-Sim install (CASCADE_ACCELSIM_DIR)")
    worker.add_argument("--slots", dest="runner_slots", type=int, help="sims at once (default: CPU cores)")
    worker.add_argument("--work-dir", default=".cascade-worker", help="working directories and the trace cache")
    worker.add_argument("--data-dir", help="without --nats-url: the data dir of the cascade serve on this machine whose NATS to use (CASCADE_DATA_DIR)")
    worker.add_argument("--idle-exit", type=float, metavar="SECONDS", help="end once nothing has run for this long")

    slurm = sub.add_parser("slurm", help="run workers as Slurm jobs, as many as the queue needs (needs only NATS)")
    _nats(slurm, "the cluster's NATS")
    slurm.add_argument("--accelsim-dir", help="the Accel-Sim install, at the same path on every node (CASCADE_ACCELSIM_DIR)")
    slurm.add_argument("--workers", type=int, required=True, metavar="N", help="jobs at most")
    slurm.add_argument("--partition", help="the partition to submit to (default: the cluster's)")
    slurm.add_argument("--slots", type=int, default=1, help="sims per job, and its --cpus-per-task (default 1)")
    slurm.add_argument("--time", help="each job's time limit, as sbatch --time takes it (a sim it ends fails)")
    slurm.add_argument("--idle-exit", type=float, default=60.0, metavar="SECONDS", help="a job ends once it has run nothing this long (default 60)")
    slurm.add_argument("--job-name", default="cascade-worker", help="the jobs' name: a launcher takes over the queued jobs of its name")
    slurm.add_argument("--work-dir", default=".cascade-slurm", help="jobs' working directories and logs, on a filesystem the nodes share")
    slurm.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG", help="one more sbatch argument, such as --mem=8G (repeatable)")

    timeline = sub.add_parser("timeline", help="a serving step timeline from a measured timeline and kernel times")
    timeline.add_argument("--timeline", required=True, help="the measured step_timeline.json")
    timeline.add_argument("--kernels", required=True, help="a sim's kernel-stats.csv (uid,name,gpu_sim_cycle,...)")
    timeline.add_argument("--clock-mhz", type=float, required=True, help="the simulated GPU's core clock")
    timeline.add_argument("-o", "--output", help="write the SimStepTimeline JSON to this file")
    timeline.add_argument("--json", action="store_true", help="print the JSON instead of a summary")

    events = sub.add_parser("events", help="print an aggregate's history, oldest first, or what was parked")
    _common(events)
    events.add_argument("aggregate_id", nargs="?", help="a trace, run or sim id")
    events.add_argument("--json", action="store_true", help="JSON lines instead of text")
    events.add_argument("--parked", action="store_true", help="list the stored messages no consumer could use, from the server")
    events.add_argument("--url", help="the running server, for --parked (CASCADE_URL)")

    trace = sub.add_parser("trace", help="work with traces on a running server")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    trace_upload = trace_sub.add_parser("upload", help="upload an Accel-Sim trace directory or an archive of one, with a progress bar")
    trace_upload.add_argument(
        "source", metavar="DIR|FILE", help="the trace directory (kernelslist.g and its kernel files), or a .tar, .tar.gz or .tar.xz of one"
    )
    trace_upload.add_argument("--id", help="the trace's id (default: a new trace-<hex> id)")
    _json(trace_upload, "the Trace in its final state")
    locate.add_arguments(trace_upload)
    trace_add = trace_sub.add_parser(
        "add", help="add a trace where it lies, in a folder the server and its runners share (serve --shared-trace-root): nothing is copied"
    )
    trace_add.add_argument("--path", required=True, metavar="DIR", help="the trace's folder, as the server and the runners see it")
    trace_add.add_argument("--id", help="the trace's id (default: a new trace-<hex> id)")
    trace_add.add_argument(
        "--copy", action="store_true", help="also store its files in the object store, so that runners that cannot see the path fetch them"
    )
    _json(trace_add, "the Trace")
    locate.add_arguments(trace_add)
    trace_list = trace_sub.add_parser("list", help="every trace, newest first: state, kernels, arch, size")
    _json(trace_list, "the list")
    locate.add_arguments(trace_list)
    trace_delete = trace_sub.add_parser("delete", help="delete a trace: one whose upload failed, or one no run needs")
    trace_delete.add_argument("trace_id", metavar="TRACE", help="a trace's id")
    _json(trace_delete, "the Trace as it was just before")
    locate.add_arguments(trace_delete)
    trace_timing = trace_sub.add_parser(
        "timing", help="attach real kernel timing to a ready trace: Cascade's CSV, ncu --csv, or nsys stats --report cuda_gpu_trace"
    )
    trace_timing.add_argument("trace_id", metavar="TRACE", help="a ready trace's id")
    trace_timing.add_argument("file", metavar="FILE", help="the timing file (passes concatenated are hardware repetitions)")
    trace_timing.add_argument("--replace", action="store_true", help="replace the real timing the trace has")
    trace_timing.add_argument("--json", action="store_true", help="print the API's answer as it came")
    locate.add_arguments(trace_timing)

    run = sub.add_parser(
        "run", help="create a run of a trace on GPU configs, and watch it", epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("trace", metavar="TRACE", help="a ready trace's id")
    run.add_argument("configs", nargs="+", metavar="CONFIG[xN]", help="GPU configs, each with an optional replica count")
    _watch(run)
    _fast_sim_arguments(run)
    _json(run, "the RunDetail")
    locate.add_arguments(run)

    _on_a_run(sub, "run show", "a run's summary: trace, entries, each sim, what failed sims said last", "the RunDetail")
    _on_a_run(sub, "run watch", "follow a run's sims until it ends (exit 0 if all succeeded), again after Ctrl-C", "the RunDetail as it ended")
    _on_a_run(sub, "run cancel", "cancel a run's unfinished sims", "the RunDetail after cancelling")
    delete = _on_a_run(sub, "run delete", "delete a finished or cancelled run from every list and query (its events stay in the log)", "the RunDetail as it was when deleted")
    delete.add_argument("--yes", action="store_true", help="delete without asking (needed when there is no terminal to ask on)")
    retry = _on_a_run(sub, "run retry", "start a new attempt of every failed or cancelled sim of a run", "the RunDetail after retrying")
    _watch(retry)
    add = _on_a_run(sub, "run add", "add sims to a run: more replicas, or other configs", "the RunDetail with them")
    add.add_argument("configs", nargs="+", metavar="CONFIG[xN]", help="GPU configs, each with an optional replica count")
    _fast_sim_arguments(add)
    _watch(add)
    compare = _on_a_run(sub, "compare", "a run's kernels: simulated time per config (median of replicas) and real time", "the Comparison")
    compare.add_argument(
        "--counters", action="store_true",
        help="instead, each hardware counter of the trace's real timing (ncu --csv) against its simulator stats, scored per config",
    )

    sim = sub.add_parser("sim", help="work with one sim of a run")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    sim_reference = sim_sub.add_parser(
        "reference", help="a split or reusing sim against its reference (asked for first if it has none): errors, wall times, speed-up"
    )
    sim_reference.add_argument("sim_id", metavar="SIM", help="a split or reusing sim's id")
    _watch(sim_reference)
    _json(sim_reference, "the ReferenceComparison")
    locate.add_arguments(sim_reference)
    sim_log = sim_sub.add_parser("log", help="a sim's simulator log, on stdout")
    sim_log.add_argument("sim_id", metavar="SIM", help="a sim's id")
    sim_log.add_argument(
        "-f", "--follow", action="store_true", help="print lines as the simulator sends them until the sim ends (exit 0 if it succeeded)"
    )
    locate.add_arguments(sim_log)

    configs = sub.add_parser("configs", help="the GPU configs a run may name: arch, clock, digest, and where they run")
    _json(configs, "the list")
    locate.add_arguments(configs)

    runs = sub.add_parser("runs", help="list runs, newest first")
    runs.add_argument("--tag", help="only runs that have this tag")
    runs.add_argument("--name", help="only runs of this name")
    _json(runs, "the list")
    locate.add_arguments(runs)

    results = sub.add_parser("results", help="download a run's results, and every sim's results, log and files")
    results.add_argument("run_id", metavar="RUN", help="a run's id")
    results.add_argument("-o", "--output", metavar="DIR", help="where to write them (default: ./RUN)")
    locate.add_arguments(results)

    sql = sub.add_parser("sql", help="run one SELECT on the live read model (README: Querying the read model)")
    sql.add_argument("query", metavar="SQL", help='one SELECT, such as "SELECT * FROM stats LIMIT 10"')
    sql.add_argument("--format", choices=data_cli.FORMATS, default="table", help="a table to read (default), csv, json or parquet")
    sql.add_argument("-o", "--output", metavar="FILE", help="write the answer to FILE instead of stdout")
    locate.add_arguments(sql)

    campaigns_cli.add_arguments(sub)

    export = sub.add_parser("export", help="a run's rows as Parquet files: runs, sims, kernels, kernel_stats, timing")
    export.add_argument("run_id", metavar="RUN", help="a run's id")
    export.add_argument("-o", "--output", metavar="DIR", help="where to write them (default: ./RUN)")
    locate.add_arguments(export)

    for command in configs_cli.add_arguments(sub):
        locate.add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(_route(list(sys.argv[1:] if argv is None else argv)))
    logs.configure()
    if args.command in PRIVATE:
        os.umask(0o077)
    try:
        status = COMMANDS[args.command](args)
        sys.stdout.flush()  # here, so that a closed pipe is noticed here
        return status
    except ConfigError as err:
        print(f"cascade: error: {logs.redact(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as a filter killed by SIGPIPE does.
        # Output goes nowhere from here, so the interpreter's last flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE


def _settings(args: argparse.Namespace) -> Settings:
    names = ("host", "port", "allowed_hosts", "data_dir", "accelsim_dir", "runner", "runner_slots", "samples", "replicas", "nats_url", "nats_sync_interval", "db_memory_bytes", *NATS_FILES)
    flags = {k: getattr(args, k, None) for k in names}
    if roots := getattr(args, "shared_trace_roots", None):
        flags["shared_trace_roots"] = os.pathsep.join(roots)
    return resolve(flags)


# --- serve --------------------------------------------------------------------------------


def serve(args: argparse.Namespace) -> int:
    from cascade_process.serve import serve

    return serve(_settings(args))


# --- worker -------------------------------------------------------------------------------


def _runners(args: argparse.Namespace, command: str, *, beside_serve: bool = False) -> tuple[Settings, Path]:
    """The settings of a command that runs sims away from `serve` (a worker, Slurm's), which
    needs the cluster's NATS and an Accel-Sim install; and that install. With `beside_serve`
    and no NATS named, the NATS of the `serve` holding the data dir on this machine."""
    settings = _settings(args)
    if settings.nats_url is None and beside_serve:
        url = event_log.serving_nats_url(settings.data_dir)
        settings = settings if url is None else msgspec.structs.replace(settings, nats_url=url)
    if settings.nats_url is None:
        beside = f", or a cascade serve holding data dir {settings.data_dir} on this machine" if beside_serve else ""
        raise ConfigError(f"cascade {command} needs --nats-url (or CASCADE_NATS_URL): the cluster's NATS{beside}")
    if settings.accelsim_dir is None:
        raise ConfigError(f"cascade {command} needs --accelsim-dir (or CASCADE_ACCELSIM_DIR): a local Accel-Sim install")
    check_accelsim_dir(settings.accelsim_dir)
    return settings, settings.accelsim_dir


def worker(args: argparse.Namespace) -> int:
    from cascade_process.worker import work

    settings, _ = _runners(args, "worker", beside_serve=True)
    # The simulator runs in a directory of its own: the paths it gets must be absolute.
    work_dir = absolute(Path(args.work_dir))
    with datadir.lock(work_dir, "work dir"):
        asyncio.run(event_log.check_nats(settings.nats_access()))
        asyncio.run(work(settings, work_dir, args.idle_exit))
    return 0


def slurm(args: argparse.Namespace) -> int:
    from cascade_process.slurm import Options, launch

    settings, accelsim_dir = _runners(args, "slurm")
    if args.workers < 1 or args.slots < 1:
        raise ConfigError("cascade slurm: --workers and --slots must be at least 1")
    options = Options(
        accelsim_dir=accelsim_dir, work_dir=absolute(Path(args.work_dir)), workers=args.workers, slots=args.slots,
        partition=args.partition, time=args.time, idle_exit_s=args.idle_exit, job_name=args.job_name, sbatch_args=args.sbatch_arg,
    )
    asyncio.run(event_log.check_nats(settings.nats_access()))
    asyncio.run(launch(settings, options))
    return 0


# --- replay -------------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.verify:
        return _verify(args, settings)
    db = Path(args.db)
    if db.exists() and not args.force:
        raise ConfigError(f"--db {db}: exists; remove it or pass --force")
    if not db.parent.is_dir():
        raise ConfigError(f"--db {db}: no directory {db.parent}")
    return asyncio.run(_replay_to(settings, db))


async def _replay_to(settings: Settings, db: Path) -> int:
    import time

    from projections.replay import replay_file

    with event_log.for_reading(settings) as access:
        async with event_log.open_store(access) as store:
            started = time.perf_counter()
            seq = await replay_file(store, db)
            elapsed = time.perf_counter() - started
    print(f"replayed {seq} events into {db} in {elapsed:.2f}s ({seq / max(elapsed, 1e-9):,.0f} events/s)")
    return 0


def _verify(args: argparse.Namespace, settings: Settings) -> int:
    if locate.served_url(args) is not None:
        from projections.replay import Verification

        report = msgspec.json.decode(locate.api_client(args).post("/api/replay/verify"), type=Verification)
    else:
        report = asyncio.run(_verify_offline(settings))
    for check in report.tables:
        mark = "ok  " if check.equal else "DIFF"
        print(f"{mark} {check.table:<18} live {check.rows:>9}  replay {check.replayed_rows:>9}", end="")
        print("" if check.equal else f"  only live {check.only_in_live}, only replay {check.only_in_replay}")
    if report.lost:
        seqs = ", ".join(map(str, report.lost))
        print(f"LOST {len(report.lost)} of the log's events: nats-server could not read back sequence {seqs} from its store (cascade events --parked says what was stored around each)")
    print(f"read model at sequence {report.seq}: {'equal to a fresh replay' if report.equal else 'DIFFERS from a fresh replay'}")
    return 0 if report.equal and not report.lost else 1


async def _verify_offline(settings: Settings) -> Verification:
    import duckdb

    from projections.database import open_database
    from projections.projector import DEFAULT_MEMORY, Memory
    from projections.replay import verify
    from projections.version import Outdated

    if not settings.db_path.exists():
        raise ConfigError(f"no read model at {settings.db_path}")
    # Within serve's budget, as serve's own verify is: DuckDB's default is most of the machine's memory.
    memory = DEFAULT_MEMORY if settings.db_memory_bytes is None else Memory(settings.db_memory_bytes)
    with datadir.lock(settings.data_dir):
        try:
            con = open_database(settings.db_path, settings=memory.settings())
        except duckdb.IOException as err:
            raise ConfigError(f"read model {settings.db_path}: in use by another process ({err})") from err
        try:
            with event_log.configured_or_embedded(settings) as nats:
                async with event_log.open_store(nats.access) as store:
                    return await verify(store, con.cursor())
        except Outdated as why:
            raise ConfigError(f"read model {settings.db_path} {why.reason}; `cascade serve` rebuilds it from the log") from why
        finally:
            con.close()


# --- events -------------------------------------------------------------------------------


def events(args: argparse.Namespace) -> int:
    if args.parked == (args.aggregate_id is not None):
        raise ConfigError("cascade events takes a trace, run or sim id, or --parked")
    if args.parked:
        return _parked(args)
    return asyncio.run(_events(_settings(args), args.aggregate_id, as_json=args.json))


async def _events(settings: Settings, aggregate_id: str, *, as_json: bool) -> int:
    from cascade_nats import subjects
    from cascade_cli.history import describe, describe_unread
    from cascade_nats.store import Stored

    found = 0
    with event_log.for_reading(settings) as access:
        async with event_log.open_store(access) as store:
            for subject in (subjects.trace(aggregate_id), subjects.run_history(aggregate_id), subjects.sim_history(aggregate_id)):
                async for item in store.history(subject):
                    found += 1
                    if as_json:
                        print(msgspec.json.encode(item).decode())
                    else:
                        print(describe(item.seq, item.event) if isinstance(item, Stored) else describe_unread(item))
    if not found:
        print(f"cascade: no events for {aggregate_id!r}", file=sys.stderr)
        return 1
    return 0


def _parked(args: argparse.Namespace) -> int:
    from cascade_api.models import ParkedEvent
    from cascade_cli.history import describe_parked
    from cascade_cli.locate import api_client

    parked = msgspec.json.decode(api_client(args).get("/api/parked"), type=list[ParkedEvent])
    for event in parked:
        print(msgspec.json.encode(event).decode() if args.json else describe_parked(event))
    if not parked and not args.json:
        print("nothing parked")
    return 0


# --- timeline -----------------------------------------------------------------------------


def timeline(args: argparse.Namespace) -> int:
    from cascade_cli.timeline_cli import timeline

    return timeline(args)


# --- trace --------------------------------------------------------------------------------


def trace(args: argparse.Namespace) -> int:
    if args.trace_command == "timing":
        from cascade_cli.timing_cli import attach

        return attach(args)
    commands = {"upload": traces_cli.upload, "add": traces_cli.add, "list": traces_cli.list_traces, "delete": traces_cli.delete}
    return commands[args.trace_command](args)


def sim(args: argparse.Namespace) -> int:
    return sim_log_cli.log(args) if args.sim_command == "log" else runs_cli.reference(args)


COMMANDS = {
    "serve": serve,
    "worker": worker,
    "slurm": slurm,
    "replay": replay,
    "events": events,
    "timeline": timeline,
    "trace": trace,
    "run": runs_cli.create,
    "run show": runs_cli.show,
    "run watch": runs_cli.watch,
    "run cancel": runs_cli.cancel,
    "run delete": runs_cli.delete,
    "run retry": runs_cli.retry,
    "run add": runs_cli.add,
    "runs": runs_cli.list_runs,
    "sim": sim,
    "configs": configs_cli.list_configs,
    "compare": runs_cli.compare,
    "results": runs_cli.results,
    "sweep": campaigns_cli.sweep,
    "campaign": campaigns_cli.campaign,
    "sql": data_cli.sql,
    "export": data_cli.export,
    "config": configs_cli.config,
}
