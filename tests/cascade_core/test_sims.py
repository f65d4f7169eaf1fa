"""The sim lifecycle decider without NATS: runners' commands and the log's events, in any
order hypothesis finds, against the rules `cascade_core/sims.py` states."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from cascade_core import events as ev
from cascade_core import sims, slurm, split
from cascade_core.sims import Claim, Finish, GiveUp, Outcome, Record, SimLife, decide, evolve

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
MAX_ATTEMPTS = 3
START = SimLife(run_id="run-1", sim_id="sim-1")


def fact(kind: str, attempt: int, n: int, chunk: int | None = None) -> sims.Fact | ev.SimFinished:
    """A runner's fact of `attempt` (of a chunk of the sim), the n-th step of the history."""
    common = {
        "id": f"sim-1.{chunk}.{attempt}.{n}", "at": T0 + timedelta(seconds=n), "run_id": "run-1", "sim_id": "sim-1", "attempt": attempt,
        "chunk": chunk,
    }
    match kind:
        case "launch":
            return ev.SimLaunched(**common, launcher_ref="1234", host=f"h{attempt}", config_digests={})  # type: ignore[arg-type]
        case "beat":
            return ev.SimHeartbeat(**common, kernels_done=0, current_kernel=None, latest=ev.SimMetrics())  # type: ignore[arg-type]
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


def step(sim: SimLife, n: int, s: tuple[object, ...]) -> tuple[list[ev.SimEvent | ev.RunCancelRequested], SimLife]:
    """What the step stores, and the sim after it."""
    at = T0 + timedelta(seconds=n)
    stored: list[ev.SimEvent | ev.RunCancelRequested]
    match s:
        case ("claim", held):
            stored = list(decide(Claim(at=at, runner_id=f"r{n}", host="h", max_attempts=MAX_ATTEMPTS, held_elsewhere=bool(held)), sim))
        case ("record", str(kind), int(offset)):
            stored = list(decide(Record(fact(kind, max(0, sim.attempt + offset), n, sim.chunk)), sim))  # type: ignore[arg-type]
        case ("finish", succeeded, timed_out, int(offset)):
            outcome = Outcome(bool(succeeded), 0 if succeeded else 1, None if succeeded else "boom")
            finish = Finish(event_id=f"f{n}", at=at, attempt=sim.attempt + offset, outcome=outcome, wall_time_limit_s=1.5 if timed_out else None)
            stored = list(decide(finish, sim))
        case ("give up",):
            stored = list(decide(GiveUp(at=at, reason="unrunnable", error="no runner has GPU config X"), sim))
        case ("cancel",):
            stored = [ev.RunCancelRequested(id=f"c{n}", at=at, run_id="run-1")]
        case ("logged", str(kind), int(attempt)):
            stored = [fact(kind, attempt, n, sim.chunk)]
        case _:
            raise AssertionError(s)
    for event in stored:
        sim = evolve(sim, event)  # type: ignore[arg-type]
    return stored, sim


def lives(history: list[tuple[object, ...]]) -> list[tuple[tuple[object, ...], list[ev.SimEvent | ev.RunCancelRequested], SimLife, SimLife]]:
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
    sim = SimLife(run_id="run-1", sim_id="sim-1", state="running", attempt=1)
    finish = Finish(event_id="e", at=T0, attempt=1, outcome=Outcome(False, 143, "killed by signal 15 (SIGTERM)"), wall_time_limit_s=1.5)
    (finished,) = decide(finish, sim)
    assert isinstance(finished, ev.SimFinished)
    assert (finished.outcome, finished.exit_code, finished.error) == ("failed", 143, "ran longer than the wall-time limit of 1.5 s (CASCADE_SIM_TIMEOUT)")


def test_a_file_of_the_current_attempt_counts_after_the_sim_finished() -> None:
    cancelled = SimLife(run_id="run-1", sim_id="sim-1", state="cancelled", attempt=1)
    file, beat = fact("file", 1, 1), fact("beat", 1, 2)
    assert isinstance(file, ev.SimFileStored) and isinstance(beat, ev.SimHeartbeat)
    assert decide(Record(file), cancelled) == [file]
    assert decide(Record(beat), cancelled) == []
    assert decide(GiveUp(at=T0, reason="unrunnable", error="x"), cancelled) == []


