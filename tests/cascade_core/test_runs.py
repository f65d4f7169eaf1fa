"""The run commands' decisions, pure: a command and a view in, events or a rejection out."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from cascade_core import events as ev
from cascade_core.gpu_configs import GpuConfig
from cascade_core.run import Run, run_state
from cascade_core.runs import (
    AddEntries,
    BadEntry,
    CancelRun,
    CreateRun,
    DeleteRun,
    KeyReused,
    NotFast,
    RequestReference,
    RetryRun,
    RunActive,
    RunCreate,
    RunEntries,
    RunEntry,
    SampleRun,
    SplitSpec,
    TraceNotFound,
    TooManySims,
    TraceNotUsable,
    check_add,
    check_create,
    decide_add,
    decide_cancel,
    decide_create,
    decide_delete,
    decide_reference,
    decide_retry,
)
from cascade_core.trace import Trace
from cascade_core.trace import new as new_trace

AT = datetime(2026, 11, 8, 8, 59, 3, 24065, tzinfo=UTC)
CONFIGS = [
    GpuConfig(name="SM7_QV100", arch="sm_70", core_clock_mhz=1132.0),
    GpuConfig(name="SM86_RTX3070", arch="sm_86", core_clock_mhz=1132.0),
    GpuConfig(name="SM86_RTX3080", arch="sm_86", core_clock_mhz=1440.0),
    GpuConfig(name="SM90_H100", arch="sm_90", core_clock_mhz=1980.0),
]
# A ready trace as the upload leaves it: its state from its first event, what the upload found.
TRACE = msgspec.structs.replace(
    new_trace(ev.TraceUploadStarted(id="upload", at=AT, trace_id="demo", content_type="application/x-tar")),
    state="ready", trace_gpu_arch="sm_86", suggested_sim_config="SM86_RTX3070", kernel_count=20, bytes=16890250, has_step_timeline=True,
)


def create(*entries: tuple[str, int], trace_id: str = "demo") -> CreateRun:
    body = RunCreate(trace_id, [RunEntry(gpu_config=name, count=count) for name, count in entries])
    total = sum(count for _, count in entries)
    return CreateRun(event_id="e1", at=AT, run_id="run-1", sim_ids=[f"sim-{i}" for i in range(total)], body=body)


def summary(state: str, counts: dict[str, int], *, sample: bool = False) -> Run:
    return Run(
        id="run-1",
        trace_id="demo",
        created_at=AT,
        state=state,
        entries=[ev.ConfigCount(gpu_config="SM86_RTX3070", count=2)],
        sim_counts=counts,
        sample=sample,
        kernels_total=20,
    )


def test_create_fans_each_entry_out_by_replica_in_entry_order() -> None:
    [created] = decide_create(create(("SM86_RTX3080", 1), ("SM86_RTX3070", 2)), TRACE, CONFIGS, max_sims=1024)
    assert created == ev.RunCreated(
        id="e1",
        at=AT,
        run_id="run-1",
        trace_id="demo",
        entries=[ev.ConfigCount(gpu_config="SM86_RTX3080", count=1), ev.ConfigCount(gpu_config="SM86_RTX3070", count=2)],
        sims=[
            ev.SimSpec(sim_id="sim-0", gpu_config="SM86_RTX3080", replica=0),
            ev.SimSpec(sim_id="sim-1", gpu_config="SM86_RTX3070", replica=0),
            ev.SimSpec(sim_id="sim-2", gpu_config="SM86_RTX3070", replica=1),
        ],
        kernels_total=20,
    )


def test_entries_naming_one_config_continue_its_replica_numbers() -> None:
    [created] = decide_create(create(("SM86_RTX3070", 2), ("SM86_RTX3070", 1)), TRACE, CONFIGS, max_sims=1024)
    assert [s.replica for s in created.sims] == [0, 1, 2]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("trace", "error", "detail"),
    [
        (None, TraceNotFound, "trace demo not found"),
        (msgspec.structs.replace(TRACE, state="failed"), TraceNotUsable, "trace demo is failed, not ready"),
        (msgspec.structs.replace(TRACE, state="processing"), TraceNotUsable, "trace demo is processing, not ready"),
        (msgspec.structs.replace(TRACE, sample=True), TraceNotUsable, "trace demo is a sample, which has no instruction traces"),
    ],
)
def test_create_needs_a_ready_trace_that_is_not_a_sample(trace: Trace | None, error: type[Exception], detail: str) -> None:
    with pytest.raises(error) as raised:
        decide_create(create(("SM86_RTX3070", 1)), trace, CONFIGS, max_sims=1024)
    assert str(raised.value) == detail


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ("SM90_H100", "SM90_H100 is sm_90 but trace demo is sm_86"),
        ("SM99_NOPE", "unknown GPU config SM99_NOPE: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_86 traces: SM86_RTX3070, SM86_RTX3080; 2 more of other archs)"),
        (
            "SM86_RTX307",
            "unknown GPU config SM86_RTX307: no live runner has it, nor this server's Accel-Sim install (configs offered for sm_86 traces: SM86_RTX3070, "
            "SM86_RTX3080; 2 more of other archs); did you mean SM86_RTX3070?",
        ),
    ],
)
def test_every_entry_needs_a_known_config_of_the_traces_arch(config: str, detail: str) -> None:
    with pytest.raises(BadEntry) as raised:
        decide_create(create(("SM86_RTX3070", 1), (config, 1)), TRACE, CONFIGS, max_sims=1024)
    assert str(raised.value) == detail


def test_a_run_may_have_at_most_max_sims_sims_which_caps_its_entries_too() -> None:
    assert check_create(create(("SM86_RTX3070", 64), ("SM86_RTX3080", 64)).body, TRACE, CONFIGS, max_sims=128) == TRACE
    with pytest.raises(TooManySims) as raised:
        check_create(create(("SM86_RTX3070", 64), ("SM86_RTX3080", 65)).body, TRACE, CONFIGS, max_sims=128)
    assert str(raised.value) == (
        "the run asks for 129 sims in 2 entries, more than this server's limit of 128 sims per run "
        "(CASCADE_MAX_SIMS_PER_RUN); split it into smaller runs"
    )
    with pytest.raises(TooManySims, match="asks for 129 sims in 129 entries"):
        decide_create(create(*[("SM86_RTX3070", 1)] * 129), TRACE, CONFIGS, max_sims=128)
    with pytest.raises(TraceNotFound):  # the reference's reasons come first
        check_create(create(("SM86_RTX3070", 129)).body, None, CONFIGS, max_sims=128)


def test_cancel_asks_once_while_a_sim_is_unfinished() -> None:
    cmd = CancelRun(event_id="e2", at=AT)
    assert decide_cancel(summary("active", {"running": 1, "succeeded": 1}), cmd) == [
        ev.RunCancelRequested(id="e2", at=AT, run_id="run-1")
    ]
    assert decide_cancel(summary("cancelled", {"cancelled": 1, "succeeded": 1}), cmd) == []
    assert decide_cancel(summary("succeeded", {"succeeded": 2}), cmd) == []


def test_cancel_leaves_a_sample_run_alone() -> None:
    assert decide_cancel(summary("active", {"pending": 1}, sample=True), CancelRun(event_id="e2", at=AT)) == []


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled"])
def test_delete_takes_a_run_none_of_whose_sims_is_unfinished(state: str) -> None:
    run = summary(state, {state: 1, "succeeded": 1})
    assert decide_delete(run, DeleteRun(event_id="e3", at=AT)) == [ev.RunDeleted(id="e3", at=AT, run_id="run-1")]


def test_delete_refuses_an_active_run_and_says_to_cancel_it_first() -> None:
    with pytest.raises(RunActive) as refused:
        decide_delete(summary("active", {"pending": 1, "running": 1, "succeeded": 1}), DeleteRun(event_id="e3", at=AT))
    assert str(refused.value) == (
        "run run-1 is active (2 of its sims unfinished): cancel it first (POST /api/runs/run-1/cancel, or cascade run cancel run-1), "
        "then delete it"
    )


@pytest.mark.parametrize(
    ("counts", "state"),
    [
        ({"pending": 1, "cancelled": 1}, "active"),
        ({"running": 1}, "active"),
        ({"launching": 1, "failed": 3}, "active"),
        ({"succeeded": 2, "failed": 1, "cancelled": 1}, "cancelled"),
        ({"succeeded": 2, "failed": 1}, "failed"),
        ({"succeeded": 2}, "succeeded"),
    ],
)
def test_run_state_follows_its_sims(counts: dict[str, int], state: str) -> None:
    assert run_state(counts) == state


def test_an_entry_split_gives_its_sims_the_split_as_decided() -> None:
    entries = [
        RunEntry(gpu_config="SM86_RTX3070", count=2, split=SplitSpec(5)),  # warm-up 2 by default
        RunEntry(gpu_config="SM86_RTX3080", count=1, split=SplitSpec(20, 0)),  # one chunk of the trace's 20 launches: whole
        RunEntry(gpu_config="SM86_RTX3080", count=1, split="auto"),  # 4 free slots for it: 20 launches make 2 chunks of 10
        RunEntry(gpu_config="SM86_RTX3070", count=1, split="auto"),  # no free slot: whole
    ]
    command = CreateRun(
        event_id="e1", at=AT, run_id="run-1", sim_ids=[f"sim-{i}" for i in range(5)], body=RunCreate("demo", entries),
        free_slots={"SM86_RTX3080": 4},
    )
    [created] = decide_create(command, TRACE, CONFIGS, max_sims=1024)
    assert isinstance(created, ev.RunCreated)
    assert [e.split for e in created.entries] == [ev.Split(5, 2), ev.Split(20, 0), "auto", "auto"]
    assert [s.split for s in created.sims] == [ev.Split(5, 2), ev.Split(5, 2), None, ev.Split(10, 2), None]


# --- retry and top-up --------------------------------------------------------------------


class Life(msgspec.Struct, frozen=True):
    state: str
    attempt: int


class Cut(ev.Split, frozen=True):
    """A split sim's cut, with its chunks' lives."""

    chunks: list[Life]


class SimFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A sim as the read model's row gives a retry or a top-up its facts."""

    id: str
    gpu_config: str
    replica: int
    state: str
    attempt: int
    kernels_total: int = 20
    split: Cut | None = None
    reuse: bool = False
    reference_for: str | None = None


