"""Campaigns as pure decisions: a named, tagged set of runs, traces × configs × replicas.

A campaign holds one run per trace, each with an entry per config of `replicas` sims, made
as any run is (`runs.decide_create`, through the app layer's one path), so everything about
runs holds for its runs: their sims, cancel, retry, top-up. The campaign itself records its
name (`campaign.created.v1`, on its name's subject, so a name is taken once) and which run is
each trace's (`campaign.runs_added.v1`); its configs and replicas are its runs' entries, and
its state theirs, read when asked. No I/O: ids and the time arrive in the command.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated

import msgspec

from cascade_core import events as ev
from cascade_core.refusals import Conflict, Invalid, NotFound
from cascade_core.runs import Name, RunCreate, RunEntries, RunEntry, Tags

Traces = Annotated[list[str], msgspec.Meta(max_length=256, description="Trace ids, each ready: one run each.")]
Configs = Annotated[list[str], msgspec.Meta(max_length=64, description="GpuConfig names, each of the traces' arch.")]


class CampaignCreate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    name: Annotated[
        Name,
        # A campaign's name makes its config variants' names, which are folders on every runner.
        msgspec.Meta(
            pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
            description="Unique among campaigns: letters, digits, `.`, `_` and `-`; its runs take it as their name.",
        ),
    ]
    traces: Annotated[Traces, msgspec.Meta(min_length=1)]
    configs: Configs = []
    tags: Tags = []
    replicas: Annotated[int, msgspec.Meta(ge=1, le=64, description="Sims of each trace on each config.")] = 1
    baseline: Annotated[
        str | None, msgspec.Meta(description="One of `configs`: the table's values are normalised to it unless a reader asks for another.")
    ] = None
    base: Annotated[str | None, msgspec.Meta(description="With `grid`: the config its variants are derived from.")] = None
    grid: Annotated[
        dict[str, list[str]] | None,
        msgspec.Meta(
            description="GPGPU-Sim options, each with its values: one variant of `base` per point of their product, "
            "named `<base>-<name>-<n>` (n from 1, options in name order, values in the order given), beside `configs`."
        ),
    ] = None


class CampaignEntries(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A top-up: traces and configs the campaign has not, and more replicas of every cell."""

    traces: Annotated[Traces, msgspec.Meta(description="New traces: a run each, on every config (old and new).")] = []
    configs: Annotated[Configs, msgspec.Meta(description="New configs: an entry in every run.")] = []
    replicas: Annotated[int, msgspec.Meta(ge=0, le=64, description="More sims of every trace on every config.")] = 0


class BadCampaign(Invalid):
    """A body that names something twice, a baseline not among its configs, or nothing to add."""


class CampaignExists(Conflict):
    pass


class CampaignNotFound(NotFound):
    pass


class CampaignFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a top-up reads of a campaign: its runs by trace, in order, its configs in order,
    and how many sims each trace has of each config (the most any has)."""

    id: str
    name: str
    tags: list[str]
    runs: list[ev.CampaignRun]
    configs: list[str]
    replicas: int


class CreateCampaign(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime
    campaign_id: str
    body: CampaignCreate


def _once(what: str, names: Sequence[str]) -> None:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadCampaign(f"{what} named more than once: {', '.join(twice)}")


def variants(body: CampaignCreate) -> list[Variant]:
    """The variants of the body's grid (none without one); refused when a grid has no base,
    or a base no grid, or there are neither configs nor a grid."""
    if (body.base is None) != (body.grid is None):
        raise BadCampaign("a grid goes with a base config, and a base with a grid")
    if body.base is None or body.grid is None:
        if not body.configs:
            raise BadCampaign("a campaign needs configs, or a base and a grid, or both")
        return []
    return grid_points(body.base, body.name, body.grid)


def configs_of(body: CampaignCreate) -> list[str]:
    """The campaign's configs: those named, then its grid's variants."""
    return [*body.configs, *(v.name for v in variants(body))]


def check_create(body: CampaignCreate) -> None:
    """Refused when the body names a trace or config twice, or a baseline it does not run, or
    has a bad grid (`variants`)."""
    _once("traces", body.traces)
    configs = configs_of(body)
    _once("configs", configs)
    if body.baseline is not None and body.baseline not in configs:
        raise BadCampaign(f"baseline {body.baseline} is not one of the campaign's configs ({', '.join(configs)})")


def run_bodies(name: str, tags: Sequence[str], traces: Sequence[str], configs: Sequence[str], replicas: int) -> list[RunCreate]:
    """The runs of `traces`: one each, an entry per config of `replicas` sims, named and
    tagged as the campaign."""
    entries = [RunEntry(gpu_config=config, count=replicas) for config in configs]
    return [RunCreate(trace_id=trace, entries=entries, name=name, tags=list(tags)) for trace in traces]


def decide_create(cmd: CreateCampaign, existing: ev.CampaignEvent | None) -> list[ev.Event]:
    """The campaign named; refused when its name is taken (its subject holds a creation)."""
    check_create(cmd.body)
    if existing is not None:
        raise CampaignExists(f"a campaign named {cmd.body.name} exists already ({existing.campaign_id}); choose another name")
    body = cmd.body
    tags = list(dict.fromkeys(body.tags))
    return [ev.CampaignCreated(id=cmd.event_id, at=cmd.at, campaign_id=cmd.campaign_id, name=body.name, tags=tags, baseline=body.baseline)]


def runs_added(campaign: ev.CampaignEvent | CampaignFacts, runs: Sequence[ev.CampaignRun], *, event_id: str, at: datetime) -> ev.CampaignRunsAdded:
    campaign_id = campaign.campaign_id if isinstance(campaign, ev.CampaignEvent) else campaign.id
    return ev.CampaignRunsAdded(id=event_id, at=at, campaign_id=campaign_id, name=campaign.name, runs=list(runs))


class TopUp(msgspec.Struct, frozen=True, kw_only=True):
    """What a top-up does: runs for its new traces, and entries added to the runs there are."""

    new_runs: list[RunCreate]
    added: list[tuple[str, RunEntries]]  # (run id, its new entries)


def top_up(campaign: CampaignFacts, body: CampaignEntries) -> TopUp:
    """New traces get a run on every config, old and new, of as many replicas as the campaign
    has then; every run there is gets an entry per new config of the replicas it has, and
    `replicas` more of every config. Refused when it adds nothing, or names a trace or config
    twice or one the campaign has."""
    if not (body.traces or body.configs or body.replicas):
        raise BadCampaign("the top-up adds nothing: give traces, configs or replicas")
    _once("traces", body.traces)
    _once("configs", body.configs)
    had_traces = {r.trace_id for r in campaign.runs}
    if again := [t for t in body.traces if t in had_traces]:
        raise BadCampaign(f"campaign {campaign.name} has traces {', '.join(again)} already; add replicas instead")
    if again := [c for c in body.configs if c in campaign.configs]:
        raise BadCampaign(f"campaign {campaign.name} has configs {', '.join(again)} already; add replicas instead")
    replicas = campaign.replicas + body.replicas
    configs = [*campaign.configs, *body.configs]
    entries = [
        *(RunEntry(gpu_config=config, count=body.replicas) for config in campaign.configs if body.replicas),
        *(RunEntry(gpu_config=config, count=replicas) for config in body.configs),
    ]
    added = [(r.run_id, RunEntries(entries=entries)) for r in campaign.runs] if entries else []
    return TopUp(new_runs=run_bodies(campaign.name, campaign.tags, body.traces, configs, replicas), added=added)


# --- a grid over a base config --------------------------------------------------------------


class Variant(msgspec.Struct, frozen=True, kw_only=True):
    """One point of a grid: a config variant's name, and its options' values."""

    name: str
    options: dict[str, str]


def grid_points(base: str, campaign: str, grid: Mapping[str, Sequence[str]]) -> list[Variant]:
    """One variant of `base` per point of the product of the grid's values, named
    `<base>-<campaign>-<n>` (n from 1). Options are taken in name order and values in the
    order given, so the same grid names the same points the same way whatever order its
    options came in. Names by index, not by value: a value such as an L2's
    `S:64:128:16,L:B:m:L:P,A:192:4,32:0,32` holds characters a folder name (a config is one
    on every runner) must not, and is long; the variant's options say what each point is."""
    options = sorted(grid)
    if not options or any(not grid[o] for o in options):
        raise BadCampaign("a grid needs at least one option, each with at least one value")
    for option in options:
        _once(f"values of {option}", list(grid[option]))
    points = itertools.product(*(grid[o] for o in options))
    return [Variant(name=f"{base}-{campaign}-{n}", options=dict(zip(options, values))) for n, values in enumerate(points, 1)]