# --- a split sim: its chunks, each a lifecycle of its own ------------------------------------

CHUNKS = 3


def chunk_lives(history: list[tuple[int, tuple[object, ...]]]) -> list[tuple[int, tuple[object, ...], list[SimLife], list[SimLife]]]:
    """Each step of one chunk (whose runner decides on that chunk alone), with every chunk
    before and after it, evolved as the fold evolves them."""
    chunks = [SimLife(run_id="run-1", sim_id="sim-1", chunk=i) for i in range(CHUNKS)]
    out = []
    for n, (i, s) in enumerate(history):
        stored, _ = step(chunks[i], n, s)
        after = list(chunks)
        for event in stored:
            after = sims.evolve_split(after, event)  # type: ignore[arg-type]
        out.append((i, s, chunks, after))
        chunks = after
    return out


chunk_steps = st.lists(st.tuples(st.integers(0, CHUNKS - 1), steps), max_size=50)


@given(chunk_steps)
def test_a_chunk_changes_no_other_chunk_but_by_failing(history: list[tuple[int, tuple[object, ...]]]) -> None:
    for i, s, before, after in chunk_lives(history):
        for j in range(CHUNKS):
            if j == i or s == ("cancel",) or after[j] == before[j]:
                continue
            assert after[i].state == "failed" and after[j].state == "cancelled" and not before[j].finished


@given(chunk_steps)
def test_a_split_sim_fails_once_a_chunk_fails_and_never_changes_once_finished(history: list[tuple[int, tuple[object, ...]]]) -> None:
    for _, _, before, after in chunk_lives(history):
        was, now = split.sim_state([c.state for c in before]), split.sim_state([c.state for c in after])
        if was in sims.FINISHED:
            assert now == was
        if any(c.state == "failed" for c in after):
            assert now == "failed" and all(c.finished for c in after)
        assert (now == "succeeded") == all(c.state == "succeeded" for c in after)
        assert all(c.attempt <= MAX_ATTEMPTS for c in after)


@given(chunk_steps, chunk_steps)
def test_cancel_ends_every_chunk(before: list[tuple[int, tuple[object, ...]]], after: list[tuple[int, tuple[object, ...]]]) -> None:
    states = chunk_lives([*before, (0, ("cancel",)), *after])
    at_cancel, final = states[len(before)][2], states[-1][3]
    assert all(c.finished for c in final)
    was = split.sim_state([c.state for c in at_cancel])
    assert split.sim_state([c.state for c in final]) == (was if was in sims.FINISHED else "cancelled")


def test_a_chunks_claims_and_failures_name_the_chunk() -> None:
    chunk = SimLife(run_id="run-1", sim_id="sim-1", chunk=2)
    (claim,) = decide(Claim(at=T0, runner_id="r", host="h", max_attempts=1), chunk)
    assert isinstance(claim, ev.SimClaimed) and (claim.id, claim.chunk) == ("sim-1.c2.1.claim", 2)
    (lost,) = decide(Claim(at=T0, runner_id="r2", host="h", max_attempts=1), evolve(chunk, claim))
    assert isinstance(lost, ev.SimFinished) and (lost.id, lost.chunk, lost.outcome) == ("sim-1.c2.lost", 2, "failed")
    assert sims.latest("run-1", "sim-1", claim, 2) == evolve(chunk, claim)


def test_a_retry_makes_a_failed_or_cancelled_sim_wait_for_its_next_attempt() -> None:
    (claim,) = decide(Claim(at=T0, runner_id="r1", host="h", max_attempts=MAX_ATTEMPTS), START)
    running = evolve(evolve(START, claim), fact("launch", 1, 1))
    failed = evolve(running, fact("fail", 1, 2))
    cancelled = evolve(running, ev.RunCancelRequested(id="c", at=T0, run_id="run-1"))
    for ended in (failed, cancelled):
        waiting = sims.retried(ended, 2)
        assert (waiting.state, waiting.attempt, waiting.runner_id, waiting.under_way) == ("pending", 2, None, False)
        assert sims.retried(waiting, 2) is waiting, "the same retry again changes nothing"
        # The attempt before says nothing any more, however late it comes.
        for kind in FACTS:
            assert evolve(waiting, fact(kind, 1, 3)) is waiting
        (again,) = decide(Claim(at=T0, runner_id="r2", host="h", max_attempts=MAX_ATTEMPTS, first_attempt=2), waiting)
        assert isinstance(again, ev.SimClaimed) and (again.id, again.attempt) == ("sim-1.2.claim", 2)
        assert evolve(waiting, again).state == "launching"
    assert sims.retried(running, 2) is running and sims.retried(evolve(running, fact("succeed", 1, 2)), 2).state == "succeeded"