def test_retry_asks_for_the_next_attempt_of_each_failed_or_cancelled_sim() -> None:
    sims = [
        SimFacts(id="sim-0", gpu_config="SM86_RTX3070", replica=0, state="succeeded", attempt=1),
        SimFacts(id="sim-1", gpu_config="SM86_RTX3070", replica=1, state="failed", attempt=2),
        SimFacts(id="sim-2", gpu_config="SM86_RTX3080", replica=0, state="cancelled", attempt=0),  # cancelled before any runner took it
        # Split: its failed chunk and the one its failure stopped run again, its finished one is kept.
        SimFacts(
            id="sim-3",
            gpu_config="SM86_RTX3080",
            replica=1,
            state="failed",
            attempt=1,
            split=Cut(5, 2, [Life("succeeded", 1), Life("failed", 2), Life("cancelled", 1)]),
        ),
        SimFacts(id="sim-4", gpu_config="SM86_RTX3080", replica=2, state="running", attempt=1),
    ]
    (retry,) = decide_retry(summary("cancelled", {}), sims, RetryRun(event_id="e3", at=AT), {("sim-3", 2): 2})
    assert retry == ev.RunRetryRequested(
        id="e3", at=AT, run_id="run-1", trace_id="demo", kernels_total=20,
        sims=[
            ev.RetriedSim(sim_id="sim-1", gpu_config="SM86_RTX3070", attempt=3),
            ev.RetriedSim(sim_id="sim-2", gpu_config="SM86_RTX3080", attempt=1),
        ],
        chunks=[
            ev.RetriedChunk(sim_id="sim-3", gpu_config="SM86_RTX3080", chunk=1, split=ev.Split(5, 2), attempt=3),
            # A runner claimed attempt 2 after the stop: its life subject says so.
            ev.RetriedChunk(sim_id="sim-3", gpu_config="SM86_RTX3080", chunk=2, split=ev.Split(5, 2), attempt=3),
        ],
    )
    # Nothing to retry (they wait or run again, or succeeded), or a sample: nothing.
    assert decide_retry(summary("active", {}), sims[:1] + sims[4:], RetryRun(event_id="e4", at=AT)) == []
    assert decide_retry(summary("failed", {}, sample=True), sims, RetryRun(event_id="e4", at=AT)) == []


