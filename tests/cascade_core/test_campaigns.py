"""Campaigns' pure decisions: what a top-up makes and adds, a grid's points and their names."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from cascade_core import events as ev
from cascade_core.campaigns import (
    BadCampaign,
    CampaignCreate,
    CampaignEntries,
    CampaignExists,
    CampaignFacts,
    CreateCampaign,
    Variant,
    decide_create,
    grid_points,
    top_up,
)
from cascade_core.runs import RunEntries, RunEntry

AT = datetime(2026, 12, 4, 17, tzinfo=UTC)
CAMPAIGN = CampaignFacts(
    id="campaign-1", name="l2", tags=["t"], configs=["A", "B"], replicas=2,
    runs=[ev.CampaignRun(run_id="run-1", trace_id="x"), ev.CampaignRun(run_id="run-2", trace_id="y")],
)


BODY = CampaignCreate(name="l2", traces=["x"], configs=["A"])


def create(**body: object) -> CreateCampaign:
    return CreateCampaign(event_id="e", at=AT, campaign_id="campaign-1", body=msgspec.structs.replace(BODY, **body))


def test_a_campaign_is_named_once() -> None:
    (created,) = decide_create(create(tags=["t", "t", "u"], baseline="A"), None)
    assert created == ev.CampaignCreated(id="e", at=AT, campaign_id="campaign-1", name="l2", tags=["t", "u"], baseline="A")
    with pytest.raises(CampaignExists, match="a campaign named l2 exists already"):
        decide_create(create(), created)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"traces": ["x", "x"]}, "traces named more than once: x"),
        ({"configs": ["A", "A"]}, "configs named more than once: A"),
        ({"baseline": "B"}, "baseline B is not one of the campaign's configs"),
    ],
)
def test_a_bad_campaign_is_refused(body: dict[str, object], said: str) -> None:
    with pytest.raises(BadCampaign, match=said):
        decide_create(create(**body), None)


def test_a_top_up_adds_configs_and_replicas_to_every_run_and_runs_for_new_traces() -> None:
    plan = top_up(CAMPAIGN, CampaignEntries(traces=["z"], configs=["C"], replicas=1))
    entries = RunEntries(entries=[RunEntry(gpu_config="A", count=1), RunEntry(gpu_config="B", count=1), RunEntry(gpu_config="C", count=3)])
    assert plan.added == [("run-1", entries), ("run-2", entries)]
    (run,) = plan.new_runs
    assert (run.trace_id, run.name, run.tags) == ("z", "l2", ["t"])
    assert [(e.gpu_config, e.count) for e in run.entries] == [("A", 3), ("B", 3), ("C", 3)]
    only_trace = top_up(CAMPAIGN, CampaignEntries(traces=["z"]))
    assert only_trace.added == [] and [(e.gpu_config, e.count) for e in only_trace.new_runs[0].entries] == [("A", 2), ("B", 2)]


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        (CampaignEntries(), "adds nothing"),
        (CampaignEntries(traces=["x"]), "has traces x already"),
        (CampaignEntries(configs=["B"]), "has configs B already"),
        (CampaignEntries(configs=["C", "C"]), "configs named more than once: C"),
    ],
)
def test_a_top_up_that_adds_nothing_new_is_refused(entries: CampaignEntries, said: str) -> None:
    with pytest.raises(BadCampaign, match=said):
        top_up(CAMPAIGN, entries)


def test_a_grid_is_one_variant_per_point_named_by_index_in_option_order() -> None:
    grid = {"-gpgpu_n_clusters": ["14", "28"], "-gpgpu_cache:dl2": ["S:32:128:16,L:B:m:L:P,A:192:4,32:0,32", "S:64:128:16,L:B:m:L:P,A:192:4,32:0,32"]}
    points = grid_points("SM61_TITANX", "l2-study", grid)
    assert points == [
        Variant(name="SM61_TITANX-l2-study-1", options={"-gpgpu_cache:dl2": grid["-gpgpu_cache:dl2"][0], "-gpgpu_n_clusters": "14"}),
        Variant(name="SM61_TITANX-l2-study-2", options={"-gpgpu_cache:dl2": grid["-gpgpu_cache:dl2"][0], "-gpgpu_n_clusters": "28"}),
        Variant(name="SM61_TITANX-l2-study-3", options={"-gpgpu_cache:dl2": grid["-gpgpu_cache:dl2"][1], "-gpgpu_n_clusters": "14"}),
        Variant(name="SM61_TITANX-l2-study-4", options={"-gpgpu_cache:dl2": grid["-gpgpu_cache:dl2"][1], "-gpgpu_n_clusters": "28"}),
    ]
    assert grid_points("SM61_TITANX", "l2-study", dict(reversed(grid.items()))) == points  # whatever order the options came in
    with pytest.raises(BadCampaign, match="at least one value"):
        grid_points("SM61_TITANX", "l2-study", {"-gpgpu_n_clusters": []})
    with pytest.raises(BadCampaign, match="values of -gpgpu_n_clusters named more than once"):
        grid_points("SM61_TITANX", "l2-study", {"-gpgpu_n_clusters": ["14", "14"]})