def test_a_runner_takes_a_retrys_request_for_the_attempt_it_asks_for() -> None:
    # The life subject holds the first attempt's claim: the sim was cancelled while it ran.
    claimed = sims.latest("run-1", "sim-1", ev.SimClaimed(id="x", at=T0, run_id="run-1", sim_id="sim-1", attempt=1, runner_id="r1", host="h"))
    waiting = sims.awaiting(claimed, 2)
    assert (waiting.state, waiting.attempt) == ("pending", 2)
    assert sims.awaiting(claimed, 0) is claimed and sims.awaiting(claimed, 1) is claimed
    # The retried attempt's runner is lost: the limit counts from the attempt the retry began.
    sim = waiting
    for attempt in range(2, 2 + MAX_ATTEMPTS):
        (claim,) = decide(Claim(at=T0, runner_id=f"r{attempt}", host="h", max_attempts=MAX_ATTEMPTS, first_attempt=2), sim)
        assert isinstance(claim, ev.SimClaimed) and claim.attempt == attempt
        sim = evolve(sim, claim)
    (lost,) = decide(Claim(at=T0, runner_id="r9", host="h", max_attempts=MAX_ATTEMPTS, first_attempt=2), sim)
    assert isinstance(lost, ev.SimFinished) and lost.id == "sim-1.r2.lost" and lost.error.endswith(f"gave up after {MAX_ATTEMPTS} attempts")
    (unrunnable,) = decide(GiveUp(at=T0, reason="unrunnable", error="no runner has GPU config X", first_attempt=2), waiting)
    assert isinstance(unrunnable, ev.SimFinished) and (unrunnable.id, unrunnable.attempt) == ("sim-1.r2.unrunnable", 2)
    assert evolve(waiting, unrunnable).state == "failed"


def ended(state: str, runner_id: str = "slurm-c-12") -> ev.RunnerEnded:
    return slurm.ended(
        runner_id,
        slurm.JobEnd(job_id="12", state=state, exit_code="0:15", reason="TimeLimit" if state == "TIMEOUT" else None),
        event_id="e",
        at=T0,
    )


def test_a_runner_its_job_ended_at_a_limit_fails_its_sim_at_once_with_slurms_words() -> None:
    launched = ev.SimLaunched(
        id="l", at=T0, run_id="run-1", sim_id="sim-1", attempt=1, launcher_ref="12", host="n1", config_digests={}, runner_id="slurm-c-12"
    )
    sim = sims.latest("run-1", "sim-1", launched)
    assert sim.runner_id == "slurm-c-12"
    (failed,) = decide(Claim(at=T0, runner_id="r", host="h", max_attempts=MAX_ATTEMPTS, ended=ended("TIMEOUT")), sim)
    assert isinstance(failed, ev.SimFinished) and failed.id == "sim-1.1.ended" and failed.outcome == "failed"
    assert failed.error == "Slurm job 12 ended: TIMEOUT (reason TimeLimit, exit code 0:15) during attempt 1"
    # Another runner's end says nothing of this sim: it is lost as any other, and claimed again.
    (claim,) = decide(Claim(at=T0, runner_id="r", host="h", max_attempts=MAX_ATTEMPTS, ended=ended("TIMEOUT", "slurm-c-13")), sim)
    assert isinstance(claim, ev.SimClaimed) and claim.attempt == 2