def add(*entries: tuple[str, int], key: str | None = None) -> AddEntries:
    total = sum(count for _, count in entries)
    body = RunEntries([RunEntry(gpu_config=name, count=count) for name, count in entries])
    return AddEntries(event_id="e5", at=AT, sim_ids=[f"new-{i}" for i in range(total)], body=body, key=key)


def test_a_top_up_numbers_replicas_on_from_the_runs_and_is_added_once_per_key() -> None:
    sims = [
        SimFacts(id="sim-0", gpu_config="SM86_RTX3070", replica=0, state="succeeded", attempt=1),
        SimFacts(id="sim-1", gpu_config="SM86_RTX3070", replica=1, state="failed", attempt=1),
    ]
    (added,) = decide_add(summary("failed", {}), sims, add(("SM86_RTX3070", 2), ("SM86_RTX3080", 1), key="k"), TRACE, CONFIGS, max_sims=8, keys={})
    assert isinstance(added, ev.RunEntriesAdded) and (added.run_id, added.trace_id, added.kernels_total, added.key) == ("run-1", "demo", 20, "k")
    assert added.entries == [ev.ConfigCount(gpu_config="SM86_RTX3070", count=2), ev.ConfigCount(gpu_config="SM86_RTX3080", count=1)]
    assert added.sims == [
        ev.SimSpec(sim_id="new-0", gpu_config="SM86_RTX3070", replica=2),
        ev.SimSpec(sim_id="new-1", gpu_config="SM86_RTX3070", replica=3),
        ev.SimSpec(sim_id="new-2", gpu_config="SM86_RTX3080", replica=0),
    ]
    taken = {"k": added.entries}
    assert decide_add(summary("failed", {}), sims, add(("SM86_RTX3070", 2), ("SM86_RTX3080", 1), key="k"), TRACE, CONFIGS, max_sims=8, keys=taken) == []


