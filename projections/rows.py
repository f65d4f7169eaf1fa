"""The read model's rows: one Struct per table, fields in column order, built by field name.

`seq` on a row is the stream sequence of the event that last changed it.
"""

from __future__ import annotations

from datetime import datetime
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import msgspec

from cascade_core.events import ConfigCount, Split
from cascade_core.run import Run
from cascade_core.trace import Trace
from cascade_core.sim import Sim
from cascade_core.packed_stats import PackedStats
from cascade_formats.stat_kinds import StatKind


class LayerRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A layer of a trace's model as a STRUCT: `cascade.json` names it by text or by number,
    which no one DuckDB type holds, so the one it is not is null."""

    name: str | None
    number: int | None

    @property
    def layer(self) -> str | int:
        if self.name is not None:
            return self.name
        assert self.number is not None, "a layer row holds a name or a number"
        return self.number

    @classmethod
    def of(cls, layer: str | int) -> LayerRow:
        return cls(name=layer, number=None) if isinstance(layer, str) else cls(name=None, number=layer)


class TraceRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A trace as the read model stores it: its domain state (`cascade_core/trace.py`), field
    by field, its layers as `LayerRow`s."""

    id: str
    state: str
    error: str | None
    created_at: datetime
    updated_at: datetime
    model: str | None
    layers: list[LayerRow]  # as `cascade.json` lists them
    source_gpu: str | None
    trace_gpu_arch: str | None
    suggested_sim_config: str | None
    kernel_count: int
    bytes: int
    has_real_timing: bool
    has_step_timeline: bool
    sample: bool
    deleted: bool
    seq: int
    real_timing: str | None  # the timing_id of the trace_real_timing rows in use

    @property
    def trace(self) -> Trace:
        """The trace's domain state."""
        return _converted(self, Trace, "layers", lambda row: row.layer)

    @classmethod
    def of(cls, trace: Trace, seq: int) -> TraceRow:
        return _converted(trace, cls, "layers", LayerRow.of, seq=seq)


class TraceFileRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    trace_id: str
    path: str
    bytes: int
    digest: str
    sample: bool


class TraceKernelRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    trace_id: str
    uid: int
    name: str
    grid: str
    block: str
    shmem: int
    nregs: int
    file: str
    cuda_stream_id: int | None
    sample: bool  # of a sample trace, as in `traces`


class RealTimingRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A kernel launch measured in one hardware pass (`repeat`), with the hardware counters
    the file had; a trace's rows in use are those of its `real_timing`, rows of other timing
    ids are replaced or not yet attached."""

    trace_id: str
    timing_id: str
    repeat: int
    kernel_id: int
    kernel_name: str
    duration_ns: float | None
    cycles: float | None
    sample: bool
    counters: dict[str, float] | None = None  # by ncu's metric name (`cascade_core.counters`)


class EntryRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A run's entry (`events.ConfigCount`) as a STRUCT, field by field, but its split as two
    fields: a cut, or "auto", which no one DuckDB type holds beside a cut."""

    gpu_config: str
    count: int
    split: Split | None  # the cut; None: whole, or "auto"
    split_auto: bool  # split "auto": as `split.auto` chose, in the sims' `split`
    reuse: bool
    reference: bool
    fresh: bool = False
    options: dict[str, str] | None = None

    @property
    def entry(self) -> ConfigCount:
        return ConfigCount(**{**_fields(self, ConfigCount), "split": "auto" if self.split_auto else self.split})

    @classmethod
    def of(cls, entry: ConfigCount) -> EntryRow:
        auto = entry.split == "auto"
        return cls(**{**_fields(entry, ConfigCount), "split": None if auto else entry.split}, split_auto=auto)


class RunRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A run as the read model stores it: its domain state (`cascade_core/run.py`), field by
    field, its entries as `EntryRow`s."""

    id: str
    trace_id: str
    created_at: datetime
    state: str
    entries: list[EntryRow]  # in request order
    sim_counts: dict[str, int]  # state -> count, in the order of `sims.SIM_STATES`
    sample: bool
    kernels_total: int
    cut_short: int  # its sims that succeeded without simulating every launch
    seq: int
    name: str | None  # a person's name for the run, as created
    tags: list[str]

    @property
    def run(self) -> Run:
        """The run's domain state."""
        return _converted(self, Run, "entries", lambda row: row.entry)

    @classmethod
    def of(cls, run: Run, seq: int) -> RunRow:
        return _converted(run, cls, "entries", EntryRow.of, seq=seq)


def _fields(struct: msgspec.Struct, of: type[msgspec.Struct]) -> dict[str, Any]:
    """The fields of `struct` that `of` has, by name."""
    return {name: getattr(struct, name) for name in of.__struct_fields__}


Into = TypeVar("Into", bound=msgspec.Struct)


def _converted(struct: msgspec.Struct, into: type[Into], listed: str, convert: Callable[[Any], Any], **more: Any) -> Into:
    """`struct` as an `into`, by field name, its list `listed` converted item by item (a domain
    state and its row differ only there) and `more` added."""
    fields = {name: getattr(struct, name) for name in into.__struct_fields__ if name not in more}
    fields[listed] = [convert(item) for item in getattr(struct, listed)]
    return into(**fields, **more)


class SimRow(Sim, frozen=True, kw_only=True, gc=False):
    """A sim as the read model stores it: its domain state (`cascade_core/sim.py`), field by
    field, its attempts, resumes and chunks as DuckDB STRUCTs and LISTs."""

    seq: int


