"""A runner as it announces itself (`cascade_sim/registry.py`): its slots, the sims it runs,
the GPU configs and the simulator it has. What the live runners hold decides which sims wait
(`attention`) and which configs a run may name (`gpu_configs.offered`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from cascade_core.gpu_configs import GpuConfig


class SimulatorBuild(msgspec.Struct, frozen=True, kw_only=True):
    """Which simulator a runner runs: its binary as found at the runner's start, and the builds
    it prints, as the last sim launched there printed them (null before one has)."""

    binary_digest: Annotated[str | None, msgspec.Meta(description="sha256 of the simulator's binary; null if unreadable.")]
    accel_sim_build: str | None = None
    gpgpu_sim_build: str | None = None


class Runner(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    host: str
    slots: int
    running: list[str]
    # The names of `gpu_configs`, which runners of older versions announce alone, and older
    # services read.
    configs: list[str]
    started_at: datetime
    last_seen_at: datetime
    gpu_configs: Annotated[list[GpuConfig], msgspec.Meta(description="The GPU configs it runs, with their digests.")] = []
    simulator: SimulatorBuild | None = None
    load: Annotated[float | None, msgspec.Meta(description="Its host's load average over the last minute.")] = None