def test_a_top_up_key_taken_with_other_entries_is_refused() -> None:
    taken = {"k": [ev.ConfigCount(gpu_config="SM86_RTX3070", count=2)]}
    with pytest.raises(KeyReused, match="^Idempotency-Key k was used with another body on run run-1: send the same body again, or this one with a new key$"):
        decide_add(summary("failed", {}), [], add(("SM86_RTX3070", 3), key="k"), TRACE, CONFIGS, max_sims=8, keys=taken)
    (added,) = decide_add(summary("failed", {}), [], add(("SM86_RTX3070", 3), key="other"), TRACE, CONFIGS, max_sims=8, keys=taken)
    assert isinstance(added, ev.RunEntriesAdded) and added.key == "other"


def test_a_top_up_refuses_as_create_does_and_past_the_runs_limit() -> None:
    sims = [SimFacts(id=f"sim-{i}", gpu_config="SM86_RTX3070", replica=i, state="succeeded", attempt=1) for i in range(7)]
    with pytest.raises(BadEntry, match="^SM7_QV100 is sm_70 but trace demo is sm_86$"):
        check_add(summary("succeeded", {}), sims, add(("SM7_QV100", 1)).body, TRACE, CONFIGS, max_sims=8)
    with pytest.raises(TooManySims, match="^the run would have 9 sims with these entries, more than this server's limit of 8"):
        check_add(summary("succeeded", {}), sims, add(("SM86_RTX3070", 2)).body, TRACE, CONFIGS, max_sims=8)
    with pytest.raises(SampleRun, match="^run run-1 is a sample"):
        check_add(summary("succeeded", {}, sample=True), sims, add(("SM86_RTX3070", 1)).body, TRACE, CONFIGS, max_sims=8)
    with pytest.raises(TraceNotUsable, match="^trace demo is failed, not ready$"):
        check_add(summary("succeeded", {}), sims, add(("SM86_RTX3070", 1)).body, msgspec.structs.replace(TRACE, state="failed"), CONFIGS, max_sims=8)


def test_retry_asks_past_an_attempt_a_runner_claimed_after_the_cancel() -> None:
    # Cancelled while pending; a runner took its request later, and its claim changed nothing.
    sims = [SimFacts(id="sim-0", gpu_config="SM86_RTX3070", replica=0, state="cancelled", attempt=0)]
    (retry,) = decide_retry(summary("cancelled", {}), sims, RetryRun(event_id="e6", at=AT), {("sim-0", None): 1})
    assert isinstance(retry, ev.RunRetryRequested) and retry.sims == [ev.RetriedSim(sim_id="sim-0", gpu_config="SM86_RTX3070", attempt=2)]


