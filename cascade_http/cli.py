"""The `cascade` command.

    cascade serve      start the service (embedded nats-server unless --nats-url)
    cascade replay     rebuild a read model from the log, or verify the live one
    cascade events     print an aggregate's history
    cascade trace upload DIR   stream a trace directory to a running server

An unusable setting ends the command with one line `cascade: error: ...` and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import msgspec

from cascade_http.config import (
    ConfigError,
    Settings,
    check_accelsim_dir,
    check_data_dir,
    check_port,
    load_or_create_token,
    resolve,
)

log = logging.getLogger("cascade")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="where the read model and the embedded NATS store live (CASCADE_DATA_DIR)")
    parser.add_argument("--nats-url", help="use this NATS server or cluster instead of the embedded one (CASCADE_NATS_URL)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cascade", description="Run Accel-Sim at scale.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="start the service")
    _common(serve)
    serve.add_argument("--host", help="address to listen on (CASCADE_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (CASCADE_PORT, default 8000)")
    serve.add_argument("--accelsim-dir", help="an Accel-Sim install (CASCADE_ACCELSIM_DIR)")
    serve.add_argument("--no-runner", dest="runner", action="store_const", const=False, help="do not run sims here")
    serve.add_argument("--runner-slots", type=int, help="sims this process runs at once (CASCADE_RUNNER_SLOTS)")

    replay = sub.add_parser("replay", help="rebuild a read model from the event log, or verify the live one")
    _common(replay)
    what = replay.add_mutually_exclusive_group(required=True)
    what.add_argument("--db", help="build a fresh DuckDB read model in this file")
    what.add_argument("--verify", action="store_true", help="check that a fresh replay equals the live read model")
    replay.add_argument("--force", action="store_true", help="overwrite --db if it exists")
    replay.add_argument("--url", help="the running server, for --verify (CASCADE_URL)")

    worker = sub.add_parser("worker", help="run sims on this machine for a Cascade cluster (needs only NATS)")
    worker.add_argument("--nats-url", help="the cluster's NATS (CASCADE_NATS_URL)")
    worker.add_argument("--accelsim-dir", help="the local Accel-Sim install (CASCADE_ACCELSIM_DIR)")
    worker.add_argument("--slots", dest="runner_slots", type=int, help="sims at once (default: CPU cores)")
    worker.add_argument("--work-dir", default=".cascade-worker", help="working directories and the trace cache")

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
    trace_upload = trace_sub.add_parser("upload", help="upload an Accel-Sim trace directory, with a progress bar")
    trace_upload.add_argument("directory", help="the trace directory (kernelslist.g and its kernel files)")
    trace_upload.add_argument("--id", help="the trace's id (default: a new trace-<hex> id)")
    trace_upload.add_argument("--url", help="the server (CASCADE_URL, default http://127.0.0.1:8000)")
    trace_upload.add_argument("--data-dir", help="where the API token is, if CASCADE_TOKEN is not set (CASCADE_DATA_DIR)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except ConfigError as err:
        print(f"cascade: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _settings(args: argparse.Namespace) -> Settings:
    flags = {k: getattr(args, k, None) for k in ("host", "port", "data_dir", "nats_url", "accelsim_dir", "runner", "runner_slots")}
    return resolve(flags)


# --- serve --------------------------------------------------------------------------------


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from cascade_http.app import create_app

    settings = _settings(args)
    check_data_dir(settings.data_dir)
    check_port(settings.host, settings.port)
    check_accelsim_dir(settings.accelsim_dir)
    if settings.nats_url is not None:
        asyncio.run(_check_nats(settings.nats_url))
    if settings.token is None:
        settings.token, created = load_or_create_token(settings.data_dir)
        if created:
            print(f"cascade: API token (stored in {settings.data_dir / 'token'}): {settings.token}", flush=True)
    with _nats(settings) as url:
        settings.nats_url = url
        config = uvicorn.Config(
            create_app(settings), host=settings.host, port=settings.port, lifespan="on", log_level="info", timeout_graceful_shutdown=5
        )
        server = uvicorn.Server(config)
        # uvicorn shuts down on SIGINT/SIGTERM and then raises the signal again; let that end
        # this function normally, so the embedded nats-server is stopped after the app.
        signal.signal(signal.SIGTERM, _stop)
        with contextlib.suppress(KeyboardInterrupt, SystemExit):
            server.run()
        return 0 if server.started else 1


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


@contextlib.contextmanager
def _nats(settings: Settings):  # type: ignore[no-untyped-def]
    """The NATS URL to use: the configured one once it answers, else a fresh embedded server
    whose URL is left in the data dir while it runs (for `replay` and `events`)."""
    from cascade_nats import server

    if settings.nats_url is not None:
        yield settings.nats_url
        return
    try:
        embedded = server.start(settings.store_dir)
    except server.NatsServerError as err:
        raise ConfigError(f"embedded nats-server (store {settings.store_dir}): {err}") from err
    url_file = settings.data_dir / "nats.url"
    url_file.write_text(embedded.url)
    try:
        yield embedded.url
    finally:
        url_file.unlink(missing_ok=True)
        embedded.stop()


async def _check_nats(url: str) -> None:
    """Fail fast with one line if no NATS server greets us at `url`."""
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"nats://{url}")
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 4222), 3)
        greeting = await asyncio.wait_for(reader.readline(), 3)
        writer.close()
    except (OSError, TimeoutError) as err:
        raise ConfigError(f"NATS at {url}: unreachable ({getattr(err, 'strerror', None) or 'no answer'})") from err
    if not greeting.startswith(b"INFO "):
        raise ConfigError(f"NATS at {url}: not a NATS server")


async def _connect_once(url: str):  # type: ignore[no-untyped-def]
    import nats

    await _check_nats(url)
    return await nats.connect(url, name="cascade-cli", connect_timeout=3)


@contextlib.asynccontextmanager
async def _store(settings: Settings) -> AsyncIterator[object]:
    """An event store on the configured NATS, on the running server's embedded one, or on a
    temporary embedded server over the data dir's stored events."""
    from cascade_nats.store import EventStore

    url_file = settings.data_dir / "nats.url"
    if settings.nats_url is None and url_file.exists():
        settings.nats_url = url_file.read_text().strip()
    with _nats(settings) as url:
        nc = await _connect_once(url)
        store = EventStore(nc)
        try:
            await store.ensure_stream()
            yield store
        finally:
            await store.close()
            await nc.close()


