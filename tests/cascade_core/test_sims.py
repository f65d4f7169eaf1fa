"""The sim lifecycle decider without NATS: runners' commands and the log's events, in any
order hypothesis finds, against the rules `cascade_core/sims.py` states."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cascade_core import events as ev
from cascade_core import sims
from cascade_core.sims import Claim, Finish, GiveUp, Outcome, Record, SimState, decide, evolve

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
MAX_ATTEMPTS = 3
START = SimState(run_id="run-1", sim_id="sim-1")


def fact(kind: str, attempt: int, n: int) -> sims.Fact | ev.SimFinished:
    """A runner's fact of `attempt`, the n-th step of the history."""
    common = {"id": f"sim-1.{attempt}.{n}", "at": T0 + timedelta(seconds=n), "run_id": "run-1", "sim_id": "sim-1", "attempt": attempt}
    match kind:
        case "launch":
            return ev.SimLaunched(**common, launcher_ref="1234", host=f"h{attempt}", config_digests={})  # type: ignore[arg-type]
        case "beat":
            return ev.SimHeartbeat(**common, kernels_done=0, current_kernel=None, latest=ev.SimTotals())  # type: ignore[arg-type]
        case "kernel":
            return ev.KernelFinished(**common, kernel_index=0, uid=1, name="k", gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0, sim_time_ns=1.0)  # type: ignore[arg-type]
        case "file":
            return ev.SimFileStored(**common, name="f", size=1, content_type="text/plain", object_name="o", digest="d")  # type: ignore[arg-type]
        case _:
            return ev.SimFinished(**common, outcome="succeeded" if kind == "succeed" else "failed", exit_code=0)  # type: ignore[arg-type]


FACTS = ("launch", "beat", "kernel", "file", "succeed", "fail")

# One step of a sim's history: a runner's command, or an event the log holds whoever sent it
# (a stale runner's fact, which no decision saw).
steps = st.one_of(
    st.tuples(st.just("claim"), st.booleans()),
    st.tuples(st.just("record"), st.sampled_from(FACTS[:4]), st.integers(-2, 1)),
    st.tuples(st.just("finish"), st.booleans(), st.booleans(), st.integers(-1, 0)),
    st.tuples(st.just("give up")),
    st.tuples(st.just("cancel")),
    st.tuples(st.just("logged"), st.sampled_from(FACTS), st.integers(0, MAX_ATTEMPTS + 1)),
)


def step(sim: SimState, n: int, s: tuple[object, ...]) -> tuple[list[ev.SimEvent | ev.RunCancelRequested], SimState]:
    """What the step stores, and the sim after it."""
    at = T0 + timedelta(seconds=n)
    stored: list[ev.SimEvent | ev.RunCancelRequested]
    match s:
        case ("claim", held):
            stored = list(decide(Claim(at=at, runner_id=f"r{n}", host="h", max_attempts=MAX_ATTEMPTS, held_elsewhere=bool(held)), sim))
        case ("record", str(kind), int(offset)):
            stored = list(decide(Record(fact(kind, max(0, sim.attempt + offset), n)), sim))  # type: ignore[arg-type]
        case ("finish", succeeded, timed_out, int(offset)):
            outcome = Outcome(bool(succeeded), 0 if succeeded else 1, None if succeeded else "boom")
            finish = Finish(event_id=f"f{n}", at=at, attempt=sim.attempt + offset, outcome=outcome, wall_time_limit_s=1.5 if timed_out else None)
            stored = list(decide(finish, sim))
        case ("give up",):
            stored = list(decide(GiveUp(at=at, reason="unrunnable", error="no runner has GPU config X"), sim))
        case ("cancel",):
            stored = [ev.RunCancelRequested(id=f"c{n}", at=at, run_id="run-1")]
        case ("logged", str(kind), int(attempt)):
            stored = [fact(kind, attempt, n)]
        case _:
            raise AssertionError(s)
    for event in stored:
        sim = evolve(sim, event)  # type: ignore[arg-type]
    return stored, sim


def lives(history: list[tuple[object, ...]]) -> list[tuple[tuple[object, ...], list[ev.SimEvent | ev.RunCancelRequested], SimState, SimState]]:
    """Each step with what it stored, the sim before and the sim after."""
    out = []
    sim = START
    for n, s in enumerate(history):
        stored, after = step(sim, n, s)
        out.append((s, stored, sim, after))
        sim = after
    return out


@given(st.lists(steps, max_size=40))
def test_a_finished_sim_never_changes_again(history: list[tuple[object, ...]]) -> None:
    for s, stored, before, after in lives(history):
        if before.finished:
            assert after == before
            if s[0] not in ("logged", "cancel"):  # what a runner decides: at most a file
                assert not [e for e in stored if isinstance(e, ev.SimClaimed | ev.SimFinished | ev.SimLaunched | ev.SimHeartbeat | ev.KernelFinished)]


