"""Run commands: create a run, cancel one, retry its failed and cancelled sims, add sims to
it, delete it. Each decides with `cascade_core.runs` under the
one conflict rule (`conflicts.py`); the answer is read from the read model afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from cascade_app import clock
from cascade_app.conflicts import Decision, decided, last_shown
from cascade_app.gpu_configs import derive_entry_options
from cascade_app.reads import read
from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_core import runs as decide
from cascade_core.gpu_configs import OfferedConfig, offered
from cascade_api.models import ReferenceComparison
from cascade_core.runs import RunCreate, RunEntries, RunEntry
from cascade_core.refusals import NotFound, Unavailable
from cascade_host import new_ids
from cascade_nats import subjects
from cascade_core.run import Run
from cascade_core.trace import Trace
from projections.queries import runs as q
from projections.queries.traces import trace_state


NATS_RETRY_AFTER_S = 5  # what a run refused while NATS does not answer is told to wait


async def create_run(c: Cascade, body: RunCreate) -> ev.RunCreated:
    """The run created, as its event says it; a refusal says why none was."""
    max_sims = c.settings.max_sims_per_run

    async def create() -> Decision[ev.RunCreated]:
        trace, configs = await check_run(c, body)  # before drawing an id per sim
        await derive_entry_options(c, body.entries)
        command = decide.CreateRun(
            event_id=new_ids.event_id(),
            at=clock.now(),
            run_id=new_ids.run_id(),
            sim_ids=[new_ids.sim_id() for _ in range(decide.sim_count(body))],
            body=body,
            free_slots=await _free_slots(c, body),
        )
        # A fresh run id has no events: one that has is taken, and the rule draws another.
        (created,) = decide.decide_create(command, trace, configs, max_sims=max_sims)
        return Decision([created], 0, created)

    return await decided(c, create)


async def check_run(c: Cascade, body: RunCreate) -> tuple[Trace | None, list[OfferedConfig]]:
    """The trace and configs a run of `body` would be decided on; a refusal when there can be
    no such run (a campaign checks each of its runs so before it records anything)."""
    trace = await read(c, trace_state, body.trace_id)
    configs = await _configs(c, body)
    decide.check_create(body, trace, configs, max_sims=c.settings.max_sims_per_run)
    return trace, configs


async def _configs(c: Cascade, body: RunCreate | RunEntries) -> list[OfferedConfig]:
    """The configs the run may name; refused when one it names is not here and the live
    runners cannot be asked (NATS not answering), rather than called unknown."""
    runners = await c.runners()
    configs = offered(await c.local_configs(), runners or [], await c.variants())
    if runners is None and not {e.gpu_config for e in body.entries} <= {g.name for g in configs}:
        detail = "the live runners, whose GPU configs a run may name, are in NATS, which does not answer now; see /api/health"
        raise Unavailable(detail, retry_after_s=NATS_RETRY_AFTER_S)
    return configs


async def _free_slots(c: Cascade, body: RunCreate | RunEntries) -> dict[str, int]:
    """The free slots of the live runners, by config they have, for entries split "auto"
    (asked only then)."""
    auto = {entry.gpu_config for entry in body.entries if entry.split == "auto"}
    if not auto:
        return {}
    runners = await c.runners() or []
    return {config: sum(max(0, r.slots - len(r.running)) for r in runners if config in r.configs) for config in auto}


async def cancel_run(c: Cascade, run_id: str) -> None:
    """Cancel every unfinished sim of the run; nothing changes for a finished or sample run."""

    async def cancel() -> Decision[None]:
        seq, run = await _run_as_last_shown(c, run_id)
        return Decision(decide.decide_cancel(run, decide.CancelRun(event_id=new_ids.event_id(), at=clock.now())), seq, None)

    await decided(c, cancel)


async def delete_run(c: Cascade, run_id: str) -> None:
    """Delete a run none of whose sims is unfinished: gone from the read model, its events kept
    in the log. Its sims' stored files stay in the object store: the log names them, and the
    result cache (`cascade_sim/result_cache.py`) may give them to a sim alike, whose result
    they still are."""

    async def delete() -> Decision[None]:
        seq, run = await _run_as_last_shown(c, run_id)
        return Decision(decide.decide_delete(run, decide.DeleteRun(event_id=new_ids.event_id(), at=clock.now())), seq, None)

    await decided(c, delete)


async def _run_as_last_shown(c: Cascade, run_id: str) -> tuple[int, Run]:
    """The run subject's last sequence, and the run's state as the read model holds it then."""
    last = await last_shown(c, subjects.run(run_id))
    row = None if last is None else await read(c, q.run_row, run_id)
    if last is None or row is None:
        raise NotFound(f"run {run_id} not found")
    return last.seq, row.run


async def _events(c: Cascade, run_id: str) -> AsyncIterator[ev.AnyEvent]:
    """The run's own events (created, cancels, retries, top-ups), oldest first."""
    async with aclosing(c.store.read(subjects.run(run_id))) as stored:
        async for item in stored:
            yield item.event