def test_a_reference_is_a_sim_of_the_same_config_run_whole_added_once_with_no_entry() -> None:
    sims = [
        SimFacts(id="sim-0", gpu_config="SM86_RTX3070", replica=0, state="succeeded", attempt=1, split=Cut(10, 2, [Life("succeeded", 1)] * 2)),
        SimFacts(id="sim-1", gpu_config="SM86_RTX3070", replica=1, state="succeeded", attempt=1, reuse=True),
        SimFacts(id="sim-2", gpu_config="SM86_RTX3080", replica=0, state="succeeded", attempt=1),
    ]
    asked = RequestReference(event_id="e7", at=AT, sim_id="sim-1", reference_id="ref-1")
    (added,) = decide_reference(summary("succeeded", {}), sims, asked, TRACE, CONFIGS, max_sims=8)
    assert added == ev.RunEntriesAdded(
        id="e7", at=AT, run_id="run-1", trace_id="demo", kernels_total=20, entries=[],
        sims=[ev.SimSpec(sim_id="ref-1", gpu_config="SM86_RTX3070", replica=2, reference_for="sim-1")],
    )
    with_it = [*sims, SimFacts(id="ref-1", gpu_config="SM86_RTX3070", replica=2, state="pending", attempt=0, reference_for="sim-1")]
    assert decide_reference(summary("active", {}), with_it, asked, TRACE, CONFIGS, max_sims=8) == [], "asked again: the one there is"
    with pytest.raises(NotFast, match="^sim sim-2 is neither split nor reusing repeated kernels"):
        decide_reference(summary("active", {}), with_it, msgspec.structs.replace(asked, sim_id="sim-2"), TRACE, CONFIGS, max_sims=8)
    with pytest.raises(NotFast, match="^sim ref-1 is the reference of sim sim-1; a reference has no reference of its own$"):
        decide_reference(summary("active", {}), with_it, msgspec.structs.replace(asked, sim_id="ref-1"), TRACE, CONFIGS, max_sims=8)
    with pytest.raises(TooManySims):
        decide_reference(summary("active", {}), sims, msgspec.structs.replace(asked, sim_id="sim-0"), TRACE, CONFIGS, max_sims=3)


def test_an_entry_with_references_gives_each_fast_sim_one_numbered_after_them() -> None:
    body = RunCreate(
        "demo",
        [
            RunEntry(gpu_config="SM86_RTX3070", count=2, split=SplitSpec(5), reference=True),
            RunEntry(gpu_config="SM86_RTX3080", count=1, reuse=True, reference=True),
        ],
    )
    cmd = CreateRun(event_id="e1", at=AT, run_id="run-1", sim_ids=[f"sim-{i}" for i in range(6)], body=body)
    (created,) = decide_create(cmd, TRACE, CONFIGS, max_sims=6)
    assert isinstance(created, ev.RunCreated)
    assert [(s.sim_id, s.gpu_config, s.replica, s.split is not None, s.reuse, s.reference_for) for s in created.sims] == [
        ("sim-0", "SM86_RTX3070", 0, True, False, None),
        ("sim-1", "SM86_RTX3070", 1, True, False, None),
        ("sim-2", "SM86_RTX3070", 2, False, False, "sim-0"),
        ("sim-3", "SM86_RTX3070", 3, False, False, "sim-1"),
        ("sim-4", "SM86_RTX3080", 0, False, True, None),
        ("sim-5", "SM86_RTX3080", 1, False, False, "sim-4"),
    ]
    assert created.entries[0] == ev.ConfigCount(gpu_config="SM86_RTX3070", count=2, split=ev.Split(5, 2), reference=True)
    with pytest.raises(TooManySims):
        check_create(body, TRACE, CONFIGS, max_sims=5)
    # An "auto" split that runs whole, not reusing: its sims are sequential, so no reference.
    short = RunCreate("demo", [RunEntry(gpu_config="SM86_RTX3070", count=1, split="auto", reference=True)])
    (whole,) = decide_create(CreateRun(event_id="e2", at=AT, run_id="run-2", sim_ids=["a", "b"], body=short), TRACE, CONFIGS, max_sims=6)
    assert isinstance(whole, ev.RunCreated) and whole.sims == [ev.SimSpec(sim_id="a", gpu_config="SM86_RTX3070", replica=0)]
    with pytest.raises(BadEntry, match="^the entry of SM86_RTX3070 asks for a reference but is neither split nor reusing"):
        check_create(RunCreate("demo", [RunEntry(gpu_config="SM86_RTX3070", count=1, reference=True)]), TRACE, CONFIGS, max_sims=6)
