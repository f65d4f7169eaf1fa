"""One sim's lifecycle as a pure decider: a command and the sim's state in, the events to
publish out (`decide`); an event and the state in, the state it leaves (`evolve`).

The runner decides through it, and the read model's sim rows change only as `evolve` says
(`projections/fold.py`), so the rules live here once:

- a sim moves pending → launching (claimed) → running (launched) → succeeded | failed |
  cancelled, and a finished sim never changes again;
- a claim of a higher attempt starts that attempt afresh, and facts of any other attempt
  than the current one change nothing (a file of the current attempt counts even once the
  sim finished: a cancelled sim's log is still worth reading);
- a sim whose runner was lost is claimed again for the next attempt, up to the limit, which
  resumes where the lost one stopped when the runner found that in the log (`Claim.resume`:
  its first unfinished launch, after warm-up launches), and
  then fails saying the runner was lost, and why when its scheduler said (`RunnerEnded`);
  one whose runner's job reached a limit of its own (Slurm's time limit, its memory) fails
  at once with the scheduler's words (`cascade_core/slurm.py`);
- a run's cancel cancels each of its sims not finished by then;
- a sim stopped for running past the wall-time limit fails saying so;
- a retry (`run.retry_requested.v1`) makes a failed or cancelled sim wait for a runner again
  (pending) for the attempt after its last (`retried`): that attempt's claim starts it, and
  facts of the earlier ones change nothing; a launch request of a retry names its attempt,
  which a runner takes for the sim's current one when the sim's life has not reached it
  (`awaiting`), and the lost-runner limit counts the attempts since it; a retry's attempt
  starts from the first launch (a failed sim is retried to run it again, not to carry on
  from what failed), as does a sim's first;
- a chunk of a split sim (`cascade_core/split.py`) lives as a sim does, by these same rules,
  on its own attempts: facts of other chunks change nothing, except that another chunk's
  failure stops it (`evolve_split`: its sim failed with that chunk's error), and the sim's
  state follows from its chunks' (`split.sim_state`).

No I/O and no clock: ids and times arrive in the commands.
"""

from __future__ import annotations

from datetime import datetime
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, assert_never, get_args

import msgspec

from cascade_core import events as ev
from cascade_core import slurm

SimState = Literal["pending", "launching", "running", "succeeded", "failed", "cancelled"]
SIM_STATES: tuple[SimState, ...] = get_args(SimState)
FINISHED = frozenset({"succeeded", "failed", "cancelled"})
UNDER_WAY = frozenset({"launching", "running"})
RETRIABLE = frozenset({"failed", "cancelled"})


