"""A sim's domain state, evolved by its events without any storage: a sim whole and a chunk
of a split sim live by one mechanism (`cascade_core/sim.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest

from cascade_core import events as ev
from cascade_core import sim as s
from cascade_core.sim import Resumed

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
KERNELS = 20


def at(n: float) -> datetime:
    return T0 + timedelta(seconds=n)


def created(split: ev.Split | None = None) -> s.Sim:
    spec = ev.SimSpec(sim_id="sim-1", gpu_config="SM7_QV100", replica=0, split=split)
    run = ev.RunCreated(id="run-1.created", at=T0, run_id="run-1", trace_id="tr", entries=[], sims=[spec], kernels_total=KERNELS)
    return s.new(run, spec)


def common(n: float, attempt: int, chunk: int | None) -> dict[str, Any]:
    return {"id": f"e{n}.{attempt}.{chunk}", "at": at(n), "run_id": "run-1", "sim_id": "sim-1", "attempt": attempt, "chunk": chunk}


def claim(n: float, attempt: int, chunk: int | None = None, resume: ev.Resume | None = None, host: str = "h") -> ev.SimClaimed:
    return ev.SimClaimed(**common(n, attempt, chunk), runner_id=f"r{attempt}", host=host, resume=resume)


def launch(n: float, attempt: int, chunk: int | None = None) -> ev.SimLaunched:
    return ev.SimLaunched(**common(n, attempt, chunk), launcher_ref="1", host="h", config_digests={"gpgpusim.config": "abc"})


def beat(n: float, attempt: int, done: int, cycles: float, lines: list[str], first: int, chunk: int | None = None) -> ev.SimHeartbeat:
    totals = s.totals(cycles, 2 * cycles, 10.0)
    return ev.SimHeartbeat(
        **common(n, attempt, chunk), kernels_done=done, current_kernel="k", latest=totals, first_line_seq=first, log="\n".join(lines)
    )


def finish(
    n: float, attempt: int, chunk: int | None = None, outcome: Literal["succeeded", "failed"] = "succeeded", error: str | None = None
) -> ev.SimFinished:
    return ev.SimFinished(**common(n, attempt, chunk), outcome=outcome, exit_code=0 if outcome == "succeeded" else 1, error=error)


def lived(sim: s.Sim, *events: s.Evolving) -> s.Sim:
    for e in events:
        sim = s.evolve(sim, e)
    return sim


def test_a_sim_whole_lives_from_claim_to_success_with_its_progress_and_totals() -> None:
    sim = lived(created(), claim(1, 1), launch(2, 1), beat(3, 1, 2, 100.0, ["a", "b"], 1), finish(4, 1))
    assert (sim.state, sim.attempt, sim.runner_id, sim.kernels_done, sim.log_seq, sim.log_lines) == ("succeeded", 1, "r1", 2, 2, ["a", "b"])
    assert (sim.gpu_tot_sim_cycle, sim.gpu_tot_sim_insn, sim.gpu_tot_ipc) == (100.0, 200.0, 2.0)
    assert (sim.started_at, sim.finished_at, sim.config_digests) == (at(2), at(4), {"gpgpusim.config": "abc"})
    assert s.evolve(sim, beat(5, 1, 3, 150.0, ["c"], 3)) is sim, "a finished sim changes no more"


def test_an_event_that_changes_nothing_leaves_the_sim_itself() -> None:
    sim = lived(created(), claim(1, 1), beat(3, 1, 2, 100.0, ["a", "b"], 1))
    for stale in (beat(2, 1, 1, 50.0, ["a"], 1), claim(1, 1), finish(4, 7), beat(4, 2, 5, 1.0, [], 1)):
        assert s.evolve(sim, stale) is sim


def test_a_lost_runners_attempt_is_past_and_the_next_starts_over() -> None:
    sim = lived(created(), claim(1, 1), launch(2, 1), beat(3, 1, 2, 100.0, ["a"], 1), claim(10, 2))
    assert (sim.state, sim.attempt, sim.kernels_done, sim.log_seq, sim.log_lines, sim.gpu_tot_ipc) == ("launching", 2, 0, 0, [], None)
    (past,) = sim.attempts
    assert (past.attempt, past.state, past.error) == (1, "lost", "runner lost: r1 on h stopped responding")


def test_a_resumed_sim_whole_keeps_what_its_lost_attempt_recorded_before_the_resume() -> None:
    sim = lived(created(), claim(1, 1), launch(2, 1), beat(3, 1, 5, 100.0, ["a", "b"], 1))
    sim = s.evolve(sim, claim(10, 2, resume=ev.Resume(first=6, warmup=2)))
    assert (sim.kernels_done, sim.kernels_recorded, sim.log_seq, sim.log_lines, sim.gpu_tot_sim_cycle) == (5, 5, 2, ["a", "b"], 100.0)
    assert (sim.last_heartbeat_at, sim.sim_rate_ips, sim.resumed) == (None, None, [Resumed(attempt=2, first=6, warmup=2)])


def test_a_retry_waits_for_the_attempt_it_asked_for_its_failure_past() -> None:
    sim = lived(created(), claim(1, 1), launch(2, 1), finish(3, 1, outcome="failed", error="boom"))
    retry = ev.RunRetryRequested(
        id="retry", at=at(4), run_id="run-1", trace_id="tr", kernels_total=KERNELS, sims=[ev.RetriedSim(sim_id="sim-1", gpu_config="SM7_QV100", attempt=2)]
    )
    sim = s.evolve(sim, retry)
    assert (sim.state, sim.attempt, sim.error, sim.exit_code, sim.finished_at, sim.started_at) == ("pending", 2, None, None, None, None)
    assert [(a.attempt, a.state, a.error) for a in sim.attempts] == [(1, "failed", "boom")]


def test_a_split_sim_is_stitched_from_its_chunks() -> None:
    sim = created(ev.Split(kernels_per_chunk=10, warmup=2))
    sim = lived(sim, claim(1, 1, chunk=0), claim(1, 1, chunk=1), launch(2, 1, chunk=1))
    assert (sim.state, sim.attempt, sim.started_at) == ("running", 1, at(2))
    sim = lived(sim, beat(3, 1, 4, 100.0, ["a"], (1 << 40) + 1, chunk=0), beat(4, 1, 6, 300.0, ["b"], (2 << 40) + 1, chunk=1))
    assert (sim.kernels_done, sim.gpu_tot_sim_cycle, sim.gpu_tot_sim_insn, sim.gpu_tot_ipc, sim.sim_rate_ips) == (10, 400.0, 800.0, 2.0, 20.0)
    assert (sim.log_lines, sim.log_seq, sim.last_heartbeat_at) == (["a", "b"], (2 << 40) + 1, at(4))
    sim = lived(sim, finish(5, 1, chunk=0, outcome="failed", error="boom"))
    assert sim.split is not None
    assert (sim.state, [c.state for c in sim.split.chunks]) == ("failed", ["failed", "cancelled"])
    assert sim.error == "chunk 1 of 2: launches 1-10: boom"


@pytest.mark.parametrize("resume", [None, ev.Resume(first=14, warmup=2)], ids=["new attempt", "resumed"])
def test_a_chunk_starts_an_attempt_as_a_sim_whole_does(resume: ev.Resume | None) -> None:
    """One mechanism: a new attempt's progress starts over, or from what a resume keeps, for
    a chunk as for a sim whole; its heartbeats are heard by their own clock, so a runner whose
    clock is behind the lost one's is not ignored."""
    first_line = (2 << 40) + 1
    whole = lived(created(), claim(1, 1), beat(50, 1, 3, 100.0, ["a"], 1))
    split = lived(created(ev.Split(kernels_per_chunk=10, warmup=2)), claim(1, 1, chunk=1), beat(50, 1, 3, 100.0, ["a"], first_line, chunk=1))
    whole_resume = None if resume is None else ev.Resume(first=resume.first - 10, warmup=2)  # the chunk's launches start at 11
    whole = lived(whole, claim(60, 2, resume=whole_resume))
    split = lived(split, claim(60, 2, chunk=1, resume=resume))
    assert split.split is not None
    chunk = split.split.chunks[1]
    progress = ("kernels_done", "gpu_tot_sim_cycle", "gpu_tot_sim_insn", "sim_rate_ips", "last_heartbeat_at")
    assert {f: getattr(chunk, f) for f in progress} == {f: getattr(whole, f) for f in progress}
    behind = beat(40, 2, 4, 120.0, [], (2 << 40) + (1 << 32) + 1, chunk=1)  # its host's clock is behind the lost one's
    after = s.evolve(split, behind)
    assert after.split is not None
    assert (after.split.chunks[1].kernels_done, after.kernels_done) == (4, 4)


