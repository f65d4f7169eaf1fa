"""Campaign commands: create one, top it up, cancel or retry it as a whole.

A campaign's runs are made, topped up, cancelled and retried by the run commands
(`cascade_app/runs.py`), one run at a time, so everything about runs holds for them. Every
run a command would make is checked first, so a refused body records nothing; the name is
taken (`campaign.created.v1`, decided under the conflict rule on its name's subject) before
any variant or run is made, so two campaigns of one name never share runs. A grid's variants
are derived as `POST /api/gpu-configs` does (`gpu_configs.derive_config`), their options all
checked first.
"""

from __future__ import annotations

from cascade_app import clock, gpu_configs, runs
from cascade_app.conflicts import Decision, decided, last_shown
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_core import campaigns as decide
from cascade_core import events as ev
from cascade_core.campaigns import CampaignCreate, CampaignEntries, CampaignFacts, CampaignNotFound
from cascade_core.runs import RunCreate
from cascade_host import new_ids
from cascade_nats import subjects
from projections.queries import campaigns as q


async def create_campaign(c: Cascade, body: CampaignCreate) -> str:
    """The new campaign's id, once its runs are made; a refusal says why none was."""
    named = [*body.configs, *([body.base] if body.base is not None else [])]  # a variant has its base's arch
    for run in decide.run_bodies(body.name, body.tags, body.traces, list(dict.fromkeys(named)), body.replicas):
        await runs.check_run(c, run)
    decide.check_create(body)
    points = decide.variants(body)
    for point in points:
        gpu_configs.check_options(point.options)  # every one before any is derived

    async def name() -> Decision[ev.CampaignCreated]:
        last = await last_shown(c, subjects.campaign(body.name))
        existing = None if last is None else last.event
        assert existing is None or isinstance(existing, ev.CampaignEvent)  # all a campaign's subject holds
        command = decide.CreateCampaign(event_id=new_ids.event_id(), at=clock.now(), campaign_id=new_ids.campaign_id(), body=body)
        events = decide.decide_create(command, existing)
        created = events[0]
        assert isinstance(created, ev.CampaignCreated)
        return Decision(events, 0, created)

    created = await decided(c, name)
    for point in points:
        assert body.base is not None  # a grid has a base (`campaigns.variants`)
        await gpu_configs.derive_config(c, name=point.name, base=body.base, options=point.options)
    await _with_runs(c, created, decide.run_bodies(body.name, body.tags, body.traces, decide.configs_of(body), body.replicas))
    return created.campaign_id


async def _with_runs(c: Cascade, campaign: ev.CampaignCreated | CampaignFacts, bodies: list[RunCreate]) -> None:
    """Make a run of each body, and record them as the campaign's."""
    made = [await runs.create_run(c, body) for body in bodies]
    if not made:
        return
    listed = [ev.CampaignRun(run_id=run.run_id, trace_id=run.trace_id) for run in made]

    async def add() -> Decision[None]:
        last = await last_shown(c, subjects.campaign(campaign.name))
        added = decide.runs_added(campaign, listed, event_id=new_ids.event_id(), at=clock.now())
        return Decision([added], 0 if last is None else last.seq, None)

    await decided(c, add)


async def _facts(c: Cascade, key: str) -> CampaignFacts:
    facts = await read(c, q.campaign_facts, key)
    if facts is None:
        raise CampaignNotFound(f"campaign {key} not found")
    return facts


async def add_to_campaign(c: Cascade, key: str, body: CampaignEntries) -> str:
    """Top the campaign up (`campaigns.top_up`): every run the top-up makes or adds to is
    checked before any is; the campaign's id."""
    campaign = await _facts(c, key)
    plan = decide.top_up(campaign, body)
    trace_of = {r.run_id: r.trace_id for r in campaign.runs}
    for run_id, entries in plan.added:
        await runs.check_run(c, RunCreate(trace_id=trace_of[run_id], entries=entries.entries))
    for run in plan.new_runs:
        await runs.check_run(c, run)
    for run_id, entries in plan.added:
        await runs.add_entries(c, run_id, entries, None)
    await _with_runs(c, campaign, plan.new_runs)
    return campaign.id


async def cancel_campaign(c: Cascade, key: str) -> str:
    """Cancel every run of the campaign (each as `POST /api/runs/{id}/cancel` does)."""
    campaign = await _facts(c, key)
    for run in campaign.runs:
        await runs.cancel_run(c, run.run_id)
    return campaign.id


async def retry_campaign(c: Cascade, key: str) -> str:
    """Retry every run of the campaign (each as `POST /api/runs/{id}/retry` does)."""
    campaign = await _facts(c, key)
    for run in campaign.runs:
        await runs.retry_run(c, run.run_id)
    return campaign.id
