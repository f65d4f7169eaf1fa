"""Which unfinished sims wait for a runner, and which need someone to act."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cascade_core.attention import Seen, Watch, attention, waiting
from cascade_core.runners import Runner

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LEASE_S = 30.0


def runner(id: str, *, configs: tuple[str, ...] = ("SM61_TITANX",), running: tuple[str, ...] = ()) -> Runner:
    return Runner(id=id, host="h", slots=2, running=list(running), configs=list(configs), started_at=NOW, last_seen_at=NOW)


def sim(state: str = "pending", *, age_s: float = 60, runner_id: str | None = None, silent_s: float | None = None, id: str = "sim-1") -> Seen:
    heard = None if silent_s is None else NOW - timedelta(seconds=silent_s)
    return Seen(id=id, state=state, gpu_config="SM61_TITANX", created_at=NOW - timedelta(seconds=age_s), runner_id=runner_id, last_heard=heard)


def watch(*runners: Runner) -> Watch:
    return Watch(list(runners), NOW, LEASE_S)


def test_a_pending_sim_no_live_runner_can_take_is_told_once_it_waited_a_while() -> None:
    assert attention(sim(age_s=3), watch()) is None, "a runner may be starting"
    assert attention(sim(age_s=42), watch()) == "no runner has taken this for 42 s; no live runner has GPU config SM61_TITANX"
    assert attention(sim(age_s=42), watch(runner("r1", configs=("SM7_QV100",)))) is not None
    assert attention(sim(age_s=600), watch(runner("r1", running=("sim-9", "sim-8")))) is None, "queued behind busy runners"


def test_a_sim_whose_runner_is_gone_is_lost_once_silent_for_a_lease() -> None:
    assert attention(sim("running", runner_id="r1", silent_s=5), watch()) is None, "its lease may still run"
    assert attention(sim("running", runner_id="r1", silent_s=45), watch()) == (
        "runner r1 lost: silent for 45 s; no live runner has GPU config SM61_TITANX to take over"
    )
    assert attention(sim("running", runner_id="r1", silent_s=45), watch(runner("r2"))) == "runner r1 lost: silent for 45 s"
    assert attention(sim("launching", runner_id="r1"), watch(runner("r2"))) == "runner r1 lost", "claimed, never heard of since"


def test_a_sim_a_live_runner_holds_or_that_finished_needs_nothing() -> None:
    assert attention(sim("running", runner_id="r1", silent_s=999), watch(runner("r1"))) is None
    assert attention(sim("launching", runner_id="old", silent_s=999), watch(runner("r2", running=("sim-1",)))) is None
    # A split sim's chunks, each listed on its own by the runner that runs it.
    assert attention(sim("running", runner_id="old", silent_s=999), watch(runner("r2", running=("sim-1.c3",)))) is None
    assert attention(sim("running", runner_id="old", silent_s=999), watch(runner("r2", running=("sim-10.c3",)))) is not None
    for state in ("succeeded", "failed", "cancelled"):
        assert attention(sim(state, runner_id="gone", silent_s=999), watch()) is None


def test_waiting_counts_the_unfinished_sims_no_live_runner_holds() -> None:
    sims = [
        sim(id="a"),  # pending: waiting
        sim("launching", id="b", runner_id="r1"),  # held by its claimer
        sim("running", id="c", runner_id="gone", silent_s=1),  # its runner is gone: waiting for another
        sim("running", id="d", runner_id="old"),  # listed by a live runner
        sim("succeeded", id="e", runner_id="gone"),
    ]
    assert waiting(sims, [runner("r1", running=("d",))]) == 2
    assert waiting(sims, []) == 4
