"""The campaign routes' answers: a campaign, its sims as Accel-Sim's job_status.py shows its
jobs, and a stat's table, trace by config, as its get_stats.py writes it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from cascade_core.run import RunState
from cascade_core.sims import SimState


class CampaignSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    name: str
    created_at: datetime
    state: Annotated[RunState, msgspec.Meta(description="Its runs' together: active while any is, then cancelled, failed or succeeded.")]
    traces: Annotated[list[str], msgspec.Meta(description="Its traces, in the order they were added: a run each.")]
    configs: Annotated[list[str], msgspec.Meta(description="Its configs, in the order they were added.")]
    replicas: Annotated[int, msgspec.Meta(description="The most sims any trace has of any config.")]
    runs: Annotated[list[str], msgspec.Meta(description="Its runs' ids, in the order of `traces`.")]
    sim_counts: Annotated[dict[str, int], msgspec.Meta(description="Its sims by state, over all its runs.")]
    tags: list[str] = []
    baseline: str | None = None


class CampaignSim(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A sim of the campaign as a row of job_status.py's table: where it is, how far, how fast."""

    run_id: str
    sim_id: str
    trace_id: str
    gpu_config: str
    replica: int
    state: SimState
    kernels_done: int
    kernels_total: int
    sim_rate_ips: Annotated[float | None, msgspec.Meta(description="Simulated instructions per second, as the simulator last printed.")]
    gpu_tot_sim_cycle: float | None
    error: str | None = None
    cut_short: Annotated[bool, msgspec.Meta(description="It succeeded without simulating every launch: it counts in no table.")] = False
    cached_from: Annotated[
        str | None, msgspec.Meta(description="The sim whose result it took instead of simulating (the result cache); absent when it simulated.")
    ] = None


class CampaignDetail(CampaignSummary, frozen=True, kw_only=True):
    sims: Annotated[list[CampaignSim], msgspec.Meta(description="By trace, then config, then replica.")]


class CampaignTableRow(msgspec.Struct, frozen=True, kw_only=True):
    trace_id: str
    trace_name: Annotated[str, msgspec.Meta(description="The trace's model, or its id when it names none.")]
    config: str
    value: Annotated[float | None, msgspec.Meta(description="The mean over `sims`; null when none succeeded with the stat.")]
    baseline_value: float | None
    normalised: Annotated[float | None, msgspec.Meta(description="value / baseline_value; null without both.")]
    sims: Annotated[int, msgspec.Meta(description="The succeeded sims (every launch simulated) the value is the mean of.")]


class CampaignTable(msgspec.Struct, frozen=True, kw_only=True):
    """A stat per trace and config: a sim's total cycles, instructions or IPC as it last printed
    them (`gpu_tot_sim_cycle`, `gpu_tot_sim_insn`, `gpu_tot_ipc`); any other stat by name over
    the sim's kernels: its kernels' own values summed, a ratio of running totals as the ratio
    of its parts' sums, a snapshot as its last kernel printed it."""

    campaign: str
    stat: str
    baseline: str | None
    rows: list[CampaignTableRow]
