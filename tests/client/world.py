"""A live service for the client's tests: a real nats-server, the real service on a port
(uvicorn in a thread), its runner driving the fake simulator; SM61_TITANX_COPY has
SM61_TITANX's options, so the fake replays SM61_TITANX's log for it too."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from cascade_app.config import Settings
from cascade_nats import server
from tests.cascade_http.live import LiveServer, live_server
from tests.cascade_sim.world import TITANX, accelsim_tree

TOKEN = "client-token"
COPY = "SM61_TITANX_COPY"


@contextlib.contextmanager
def serving(tmp: Path) -> Iterator[LiveServer]:
    tree = accelsim_tree(tmp / "accel-sim")
    shutil.copytree(tree / TITANX, tree / TITANX.parent / COPY)
    shutil.copytree(tree / "gpu-simulator/configs/tested-cfgs/SM61_TITANX", tree / "gpu-simulator/configs/tested-cfgs" / COPY)
    with server.running(tmp / "jetstream") as nats:
        settings = Settings(token=TOKEN, data_dir=tmp / "data", nats_url=nats.url, accelsim_dir=tree, runner=True, runner_slots=2, samples=False)
        with live_server(settings) as live:
            yield live
