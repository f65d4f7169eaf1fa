"""An app on a real nats-server and a real DuckDB file, driven through Starlette's TestClient
(which runs the lifespan: NATS connection, projector, runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_app.service import Cascade
from cascade_process.service import starlette_app
from tests.cascade_sim.world import accelsim_tree

TOKEN = "test-token"


@pytest.fixture
def accelsim_dir(tmp_path: Path) -> Path:
    return accelsim_tree(tmp_path / "accel-sim")


@pytest.fixture
def settings(tmp_path: Path, nats_url: str, accelsim_dir: Path) -> Settings:
    return Settings(
        token=TOKEN,
        data_dir=tmp_path / "data",
        nats_url=nats_url,
        accelsim_dir=accelsim_dir,
        runner=False,
        samples=False,
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(starlette_app(settings), headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield test_client


def service(client: TestClient) -> Cascade:
    """The running service behind a test client, to append events as the runner would."""
    return client.app.state.cascade  # type: ignore[attr-defined,no-any-return]