async def _life_attempt(c: Cascade, run_id: str, sim_id: str, chunk: int | None) -> int:
    """The attempt the newest event on the sim's (or its chunk's) life subject names (0: none yet)."""
    last = await c.store.last_on(subjects.chunk(run_id, sim_id, "life", chunk))
    if last is None:
        return 0
    assert isinstance(last.event, ev.SimClaimed | ev.SimLaunched | ev.SimFinished)  # all a life subject holds
    return last.event.attempt


async def retry_run(c: Cascade, run_id: str) -> None:
    """Run every failed or cancelled sim of the run again (of a split sim, its failed or
    cancelled chunks); nothing changes when none is."""

    async def retry() -> Decision[None]:
        seq, run = await _run_as_last_shown(c, run_id)
        sims = await read(c, q.sim_rows, run)
        claimed = {(a.sim.id, a.chunk): await _life_attempt(c, run_id, a.sim.id, a.chunk) for a in decide.retried(sims)}
        command = decide.RetryRun(event_id=new_ids.event_id(), at=clock.now())
        return Decision(decide.decide_retry(run, sims, command, claimed), seq, None)

    await decided(c, retry)


async def add_entries(c: Cascade, run_id: str, body: RunEntries, key: str | None) -> None:
    """Add the entries' sims to the run; a second request with the same `key` adds none (and
    is refused when its entries are not the first's)."""
    max_sims = c.settings.max_sims_per_run

    async def add() -> Decision[None]:
        seq, run = await _run_as_last_shown(c, run_id)
        sims = await read(c, q.sim_rows, run)
        trace = await read(c, trace_state, run.trace_id)
        keys = {e.key: e.entries async for e in _events(c, run_id) if isinstance(e, ev.RunEntriesAdded) and e.key is not None}
        configs = await _configs(c, body)
        if key not in keys:
            decide.check_add(run, sims, body, trace, configs, max_sims=max_sims)  # before drawing an id per sim
            await derive_entry_options(c, body.entries)
        command = decide.AddEntries(
            event_id=new_ids.event_id(),
            at=clock.now(),
            sim_ids=[new_ids.sim_id() for _ in range(decide.sim_count(body))],
            body=body,
            key=key,
            free_slots=await _free_slots(c, body),
        )
        decision = decide.decide_add(run, sims, command, trace, configs, max_sims=max_sims, keys=keys)
        return Decision(decision, seq, None)

    await decided(c, add)


async def request_reference(c: Cascade, sim_id: str) -> None:
    """A reference for the split or reusing sim: asked again, it is the one there is."""
    max_sims = c.settings.max_sims_per_run

    async def request() -> Decision[None]:
        sim = await read(c, q.sim_row, sim_id)
        if sim is None:
            raise NotFound(f"sim {sim_id} not found")
        decide.check_reference(sim)
        seq, run = await _run_as_last_shown(c, sim.run_id)
        sims = await read(c, q.sim_rows, run)
        trace = await read(c, trace_state, run.trace_id)
        configs = await _configs(c, RunEntries(entries=[RunEntry(gpu_config=sim.gpu_config, count=1)]))
        command = decide.RequestReference(
            event_id=new_ids.event_id(), at=clock.now(), sim_id=sim_id, reference_id=new_ids.sim_id()
        )
        return Decision(decide.decide_reference(run, sims, command, trace, configs, max_sims=max_sims), seq, None)

    await decided(c, request)


async def reference_comparison(c: Cascade, sim_id: str) -> ReferenceComparison:
    """The sim (or the sim whose reference it is) against its reference; NotFound when it has none."""
    sim = await read(c, q.sim_row, sim_id)
    if sim is None:
        raise NotFound(f"sim {sim_id} not found")
    fast = sim if sim.reference_for is None else await read(c, q.sim_row, sim.reference_for)
    run = await read(c, q.run_summary, sim.run_id)
    assert fast is not None and run is not None  # a sim's run, and a reference's sim, are there as long as it is
    ref = decide.reference_of(await read(c, q.sim_rows, run), fast.id)
    if ref is None:
        decide.check_reference(fast)
        raise NotFound(f"sim {fast.id} has no reference; POST /api/sims/{fast.id}/reference asks for one")
    return await read(c, q.reference_comparison, fast, ref)