@given(st.lists(steps, max_size=40), st.sampled_from(FACTS), st.integers(0, MAX_ATTEMPTS + 1))
def test_facts_of_a_stale_attempt_change_nothing(history: list[tuple[object, ...]], kind: str, attempt: int) -> None:
    sim = lives(history)[-1][3] if history else START
    stale = fact(kind, attempt, 99)
    if attempt != sim.attempt:
        assert evolve(sim, stale) is sim
        if not isinstance(stale, ev.SimFinished):
            assert decide(Record(stale), sim) == []
        assert decide(Finish(event_id="f", at=T0, attempt=attempt, outcome=Outcome(True, 0, None)), sim) == []


@given(st.lists(steps, max_size=60))
def test_attempts_never_exceed_the_limit(history: list[tuple[object, ...]]) -> None:
    for _, stored, _, after in lives(history):
        assert all(e.attempt <= MAX_ATTEMPTS for e in stored if isinstance(e, ev.SimClaimed))
        assert after.attempt <= MAX_ATTEMPTS


@given(st.lists(steps, max_size=30), st.lists(steps, max_size=30))
def test_cancel_ends_in_cancelled_unless_the_sim_had_finished(before: list[tuple[object, ...]], after: list[tuple[object, ...]]) -> None:
    history = [*before, ("cancel",), *after]
    states = lives(history)
    finished_before = states[len(before)][2]
    final = states[-1][3]
    if finished_before.finished:
        assert final.state == finished_before.state
    else:
        assert final.state == "cancelled"


def test_a_lost_runner_is_replaced_until_the_limit_then_the_sim_fails_saying_so() -> None:
    sim = START
    for attempt in range(1, MAX_ATTEMPTS + 1):
        (claim,) = decide(Claim(at=T0, runner_id=f"r{attempt}", host="h", max_attempts=MAX_ATTEMPTS), sim)
        assert isinstance(claim, ev.SimClaimed) and (claim.id, claim.attempt) == (f"sim-1.{attempt}.claim", attempt)
        sim = evolve(sim, claim)
        assert decide(Claim(at=T0, runner_id="other", host="h", max_attempts=MAX_ATTEMPTS, held_elsewhere=True), sim) == []
    (lost,) = decide(Claim(at=T0, runner_id="r9", host="h", max_attempts=MAX_ATTEMPTS), sim)
    assert isinstance(lost, ev.SimFinished) and lost.id == "sim-1.lost" and lost.attempt == MAX_ATTEMPTS
    assert lost.error == "runner lost: r3 on h stopped responding during attempt 3; gave up after 3 attempts"
    assert evolve(sim, lost).state == "failed"


def test_the_newest_life_event_is_what_a_runner_claims_after() -> None:
    launched = fact("launch", 2, 1)
    assert isinstance(launched, ev.SimLaunched)
    sim = sims.latest("run-1", "sim-1", launched)
    assert (sim.state, sim.attempt, sim.runner_id, sim.host) == ("running", 2, None, "h2")
    (lost,) = decide(Claim(at=T0, runner_id="r", host="h", max_attempts=2), sim)
    assert isinstance(lost, ev.SimFinished) and lost.error is not None and lost.error.startswith("runner lost: the runner on h2 ")
    assert sims.latest("run-1", "sim-1", None) == START


def test_a_sim_stopped_past_its_wall_time_fails_saying_so_with_the_simulators_exit_code() -> None:
    sim = SimState(run_id="run-1", sim_id="sim-1", state="running", attempt=1)
    finish = Finish(event_id="e", at=T0, attempt=1, outcome=Outcome(False, 143, "killed by signal 15 (SIGTERM)"), wall_time_limit_s=1.5)
    (finished,) = decide(finish, sim)
    assert isinstance(finished, ev.SimFinished)
    assert (finished.outcome, finished.exit_code, finished.error) == ("failed", 143, "ran longer than the wall-time limit of 1.5 s (CASCADE_SIM_TIMEOUT)")


def test_a_file_of_the_current_attempt_counts_after_the_sim_finished() -> None:
    cancelled = SimState(run_id="run-1", sim_id="sim-1", state="cancelled", attempt=1)
    file, beat = fact("file", 1, 1), fact("beat", 1, 2)
    assert isinstance(file, ev.SimFileStored) and isinstance(beat, ev.SimHeartbeat)
    assert decide(Record(file), cancelled) == [file]
    assert decide(Record(beat), cancelled) == []
    assert decide(GiveUp(at=T0, reason="unrunnable", error="x"), cancelled) == []