def test_a_runner_its_job_ended_otherwise_is_lost_and_the_last_failure_says_why() -> None:
    sim = SimLife(run_id="run-1", sim_id="sim-1", state="running", attempt=1, runner_id="slurm-c-12", host="n1")
    (claim,) = decide(Claim(at=T0, runner_id="r", host="h", max_attempts=2, ended=ended("PREEMPTED")), sim)
    assert isinstance(claim, ev.SimClaimed) and claim.attempt == 2
    sim = msgspec.structs.replace(sim, attempt=2)
    (lost,) = decide(Claim(at=T0, runner_id="r", host="h", max_attempts=2, ended=ended("NODE_FAIL")), sim)
    assert isinstance(lost, ev.SimFinished) and lost.id == "sim-1.lost"
    assert lost.error == "runner lost: Slurm job 12 ended: NODE_FAIL (exit code 0:15) during attempt 2; gave up after 2 attempts"


def test_only_a_claim_taking_over_from_a_lost_runner_resumes_where_it_stopped() -> None:
    where = ev.Resume(first=11, warmup=2)
    resume = Claim(at=T0, runner_id="r2", host="h", max_attempts=MAX_ATTEMPTS, resume=where)
    # A first claim, and a retry's (a failed sim is run again from its first launch), start over.
    (first,) = decide(resume, START)
    assert isinstance(first, ev.SimClaimed) and first.resume is None
    failed = evolve(evolve(START, first), fact("fail", 1, 1))
    (retry,) = decide(resume, sims.retried(failed, 2))
    assert isinstance(retry, ev.SimClaimed) and (retry.attempt, retry.resume) == (2, None)
    # Its runner lost: the next attempt carries on from where the runner found it stopped.
    (taken_over,) = decide(resume, evolve(START, first))
    assert isinstance(taken_over, ev.SimClaimed) and (taken_over.attempt, taken_over.resume) == (2, where)
    # Still held by a live runner: nothing; at the limit: the sim fails as before.
    assert decide(msgspec.structs.replace(resume, held_elsewhere=True), evolve(START, first)) == []
    (lost,) = decide(msgspec.structs.replace(resume, max_attempts=1), evolve(START, first))
    assert isinstance(lost, ev.SimFinished) and lost.outcome == "failed"


def test_a_cancel_ends_the_requests_asked_for_before_it_whatever_retries_follow() -> None:
    def request(attempt: int, sim_id: str = "sim-1", chunk: int | None = None) -> ev.SimQueued:
        return ev.SimQueued(id="q", at=T0, run_id="run-1", sim_id=sim_id, chunk=chunk, trace_id="t", gpu_config="C", kernels_total=3, attempt=attempt)

    def spec(sim_id: str) -> ev.SimSpec:
        return ev.SimSpec(sim_id=sim_id, gpu_config="C", replica=0)

    created = ev.RunCreated(id="c", at=T0, run_id="run-1", trace_id="t", entries=[], sims=[spec("sim-1")], kernels_total=3)
    cancel = ev.RunCancelRequested(id="x", at=T0, run_id="run-1")
    cancel_again = ev.RunCancelRequested(id="y", at=T0, run_id="run-1")
    retry = ev.RunRetryRequested(
        id="r", at=T0, run_id="run-1", trace_id="t", kernels_total=3,
        sims=[ev.RetriedSim(sim_id="sim-1", gpu_config="C", attempt=2)],
        chunks=[ev.RetriedChunk(sim_id="sim-2", gpu_config="C", chunk=1, split=ev.Split(1, 0), attempt=3)],
    )
    added = ev.RunEntriesAdded(id="a", at=T0, run_id="run-1", trace_id="t", kernels_total=3, entries=[], sims=[spec("sim-3")])
    history = [created, cancel, retry, added]
    assert sims.cancel_of(request(0), [created]) is None
    assert sims.cancel_of(request(0), history) is cancel, "queued before the cancel: dropped though a retry followed"
    assert sims.cancel_of(request(2), history) is None, "the retry's own request"
    assert sims.cancel_of(request(2), [*history, cancel_again]) is cancel_again
    assert sims.cancel_of(request(3, "sim-2", 1), history) is None and sims.cancel_of(request(3, "sim-2", 0), [*history, cancel_again]) is None
    assert sims.cancel_of(request(3, "sim-2", 1), [*history, cancel_again]) is cancel_again
    assert sims.cancel_of(request(0, "sim-3"), history) is None, "added after the cancel"