# --- worker -------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if settings.nats_url is None:
        raise ConfigError("cascade worker needs --nats-url (or CASCADE_NATS_URL): the cluster's NATS")
    if settings.accelsim_dir is None:
        raise ConfigError("cascade worker needs --accelsim-dir (or CASCADE_ACCELSIM_DIR): a local Accel-Sim install")
    check_accelsim_dir(settings.accelsim_dir)
    check_data_dir(Path(args.work_dir))
    asyncio.run(_check_nats(settings.nats_url))
    asyncio.run(_work(settings, Path(args.work_dir)))
    return 0


async def _work(settings: Settings, work_dir: Path) -> None:
    # Ctrl-C or SIGTERM cancels the runner, which stops its sims, hands them back for another
    # runner and withdraws from the runner list before the connection closes.
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await _run_worker(settings, work_dir)


async def _run_worker(settings: Settings, work_dir: Path) -> None:
    from cascade_http.service import connect_nats
    from cascade_sim.install import AccelSimInstall
    from cascade_sim.runner import Runner

    assert settings.nats_url is not None and settings.accelsim_dir is not None
    nc = await connect_nats(settings.nats_url, name="cascade-worker")
    try:
        runner = Runner(
            nc,
            AccelSimInstall(settings.accelsim_dir),
            work_dir,
            slots=settings.runner_slots,
            sim_timeout_s=settings.sim_timeout_s,
            ack_wait_s=settings.runner_lease_s,
        )
        await runner.run()
    finally:
        await nc.close()


# --- replay -------------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.verify:
        return _verify(settings, args.url)
    db = Path(args.db)
    if db.exists() and not args.force:
        raise ConfigError(f"--db {db}: exists; remove it or pass --force")
    if not db.parent.is_dir():
        raise ConfigError(f"--db {db}: no directory {db.parent}")
    return asyncio.run(_replay_to(settings, db))


async def _replay_to(settings: Settings, db: Path) -> int:
    import time

    from projections.replay import replay_file

    async with _store(settings) as store:
        started = time.perf_counter()
        seq = await replay_file(store, db)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - started
    print(f"replayed {seq} events into {db} in {elapsed:.2f}s ({seq / max(elapsed, 1e-9):,.0f} events/s)")
    return 0