def test_a_chunk_beyond_the_split_cannot_be_applied() -> None:
    sim = created(ev.Split(kernels_per_chunk=10, warmup=2))
    with pytest.raises(ValueError, match="has 2 chunks, not a chunk 5"):
        s.evolve(sim, claim(1, 1, chunk=5))



CUT = ev.CutShort(
    limit_option="-gpgpu_max_cycle", limit_value=1000, kernels_done=2, kernels_total=10,
    partial=ev.PartialKernel(uid=3, name="k", gpu_sim_cycle=400, gpu_sim_insn=0),
)


def test_a_sim_the_simulator_cut_short_at_its_limit_says_so_and_succeeds() -> None:
    cut = ev.SimFinished(**common(5, 1, None), outcome="succeeded", exit_code=0, cut_short=CUT)
    sim = lived(created(), claim(1, 1), launch(2, 1), beat(3, 1, 2, 100.0, ["a"], 1), cut)
    assert (sim.state, sim.error, sim.cut_short) == ("succeeded", None, CUT)
    assert s.cut_short_said(CUT) == (
        "stopped at its limit -gpgpu_max_cycle 1000: 2 of 10 launches simulated; launch 3, cut after 400 cycles, is left out of every total"
    )
    unlisted = ev.CutShort(kernels_done=2, kernels_total=10)
    assert s.cut_short_said(unlisted) == "ended with 8 launches of its list not run: 2 of 10 launches simulated"
    whole = lived(created(), claim(1, 1), launch(2, 1), beat(3, 1, 2, 100.0, ["a"], 1), finish(5, 1))
    assert (whole.state, whole.cut_short) == ("succeeded", None)
    retry = ev.RunRetryRequested(
        id="retry", at=at(6), run_id="run-1", trace_id="tr", kernels_total=KERNELS, sims=[ev.RetriedSim(sim_id="sim-1", gpu_config="SM7_QV100", attempt=2)]
    )
    failed = ev.SimFinished(**common(5, 1, None), outcome="failed", exit_code=1, cut_short=CUT)
    again = lived(lived(created(), claim(1, 1), beat(4, 1, 2, 100.0, ["a"], 1), failed), retry)
    assert again.cut_short is None, "a failure is no cut short, and a new attempt starts without"


def test_a_split_sim_cut_short_in_a_chunk_says_so_over_all_its_launches() -> None:
    sim = lived(created(ev.Split(kernels_per_chunk=10, warmup=2)), claim(1, 1, chunk=0), claim(1, 1, chunk=1))
    cut = ev.SimFinished(**common(5, 1, 1), outcome="succeeded", exit_code=0, cut_short=CUT)
    sim = lived(sim, beat(2, 1, 10, 100.0, ["a"], 1, chunk=0), beat(3, 1, 2, 50.0, ["b"], 1 << 40, chunk=1), cut)
    assert (sim.state, sim.cut_short) == ("running", CUT), "said as soon as its chunk is"
    sim = lived(sim, finish(6, 1, chunk=0))
    assert sim.state == "succeeded"
    assert sim.cut_short == ev.CutShort(limit_option="-gpgpu_max_cycle", limit_value=1000, kernels_done=12, kernels_total=KERNELS, partial=CUT.partial)