class Lifecycle(Protocol):
    """Where a sim is in its life: a `SimLife`, or a read model row holding the same."""

    @property
    def state(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def chunk(self) -> int | None: ...


class SimLife(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    run_id: str
    sim_id: str
    state: str = "pending"
    attempt: int = 0  # the current attempt; 0 before any claim
    runner_id: str | None = None  # who claimed the current attempt
    host: str | None = None  # where it runs
    chunk: int | None = None  # which chunk of a split sim this is the life of

    @property
    def name(self) -> str:
        return chunk_name(self.sim_id, self.chunk)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def under_way(self) -> bool:
        """Claimed and not finished: the current attempt's runner holds it, or was lost."""
        return self.state in UNDER_WAY

    @property
    def next_attempt(self) -> int:
        """The attempt a claim starts: a pending sim's own (1, or the one a retry asked
        for), else the one after the current."""
        return max(self.attempt, 1) if self.state == "pending" else self.attempt + 1


def chunk_name(sim_id: str, chunk: int | None) -> str:
    """A sim, or a chunk of it, as event ids, a runner's list of what it runs and its logs
    name it."""
    return sim_id if chunk is None else f"{sim_id}.c{chunk}"


def names_sim(name: str, sim_id: str) -> bool:
    """Whether `chunk_name` gave `name` for the sim or one of its chunks."""
    return name == sim_id or name.startswith(f"{sim_id}.c")


class Outcome(msgspec.Struct, frozen=True):
    """How a simulator run ended, as its backend judges it: `exit_code` is shell-style
    (128 + N when killed by signal N), None when it never ran."""

    succeeded: bool
    exit_code: int | None
    error: str | None


# --- commands -----------------------------------------------------------------------------


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """A runner takes the sim's launch request (`causation_id`, `correlation_id`) and would
    run its next attempt. `held_elsewhere`: a live runner other than this one says it runs
    the sim; `ended`: what ended the runner of the current attempt, if its scheduler said
    (both only asked while an attempt is under way)."""

    at: datetime
    runner_id: str
    host: str
    max_attempts: int
    held_elsewhere: bool = False
    first_attempt: int = 1  # the attempt the request began with: the limit counts from it
    ended: ev.RunnerEnded | None = None
    # Where the current attempt stopped, as the runner found it in the log: what a claim
    # taking over from its lost runner resumes at (None: nothing to resume, start over).
    resume: ev.Resume | None = None
    causation_id: str | None = None
    correlation_id: str | None = None


class GiveUp(msgspec.Struct, frozen=True, kw_only=True):
    """No runner can run the sim (`reason` names why in the event's id, `error` in words)."""

    at: datetime
    reason: str
    error: str
    causation_id: str | None = None
    first_attempt: int = 1  # as in `Claim`


Fact = ev.SimLaunched | ev.SimHeartbeat | ev.KernelFinished | ev.SimFileStored


class Record(msgspec.Struct, frozen=True):
    """A runner reports what its attempt's simulator did."""

    fact: Fact


class Finish(msgspec.Struct, frozen=True, kw_only=True):
    """An attempt ended: the simulator's `outcome`, unless the runner stopped it for running
    longer than `wall_time_limit_s`."""

    event_id: str
    at: datetime
    attempt: int
    outcome: Outcome
    wall_time_limit_s: float | None = None
    cut_short: ev.CutShort | None = None  # what a success did not simulate (`ev.SimFinished`)


Command = Claim | GiveUp | Record | Finish
Decided = ev.SimClaimed | ev.SimFinished | Fact  # what a command may decide


def decide(command: Command, sim: SimLife) -> list[Decided]:
    """The events `command` makes of the sim: none when it changes nothing."""
    match command:
        case Claim():
            return _claim(command, sim)
        case GiveUp():
            if sim.finished:
                return []
            error = command.error
            return [_failed(sim, _failure_id(sim, command.reason, command.first_attempt), command.at, error, command.causation_id)]
        case Record():
            return [command.fact] if counts(sim, command.fact) else []
        case Finish():
            return _finish(command, sim)
        case _:
            assert_never(command)


def _claim(cmd: Claim, sim: SimLife) -> list[Decided]:
    if sim.finished:
        return []
    if sim.under_way:
        # Its request came back: its runner stopped keeping it in progress. Unless that
        # runner still says it runs the sim (it was only slow), it is lost.
        if cmd.held_elsewhere:
            return []
        ended = cmd.ended if cmd.ended is not None and cmd.ended.runner_id == sim.runner_id else None
        if ended is not None and slurm.limit_reached(ended):
            error = f"{ended.reason} during attempt {sim.attempt}"
            return [_failed(sim, f"{sim.name}.{sim.attempt}.ended", cmd.at, error, cmd.causation_id)]
        tried = sim.attempt - cmd.first_attempt + 1
        if tried >= cmd.max_attempts:
            owner = f"{sim.runner_id} on {sim.host}" if sim.runner_id else f"the runner on {sim.host}"
            why = ended.reason if ended is not None else f"{owner} stopped responding"
            error = f"runner lost: {why} during attempt {sim.attempt}; gave up after {tried} attempts"
            return [_failed(sim, _failure_id(sim, "lost", cmd.first_attempt), cmd.at, error, cmd.causation_id)]
    attempt = sim.next_attempt
    claim = ev.SimClaimed(
        id=f"{sim.name}.{attempt}.claim",
        at=cmd.at,
        causation_id=cmd.causation_id,
        correlation_id=cmd.correlation_id,
        run_id=sim.run_id,
        sim_id=sim.sim_id,
        chunk=sim.chunk,
        attempt=attempt,
        runner_id=cmd.runner_id,
        host=cmd.host,
        resume=cmd.resume if sim.under_way else None,  # only a lost runner's attempt is carried on
    )
    return [claim]


def _failure_id(sim: SimLife, reason: str, first_attempt: int) -> str:
    """A failure's id: the same for the same decision, another after each retry (the
    duplicate window would drop a second failure of the same id)."""
    return f"{sim.name}.{reason}" if first_attempt <= 1 else f"{sim.name}.r{first_attempt}.{reason}"


def _failed(sim: SimLife, event_id: str, at: datetime, error: str, causation_id: str | None) -> ev.SimFinished:
    """The sim failed for want of a runner, not by its simulator; the id says why, so the
    same decision made twice is stored once."""
    return ev.SimFinished(
        id=event_id, at=at, causation_id=causation_id, run_id=sim.run_id, sim_id=sim.sim_id, chunk=sim.chunk,
        attempt=sim.attempt, outcome="failed", error=error,
    )


def _finish(cmd: Finish, sim: SimLife) -> list[Decided]:
    if not current(sim, cmd.attempt):
        return []
    outcome = cmd.outcome
    succeeded, error = outcome.succeeded, outcome.error
    if cmd.wall_time_limit_s is not None:
        succeeded, error = False, f"ran longer than the wall-time limit of {cmd.wall_time_limit_s:g} s (CASCADE_SIM_TIMEOUT)"
    finished = ev.SimFinished(
        id=cmd.event_id, at=cmd.at, run_id=sim.run_id, sim_id=sim.sim_id, chunk=sim.chunk, attempt=cmd.attempt,
        outcome="succeeded" if succeeded else "failed", exit_code=outcome.exit_code, error=error,
        cut_short=cmd.cut_short if succeeded else None,
    )
    return [finished]


# --- what events make of a sim ------------------------------------------------------------


def current(sim: Lifecycle, attempt: int) -> bool:
    """Whether `attempt` is the sim's current one, while it still runs."""
    return attempt == sim.attempt and attempt != 0 and sim.state not in FINISHED


def counts(sim: Lifecycle, fact: Fact) -> bool:
    """Whether a runner's fact changes anything: one of the current attempt while it runs
    (its launch only once), or a file of the current attempt, even after it finished."""
    kind = type(fact)  # on the projection's hot path: no call more than needed
    if fact.chunk != sim.chunk:
        return False
    if kind is ev.SimFileStored:
        return fact.attempt == sim.attempt
    state = sim.state
    return fact.attempt == sim.attempt != 0 and state not in FINISHED and (kind is not ev.SimLaunched or state == "launching")


SimLifeEvent = ev.SimQueued | ev.SimClaimed | ev.SimLaunched | ev.SimHeartbeat | ev.KernelFinished | ev.SimFileStored | ev.SimFinished | ev.RunCancelRequested


def evolve(sim: SimLife, event: SimLifeEvent) -> SimLife:
    """The sim after `event`; `sim` itself when the event changes nothing, so a caller can
    tell a change by identity."""
    if isinstance(event, ev.SimEvent) and event.chunk != sim.chunk:
        return sim  # another chunk's (`evolve_split` says what its failure does)
    match event:
        case ev.SimClaimed():
            if sim.state in FINISHED or event.attempt < sim.next_attempt:
                return sim
            return msgspec.structs.replace(sim, state="launching", attempt=event.attempt, runner_id=event.runner_id, host=event.host)
        case ev.SimLaunched():
            if not counts(sim, event):
                return sim
            return msgspec.structs.replace(sim, state="running", host=event.host, runner_id=event.runner_id or sim.runner_id)
        case ev.SimFinished():
            # Also before any claim (attempt 0): a sim no runner could take fails without one.
            if sim.state in FINISHED or event.attempt != sim.attempt:
                return sim
            return msgspec.structs.replace(sim, state=event.outcome)
        case ev.RunCancelRequested():
            if sim.state in FINISHED or event.run_id != sim.run_id:
                return sim
            return msgspec.structs.replace(sim, state="cancelled")
        case ev.SimQueued() | ev.SimHeartbeat() | ev.KernelFinished() | ev.SimFileStored():
            return sim  # progress and data: they change what the read model shows, not the state
        case _:
            assert_never(event)


def retried(sim: SimLife, attempt: int) -> SimLife:
    """The sim after a retry asked for `attempt`: pending for it, when the sim is still
    failed or cancelled at an attempt before (else the retry came late, and changes
    nothing)."""
    if sim.state not in RETRIABLE or attempt <= sim.attempt:
        return sim
    return msgspec.structs.replace(sim, state="pending", attempt=attempt, runner_id=None, host=None)


def awaiting(sim: SimLife, attempt: int) -> SimLife:
    """The sim as a launch request for `attempt` (0: a first request) finds it on its life
    subject: a retry's request for an attempt the life has not reached yet finds it pending
    for it, whatever its earlier attempts left there (its cancel is on the run's subject)."""
    if attempt <= sim.attempt:
        return sim
    return msgspec.structs.replace(sim, state="pending", attempt=attempt, runner_id=None, host=None)


def evolve_split(chunks: Sequence[SimLife], event: SimLifeEvent) -> list[SimLife]:
    """A split sim's chunks after `event`: the chunk it is about evolves (a cancel, all of
    them), and once one fails by it, every other unfinished chunk is stopped."""
    after = [evolve(chunk, event) for chunk in chunks]
    if any(a.state == "failed" and b.state != "failed" for a, b in zip(after, chunks)):
        return [stopped(chunk) for chunk in after]
    return after


def stopped(chunk: SimLife) -> SimLife:
    """A chunk stopped because another chunk of its sim failed: the sim failed with it."""
    return chunk if chunk.finished else msgspec.structs.replace(chunk, state="cancelled")


def latest(
    run_id: str, sim_id: str, fact: ev.SimClaimed | ev.SimLaunched | ev.SimFinished | None, chunk: int | None = None
) -> SimLife:
    """The sim (or its chunk) as the newest event on its life subject tells it, which is all a
    runner reads before it claims: the attempt that event names is taken for the current one."""
    sim = SimLife(run_id=run_id, sim_id=sim_id, chunk=chunk)
    if fact is None:
        return sim
    if not isinstance(fact, ev.SimClaimed):  # its claim came before it
        sim = msgspec.structs.replace(sim, state="launching", attempt=fact.attempt)
    return evolve(sim, fact)


def cancel_of(request: ev.SimQueued, run_events: Iterable[ev.Event]) -> ev.RunCancelRequested | None:
    """The cancel that ended what a launch request asks for, from its run's events in order;
    None while the run still wants it run. A request asks for its sim's (or chunk's) first
    attempt (`attempt` 0), which the run's creation or the entries that added the sim asked
    for, or for the attempt a retry named; a cancel after that ends it whatever retries
    follow, as each retry queues a request of its own. A runner drops such a request
    unclaimed, and stops its attempt if it runs."""
    asked = False
    for event in run_events:
        match event:
            case ev.RunCreated() | ev.RunEntriesAdded():
                asked = asked or request.attempt == 0 and any(s.sim_id == request.sim_id for s in event.sims)
            case ev.RunRetryRequested():
                named = [s.attempt for s in event.sims if request.chunk is None and s.sim_id == request.sim_id] + [
                    c.attempt for c in event.chunks if c.sim_id == request.sim_id and c.chunk == request.chunk
                ]
                asked = asked or request.attempt in named
            case ev.RunCancelRequested() if asked:
                return event
    return None
