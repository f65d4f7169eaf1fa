"""Old versions of stored events decode as the current ones (`events.Codec`), and no stored
event type carries a limit of the API's.

Each test pretends a newer Cascade: it defines a next version (a field renamed, merged or
split) of a current type of one aggregate, makes the real type the old one with an upcaster,
and decodes the recorded events of the corpora (tests/corpus) through it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast, get_args

import msgspec
import pytest

from cascade_core import events as ev
from cascade_core.runs import RunEntry
from cascade_core.variants import unnamed_name
from cascade_core.packed_stats import PackedStats
from cascade_nats import deflated, subjects
from projections.fold import Rows, fold
from projections.queries.runs import run_from_row
from tests.corpus import corpus

# --- what a v2 could be, for each aggregate ---------------------------------------------------


class TraceReadyV2(ev.TraceEvent, frozen=True, tag="trace.ready.v2"):
    """trace.ready with `trace_gpu_arch` renamed `arch`."""

    arch: str
    kernel_count: int
    bytes: int
    suggested_sim_config: str | None
    has_real_timing: bool
    has_step_timeline: bool
    model: str | None = None
    layers: list[str | int] = []
    source_gpu: str | None = None


def trace_ready_v2(old: ev.TraceReady) -> TraceReadyV2:
    fields = msgspec.structs.asdict(old)
    return TraceReadyV2(arch=fields.pop("trace_gpu_arch"), **fields)


class RunCreatedV2(ev.Event, frozen=True, tag="run.created.v2"):
    """run.created with its entries merged into how many sims each config runs."""

    run_id: str
    trace_id: str
    sims_per_config: dict[str, int]
    sims: list[ev.SimSpec]
    kernels_total: int
    sample: bool = False
    name: str | None = None
    tags: list[str] = []


def run_created_v2(old: ev.RunCreated) -> RunCreatedV2:
    fields = msgspec.structs.asdict(old)
    per_config: dict[str, int] = {}
    for entry in fields.pop("entries"):
        per_config[entry.gpu_config] = per_config.get(entry.gpu_config, 0) + entry.count
    return RunCreatedV2(sims_per_config=per_config, **fields)


class SimHeartbeatV2(ev.SimEvent, frozen=True, tag="sim.heartbeat.v2"):
    """sim.heartbeat with its log text split into lines."""

    attempt: int
    kernels_done: int
    current_kernel: str | None
    latest: ev.SimMetrics
    first_line_seq: int = 0
    lines: list[str] = []


def sim_heartbeat_v2(old: ev.SimHeartbeat) -> SimHeartbeatV2:
    fields = msgspec.structs.asdict(old)
    del fields["log"], fields["log_deflated"]
    text = deflated.log_text(old)
    return SimHeartbeatV2(lines=text.split("\n") if text else [], **fields)


# Two steps past the real v2 (itself upcast from the recorded v1s): v2 -> v3 renames `uid`,
# v3 -> v4 renames `gpu_sim_cycle`; only v4 is current.
class KernelFinishedV3(ev.SimEvent, frozen=True, tag="sim.kernel_finished.v3"):
    attempt: int
    kernel_index: int
    launch_uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    sim_time_ns: float
    stats: PackedStats | None = None
    stats_naming: int = 1
    reused_from: int | None = None
    per_kernel: bytes | None = None


class KernelFinishedV4(ev.SimEvent, frozen=True, tag="sim.kernel_finished.v4"):
    attempt: int
    kernel_index: int
    launch_uid: int
    name: str
    cycles: int
    gpu_sim_insn: int
    gpu_ipc: float
    sim_time_ns: float
    stats: PackedStats | None = None
    stats_naming: int = 1
    reused_from: int | None = None
    per_kernel: bytes | None = None


def renamed(new_type: type[ev.Event], old_name: str, new_name: str) -> Callable[[Any], ev.Event]:
    def upcast(old: ev.Event) -> ev.Event:
        fields = msgspec.structs.asdict(old)
        return new_type(**{new_name: fields.pop(old_name)}, **fields)

    return upcast


Upcasters = dict[type[ev.Event], Callable[[Any], ev.Event]]


def codec(replaced: type[ev.Event], current: type[ev.Event], upcasters: Upcasters) -> ev.Codec:
    """The real codec, with its upcasters, but with `current` in place of the type `replaced`."""
    return ev.Codec([current if t is replaced else t for t in get_args(ev.AnyEvent)], {**ev.UPCASTERS, **upcasters})


def recorded(event_type: type[ev.Event]) -> list[bytes]:
    found = [corpus.data(line) for line in corpus.every_line() if type(ev.decode(corpus.data(line))) is event_type]
    assert found, f"the corpus has no {ev.tag_of(event_type)}"
    return found


class Case(NamedTuple):
    old: type[ev.Event]  # the recorded v1
    new: type[ev.Event]  # the current version, as the test pretends
    upcasters: Upcasters
    carried: Callable[[Any, Any], bool]  # whether the current event says what the v1 said


CASES = {
    "trace": Case(
        ev.TraceReady, TraceReadyV2, {ev.TraceReady: trace_ready_v2},
        lambda v1, now: (now.arch, now.kernel_count) == (v1.trace_gpu_arch, v1.kernel_count),
    ),
    "run": Case(
        ev.RunCreated, RunCreatedV2, {ev.RunCreated: run_created_v2},
        lambda v1, now: sum(now.sims_per_config.values()) == sum(e.count for e in v1.entries) and now.sims == v1.sims,
    ),
    "sim": Case(
        ev.SimHeartbeat, SimHeartbeatV2, {ev.SimHeartbeat: sim_heartbeat_v2},
        lambda v1, now: "\n".join(now.lines) == deflated.log_text(v1) and len(now.lines) == ev.lines_in(deflated.log_text(v1)),
    ),
    "sim, in two steps": Case(
        ev.KernelFinished,
        KernelFinishedV4,
        {ev.KernelFinished: renamed(KernelFinishedV3, "uid", "launch_uid"), KernelFinishedV3: renamed(KernelFinishedV4, "gpu_sim_cycle", "cycles")},
        lambda v1, now: (now.launch_uid, now.cycles, now.stats, now.stats_naming) == (v1.uid, v1.gpu_sim_cycle, v1.stats, v1.stats_naming),
    ),
}


@pytest.mark.parametrize("aggregate", CASES)
def test_a_recorded_v1_event_decodes_as_the_current_version(aggregate: str) -> None:
    case = CASES[aggregate]
    newer = codec(case.old, case.new, case.upcasters)
    for data in recorded(case.old):
        v1, current = ev.decode(data), newer.decode(data)
        assert type(current) is case.new
        assert (current.id, current.at, current.correlation_id) == (v1.id, v1.at, v1.correlation_id)
        assert case.carried(v1, current)


@pytest.mark.parametrize("aggregate", CASES)
def test_what_a_fold_is_given_is_only_ever_of_current_types(aggregate: str) -> None:
    old, new, upcasters, _ = CASES[aggregate]
    newer = codec(old, new, upcasters)
    stored = [corpus.data(line) for line in corpus.every_line()]
    batched = newer.decode_all(stored)  # small ones in one call, big ones one by one
    assert batched == [newer.decode(one) for one in stored]
    seen = {type(e) for e in batched}
    assert new in seen and not seen & set(upcasters)
    assert seen <= {new, *get_args(ev.AnyEvent)} - {old}
    assert sum(type(e) is new for e in batched) == len(recorded(old))


def test_an_upcaster_that_fails_makes_the_event_unreadable_by_its_stored_type() -> None:
    def broken(old: ev.TraceReady) -> TraceReadyV2:
        raise KeyError("arch")

    newer = codec(ev.TraceReady, TraceReadyV2, {ev.TraceReady: broken})
    with pytest.raises(ev.Unreadable) as raised:
        newer.decode(recorded(ev.TraceReady)[0])
    assert raised.value.event_type == "trace.ready.v1" and "cannot upcast trace.ready.v1" in raised.value.error


@pytest.mark.parametrize("upcast", ["to itself", "to a type that is not current"])
def test_an_upcaster_chain_must_end_in_a_current_type(upcast: str) -> None:
    v1 = recorded(ev.TraceReady)[0]
    if upcast == "to itself":  # a cycle: not followed forever
        newer, stored = codec(ev.TraceReady, TraceReadyV2, {ev.TraceReady: lambda old: old}), v1
    else:
        newer = ev.Codec(list(get_args(ev.AnyEvent)), {TraceReadyV2: lambda v2: v2})
        stored = ev.encode(trace_ready_v2(cast(ev.TraceReady, ev.decode(v1))))
    with pytest.raises(ev.Unreadable, match="no current event type"):
        newer.decode(stored)


def test_a_version_from_a_newer_cascade_is_unreadable_here_not_misread() -> None:
    stored_v2 = ev.encode(trace_ready_v2(cast(ev.TraceReady, ev.decode(recorded(ev.TraceReady)[0]))))
    with pytest.raises(ev.Unreadable) as raised:
        ev.decode(stored_v2)
    assert raised.value.event_type == "trace.ready.v2" and "written by a newer version" in raised.value.error


# --- events hold no limit of the API's --------------------------------------------------------

_LIMITS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern", "tz")


def _limits(node: msgspec.inspect.Type, where: str, seen: set[type]) -> list[str]:
    found = [f"{where}: {name}={value!r}" for name in _LIMITS if (value := getattr(node, name, None)) is not None]
    if isinstance(node, msgspec.inspect.StructType):
        if node.cls in seen:
            return found
        seen.add(node.cls)
        for field in node.fields:
            found += _limits(field.type, f"{node.cls.__name__}.{field.name}", seen)
    for child in ("type", "item_type", "key_type", "value_type"):
        if isinstance(sub := getattr(node, child, None), msgspec.inspect.Type):
            found += _limits(sub, where, seen)
    for sub in getattr(node, "types", ()) or getattr(node, "item_types", ()):
        found += _limits(sub, where, seen)
    return found


def test_no_stored_event_type_carries_a_limit() -> None:
    seen: set[type] = set()
    found = [limit for info in msgspec.inspect.multi_type_info(get_args(ev.AnyEvent)) for limit in _limits(info, "", seen)]
    assert not found, "a limit on a stored event is checked on every read of the log; the API checks its own at its edge"
    assert len(seen) > len(get_args(ev.AnyEvent)), "the walk reaches the events' value types too"


def test_a_run_past_todays_api_limit_is_read_and_shown_as_stored() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    created = ev.RunCreated(
        id="e", at=at, run_id="r", trace_id="t", entries=[ev.ConfigCount(gpu_config="SM61_TITANX", count=100)],
        sims=[ev.SimSpec(sim_id=f"s{i}", gpu_config="SM61_TITANX", replica=i) for i in range(100)], kernels_total=1,
    )
    assert ev.decode(ev.encode(created)) == created
    with pytest.raises(msgspec.ValidationError):  # what the API refuses in a request
        msgspec.convert({"gpu_config": "SM61_TITANX", "count": 100}, RunEntry)
    row = fold(Rows(), [(1, created)]).rows.runs["r"]
    assert run_from_row(row).entries == [RunEntry(gpu_config="SM61_TITANX", count=100)]


def test_every_recorded_event_decodes_beside_config_variants_and_a_variant_as_first_written() -> None:
    """Config variants (issue 25) add an event type and nothing to the ones recorded before
    them: every corpus event decodes as before; a variant's event without its defaults decodes
    with them, on its own subject, and a run's recorded entries run the configs they named
    (an entry with options of its own, its unnamed variant)."""
    before = [ev.decode(corpus.data(line)) for version in corpus.VERSIONS if version < 10 for line in corpus.recorded(version)]
    assert before and not any(isinstance(e, ev.GpuConfigDerived) for e in before)
    decoded = [ev.decode(corpus.data(line)) for line in corpus.every_line()]
    for created in (e for e in decoded if isinstance(e, ev.RunCreated)):
        named = {unnamed_name(e.gpu_config, e.options) if e.options else e.gpu_config for e in created.entries}
        assert {s.gpu_config for s in created.sims} <= named
    written = (
        b'{"type":"gpu_config.derived.v1","id":"e1","at":"2026-12-04T17:00:00Z","name":"SM61_TITANX_L2x2","base":"SM61_TITANX",'
        b'"options":{"-gpgpu_cache:dl2":"S:64:128:32,L:B:m:L:P,A:192:4,32:0,32"},"files":{"gpgpusim.config":"ab"},'
        b'"arch":"sm_61","core_clock_mhz":1417.0}'
    )
    variant = subjects.decode(subjects.gpu_config("SM61_TITANX_L2x2").encode(), written)
    assert isinstance(variant, ev.GpuConfigDerived) and variant.unnamed is False and variant.base == "SM61_TITANX"
    assert ev.decode(ev.encode(variant)) == variant
    assert msgspec.convert({"gpu_config": "SM61_TITANX", "count": 1}, RunEntry).options is None