def _verify(settings: Settings, url: str | None) -> int:
    import os

    url = url or os.environ.get("CASCADE_URL")
    if url is None and (settings.data_dir / "nats.url").exists():
        url = f"http://{settings.host}:{settings.port}"
    if url is not None:
        from cascade_http.client import ApiClient

        raw = ApiClient(url, settings.token).post("/api/replay/verify")
        from projections.replay import Verification

        report = msgspec.json.decode(raw, type=Verification)
    else:
        report = asyncio.run(_verify_offline(settings))
    for check in report.tables:
        mark = "ok  " if check.equal else "DIFF"
        print(f"{mark} {check.table:<18} live {check.rows:>9}  replay {check.replayed_rows:>9}", end="")
        print("" if check.equal else f"  only live {check.only_in_live}, only replay {check.only_in_replay}")
    print(f"read model at sequence {report.seq}: {'equal to a fresh replay' if report.equal else 'DIFFERS from a fresh replay'}")
    return 0 if report.equal else 1


async def _verify_offline(settings: Settings):  # type: ignore[no-untyped-def]
    import duckdb

    from projections.replay import verify

    if not settings.db_path.exists():
        raise ConfigError(f"no read model at {settings.db_path}")
    try:
        con = duckdb.connect(str(settings.db_path))
    except duckdb.IOException as err:
        raise ConfigError(f"read model {settings.db_path}: in use by a running server; pass --url") from err
    try:
        async with _store(settings) as store:
            return await verify(store, con.cursor())  # type: ignore[arg-type]
    finally:
        con.close()


# --- timeline -----------------------------------------------------------------------------


def timeline(args: argparse.Namespace) -> int:
    from cascade_core import timeline as tl

    try:
        raw = Path(args.timeline).read_bytes()
        kernels = Path(args.kernels).read_text()
    except OSError as err:
        raise ConfigError(f"{err.filename}: {err.strerror}") from err
    try:
        sim_ns = tl.kernel_times_from_csv(kernels, args.clock_mhz)
        # Offline there is no trace to bound kernel uids by; the kernel times stand for it.
        measured = tl.validate_timeline(raw, kernel_count=sys.maxsize)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    result = tl.step_timeline("offline", f"{args.clock_mhz:g} MHz", 0, measured, sim_ns)
    encoded = msgspec.json.encode(result)
    if args.output:
        Path(args.output).write_bytes(encoded)
    print(encoded.decode() if args.json else tl.summary_text(result))
    return 0


# --- events -------------------------------------------------------------------------------


def events(args: argparse.Namespace) -> int:
    if args.parked == (args.aggregate_id is not None):
        raise ConfigError("cascade events takes a trace, run or sim id, or --parked")
    if args.parked:
        return _parked(args)
    return asyncio.run(_events(_settings(args), args.aggregate_id, as_json=args.json))


async def _events(settings: Settings, aggregate_id: str, *, as_json: bool) -> int:
    from cascade_core import subjects
    from cascade_http.history import describe, describe_unread
    from cascade_nats.store import Stored

    found = 0
    async with _store(settings) as store:
        for subject in (subjects.trace(aggregate_id), subjects.run_history(aggregate_id), subjects.sim_history(aggregate_id)):
            async for item in store.history(subject):  # type: ignore[attr-defined]
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
    from cascade_core.models import ParkedEvent
    from cascade_http.history import describe_parked
    from cascade_http.locate import api_client

    parked = msgspec.json.decode(api_client(args).get("/api/parked"), type=list[ParkedEvent])
    for event in parked:
        print(msgspec.json.encode(event).decode() if args.json else describe_parked(event))
    if not parked and not args.json:
        print("nothing parked")
    return 0


# --- trace --------------------------------------------------------------------------------


def trace(args: argparse.Namespace) -> int:
    from cascade_http.locate import api_client
    from cascade_http.uploads_cli import upload

    return upload(api_client(args), Path(args.directory), args.id)


COMMANDS = {"serve": serve, "worker": worker, "replay": replay, "events": events, "timeline": timeline, "trace": trace}


if __name__ == "__main__":
    sys.exit(main())
