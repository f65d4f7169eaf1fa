"""`cascade serve`: the data dir locked, the port bound, NATS (embedded unless configured),
then the API app and the service behind it under uvicorn until a signal stops them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from datetime import UTC, datetime

import uvicorn

from cascade_app.config import ConfigError, Settings, bind_port, check_accelsim_dir, load_or_create_secret, url_of
from cascade_nats.replicas import default
from cascade_http.sessions import CODE_S
from cascade_process import datadir, event_log
from cascade_process.service import starlette_app

log = logging.getLogger("cascade")

# How long an idle connection is kept: longer than clients keep theirs (httpx 5 s, Python's
# aiohttp 15 s), so that the server is never the side that closes one first. A client that
# sends a request on a connection just as the server closes it gets a reset, and httpx does
# not send it again (uvicorn's default is 5 s, the same as httpx's: a race under load).
KEEP_ALIVE_S = 75


def serve(settings: Settings) -> int:
    check_accelsim_dir(settings.accelsim_dir)
    # Nothing in the data dir is touched before its lock is held: a second server on a live
    # data dir stops here and leaves the first one's files and processes alone.
    with datadir.lock(settings.data_dir), bind_port(settings.host, settings.port) as listener:
        settings.replicas = replicas(settings)
        if settings.token is None:
            settings.token, created = load_or_create_secret(settings.token_path, "token")
            if created:
                # Where it is, never what it is: stdout ends up in journals and CI logs.
                print(f"cascade: a new API token is in {settings.token_path}, readable by you alone (cat {settings.token_path})", flush=True)
        with event_log.configured_or_embedded(settings) as nats:
            settings.nats_url = nats.url
            service = datadir.Service(
                pid=os.getpid(), api_url=url_of(listener), nats_url=nats.address, started_at=datetime.now(UTC), nats_embedded=nats.embedded
            )
            # No logging config of uvicorn's own: its lines go through the redacting root handler.
            app = starlette_app(settings, nats.server)
            # The code, unlike the token, may be printed: it signs in once, and not for long.
            code = app.state.sessions.new_code()
            print(f"cascade: sign in to the web app at {service.api_url}/#signin={code} (works once, within {CODE_S // 60} minutes)", flush=True)
            config = uvicorn.Config(
                app, lifespan="on", log_config=None, log_level="info", timeout_graceful_shutdown=5, timeout_keep_alive=KEEP_ALIVE_S
            )
            server = uvicorn.Server(config)
            # uvicorn shuts down on SIGINT/SIGTERM and then raises the signal again; let that end
            # this function normally, so the embedded nats-server is stopped after the app.
            signal.signal(signal.SIGTERM, _stop)
            with datadir.published(settings.data_dir, service), contextlib.suppress(KeyboardInterrupt, SystemExit):
                log.info("API on %s, data dir %s, NATS %s (%d replicas of each stream)", service.api_url, settings.data_dir, nats.address, settings.replicas)
                server.run(sockets=[listener])
            return 0 if server.started else 1


def replicas(settings: Settings) -> int:
    """The replicas of the streams (`cascade_nats.replicas`): as asked, else as many as the
    cluster has servers, up to 3; never more than it has."""
    size = asyncio.run(event_log.check_nats(settings.nats_access())) if settings.nats_url is not None else 1
    count = default(settings.replicas, size)
    where = f"the NATS at {settings.nats_access().address}" if settings.nats_url is not None else "the embedded nats-server"
    if count > size:
        raise ConfigError(f"--replicas {count}: {where} has {size} server{'s' if size > 1 else ''}; a stream has at most one replica per server")
    return count


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)