# A field the fold fills in that no column holds: the projector writes it otherwise.
NOT_STORED = msgspec.Meta(extra={"stored": False})


class KernelRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    sim_id: str
    attempt: int
    kernel_index: int
    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    sim_time_ns: float
    # The stats map (every stat of the kernel's block, packed as its event carried it; None:
    # none), stored as its rows of kernel_stats: a map read back is built from them
    # (`projections/queries/stats_maps.py`).
    stats: Annotated[PackedStats | None, NOT_STORED]
    reused_from: int | None = None  # the launch whose result this is, in a sim that reuses them
    # Each value of the map less the simulator's block before, as the event carried it
    # (`events.KernelFinished.per_kernel`): what running totals' rows are made from.
    per_kernel: Annotated[bytes | None, NOT_STORED] = None
    sample: bool = False  # of a sample run's sim, as in `sims`
    seq: int


StatId = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]  # INTEGER


class KernelStatRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A value of a kernel's stats map (docs/stats-naming.md): the stat `stat_names` names
    `stat`, in the map of the kernels row with this `seq`. A number is `value` (nan and the
    infinities as DuckDB's own), a text is `text` (`kernel_name`, and `none` where the
    simulator printed no number); the other is null. Rows come from the maps as Arrow
    columns (`projections/stats_rows.py`).

    `value` is the kernel's own (`cascade_formats/stat_kinds.py`): for a running total, its
    difference from the simulator's block before; for a ratio of running totals, the ratio
    of those differences; for the other kinds, as printed. `printed_total` is a running
    total's or ratio's value as printed: since the simulator process started (for a sim run
    whole and straight, over its launches up to this one); null for the other kinds. A
    result whose event carries no differences (from before them) has a null `value` there."""

    seq: int
    stat: StatId
    value: float | None
    text: str | None
    printed_total: float | None
    sample: bool  # its kernel's, so that a query of the stats alone can leave samples out


class StatNameRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A stat's name and what kind of number it is (`cascade_formats/stat_kinds.py`): per
    kernel, a running total since the simulation started, a snapshot or a ratio of two
    running totals; `undecided` where GPGPU-Sim's printing code did not say."""

    id: StatId
    name: str
    kind: StatKind


class LogChunkRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Where the lines of one heartbeat are: the heartbeat itself, at stream sequence `seq`.
    The log route reads them from there (`cascade_app/sim_logs.py`): kept here as text they
    were two thirds of what the projector wrote, and each of decoding, Arrow and DuckDB's
    string storage copied them (bench/README.md, "Logs out of the read model")."""

    sim_id: str
    attempt: int
    first_line_seq: int
    line_count: int
    sample: bool
    seq: int


class SimFileRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    sim_id: str
    attempt: int
    name: str
    size: int
    content_type: str
    created_at: datetime
    object_name: str
    digest: str
    sample: bool
    seq: int


class ParkedRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A stored message the projection could not use (`projections/parking.py`)."""

    seq: int
    subject: str
    event_type: str | None  # the type the message names, if it names one
    error: str
    parked_at: datetime  # when this read model parked it: a replay parks it again, later


class CampaignRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A campaign as `campaign.created.v1` named it: it never changes, and its state follows
    from its runs' when read."""

    id: str
    name: str
    tags: list[str]
    baseline: str | None
    created_at: datetime
    seq: int


class CampaignRunRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One of a campaign's runs: the one of its trace (`campaign.runs_added.v1`)."""

    campaign_id: str
    run_id: str
    trace_id: str
    seq: int
    position: int  # its place in its event's list: the campaign's runs are in (seq, position) order


class StatSetRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A set of stats maps' names, as its `stat_names.defined.v1` event gave it: kernel
    results name it by `digest` alone (`cascade_core/packed_stats.py`), and the projector
    reads its `names` here to give their rows stat ids."""

    digest: str
    names: str  # base64 of the xz of the names joined by newlines


ENTITY_TABLES: dict[str, type[msgspec.Struct]] = {"traces": TraceRow, "runs": RunRow, "sims": SimRow}

# Append-only tables and the columns that identify a row: a row already there is never added
# again, which is what makes applying the same event twice harmless.
APPEND_TABLES: dict[str, tuple[type[msgspec.Struct], tuple[str, ...]]] = {
    "trace_files": (TraceFileRow, ("trace_id", "path")),
    "trace_kernels": (TraceKernelRow, ("trace_id", "uid")),
    "trace_real_timing": (RealTimingRow, ("trace_id", "timing_id", "repeat", "kernel_id")),
    "kernels": (KernelRow, ("sim_id", "attempt", "uid")),
    "sim_log": (LogChunkRow, ("sim_id", "attempt", "first_line_seq")),
    "sim_files": (SimFileRow, ("sim_id", "attempt", "name")),
    "campaigns": (CampaignRow, ("id",)),
    "campaign_runs": (CampaignRunRow, ("campaign_id", "run_id")),
    "stat_sets": (StatSetRow, ("digest",)),
}

# Written by the projector from the kernels rows it writes, in the same transaction: their
# stats maps as rows (`projections/stats_rows.py`), and the key that makes each unique.
STATS_TABLES: dict[str, tuple[type[msgspec.Struct], tuple[str, ...]]] = {
    "kernel_stats": (KernelStatRow, ("seq", "stat")),
    "stat_names": (StatNameRow, ("id",)),
}

# Written by the projector beside what the fold returns, in the same transaction; a message is
# parked once.
PARKED_TABLE = "parked"
PARKED_KEY = ("seq",)
