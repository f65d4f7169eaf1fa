"""The API's schemas, as the Runs reference documents them.

These Structs are the single definition of every body Cascade serves or accepts: the HTTP
layer encodes them, the OpenAPI document is generated from them, and request validation
reads their constraints. The domain's value types they hold (a GPU config, a run's entries,
a sim's past attempts, a correlation, a reference's numbers, the states) are the core's
(`cascade_core`), defined beside the rules about them; the core never imports this package.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from cascade_core.correlation import Correlation, Spread
from cascade_core.events import CutShort, SimMetrics, TraceKernel  # what the log holds, shown as stored
from cascade_core.gpu_configs import GpuConfig
from cascade_core.packed_stats import StatValue
from cascade_core.reference import SHORT_NAME, ReferenceKernel, ReferenceTotals
from cascade_core.run import RunState
from cascade_core.runs import RunEntry
from cascade_core.sim import Resumed, SimAttempt
from cascade_core.sims import SimState
from cascade_core.trace import TraceState


class TraceFileRef(msgspec.Struct, frozen=True):
    key: str
    bytes: int


class TraceMetadata(msgspec.Struct, frozen=True, kw_only=True):
    status: str
    files: list[TraceFileRef]
    trace_gpu_arch: str | None
    suggested_sim_config: str | None


class Trace(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    state: TraceState
    error: str | None
    created_at: datetime
    updated_at: datetime
    model: str | None
    layers: list[str | int]
    source_gpu: str | None
    trace_gpu_arch: str | None
    suggested_sim_config: str | None
    kernel_count: int
    bytes: int
    has_real_timing: bool
    has_step_timeline: bool
    sample: bool


class TraceDetail(Trace, frozen=True, kw_only=True):
    metadata: TraceMetadata
    kernels: list[TraceKernel]


class SharedTraceAdd(msgspec.Struct, frozen=True, kw_only=True):
    """A trace to add from where it lies (`POST /api/traces/shared`)."""

    path: Annotated[
        str,
        msgspec.Meta(
            min_length=1, max_length=4096,
            description="The trace's folder, from the root, as the server and the runners see it; under a root the server allows.",
        ),
    ]
    id: Annotated[
        str | None, msgspec.Meta(description="The trace's id: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit; default: a new one.")
    ] = None
    copy: Annotated[
        bool,
        msgspec.Meta(
            description="Also store its files in the object store, as an upload's are, so that runners that cannot see the path "
            "fetch them; false: runners that cannot see it fail its sims saying so."
        ),
    ] = False


class ChunkView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    index: int
    first: Annotated[int, msgspec.Meta(description="The first kernel launch (uid) the chunk measures.")]
    last: int
    warmup: Annotated[int, msgspec.Meta(description="Launches before `first` it simulated first and discarded.")]
    state: SimState
    attempt: int
    runner_id: str | None
    kernels_done: int
    error: str | None
    resumed: Annotated[
        list[Resumed], msgspec.Meta(description="The chunk's attempts that resumed a lost runner's, oldest first; absent when none.")
    ] = []


class SplitView(msgspec.Struct, frozen=True, kw_only=True):
    kernels_per_chunk: int
    warmup: int
    chunks: list[ChunkView]


class CutShortView(CutShort, frozen=True, kw_only=True):
    """A sim that succeeded without simulating every launch, and what that means in words."""

    said: Annotated[str, msgspec.Meta(description="What it means, in words: a limit reached, not an error.")]


class Sim(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    run_id: str
    gpu_config: str
    replica: int
    state: SimState
    error: str | None
    launcher_ref: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    last_heartbeat_at: datetime | None
    exit_code: int | None
    kernels_done: int
    kernels_total: int
    current_kernel: str | None
    latest: SimMetrics
    log_tail: list[str]
    current_kernel_short_name: Annotated[str | None, msgspec.Meta(description="current_kernel's short name: " + SHORT_NAME)] = None
    split: Annotated[
        SplitView | None,
        msgspec.Meta(description="How a split sim was cut, with what warm-up, and each chunk's state; absent for a sim run whole."),
    ] = None
    reuse: Annotated[
        bool,
        msgspec.Meta(description="The sim reuses repeated kernels' results (its entry's `reuse`); absent when it simulates every launch."),
    ] = False
    attention: Annotated[
        str | None,
        msgspec.Meta(
            description="Why this unfinished sim may never finish unless someone acts: no runner has taken it for a "
            "while, or its runner was lost. Judged when the run is read (Get a run), from the time and the live "
            "runners; absent when all is well, and from the run's event stream."
        ),
    ] = None
    attempt: Annotated[
        int | None,
        msgspec.Meta(
            description="The current attempt when it is not the first: 2 or more after a retry or a lost runner (a "
            "retried sim is pending for the attempt the retry asked for); absent on the first."
        ),
    ] = None
    attempts: Annotated[
        list[SimAttempt],
        msgspec.Meta(description="The attempts before the current one, oldest first, each with how and why it ended; absent when none."),
    ] = []
    reference_for: Annotated[
        str | None,
        msgspec.Meta(
            description="The split or reusing sim this one is the reference of: the same trace and config simulated whole "
            "and in sequence (Request a sim's reference). It is no replica: the run's comparison and stats leave it out; "
            "absent for other sims."
        ),
    ] = None
    resumed: Annotated[
        list[Resumed],
        msgspec.Meta(
            description="The attempts that resumed a lost runner's where it stopped, oldest first (a split sim's chunks' are "
            "in `split`); absent when none. A retry starts from the first launch."
        ),
    ] = []
    cut_short: Annotated[
        CutShortView | None,
        msgspec.Meta(
            description="A succeeded sim that did not simulate every launch: the simulator stopped at a limit it was given "
            "(`limit_option`, such as `-gpgpu_max_cycle`, and its `limit_value`; null when its output named none) or left launches of "
            "its list unrun. `kernels_done` of `kernels_total` launches finished; `partial`, the launch it cut, whose "
            "part is in no kernel list, total, comparison or score. Absent for a sim that simulated them all."
        ),
    ] = None
    cached_from: Annotated[
        str | None,
        msgspec.Meta(
            description="The sim whose result this one took instead of simulating: one of the same trace contents, config "
            "files, simulator build and settings that succeeded before (its entry was not `fresh`). Every route answers "
            "for it as for that sim; it cost no simulator time. Absent for a sim simulated."
        ),
    ] = None


class ConfigCycles(msgspec.Struct, frozen=True, kw_only=True):
    """A config's total simulated cycles in a run, over its replicas that count."""

    gpu_config: Annotated[str, msgspec.Meta(description="The config as the run's comparison labels it: `NAME@<6 hex>` when its replicas ran files of several digests.")]
    sims: Annotated[int, msgspec.Meta(description="Its succeeded replicas that simulated every launch, whose `gpu_tot_sim_cycle` these are.")]
    median: float
    min: float
    max: float


class RunSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    trace_id: str
    created_at: datetime
    state: RunState
    entries: list[RunEntry]
    sim_counts: dict[str, int]
    sample: bool
    cut_short: Annotated[
        int, msgspec.Meta(description="Its succeeded sims that did not simulate every launch (Sim's `cut_short`); absent when none.")
    ] = 0
    name: Annotated[str | None, msgspec.Meta(description="The name it was created with; absent when none.")] = None
    tags: Annotated[list[str], msgspec.Meta(description="The tags it was created with; absent when none.")] = []
    cycles: Annotated[
        list[ConfigCycles],
        msgspec.Meta(
            description="Total simulated cycles per config, in the order of its entries, over its replicas (not references) that "
            "succeeded and simulated every launch: in the runs list when asked (`cycles=true`); absent when none has."
        ),
    ] = []


class RunDetail(RunSummary, frozen=True, kw_only=True):
    trace: Trace
    sims: list[Sim]


class KernelStat(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    sim_id: str
    kernel_index: int
    kernel_name: str
    kernel_launch_uid: int
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    sim_time_ns: float
    stats: Annotated[
        dict[str, StatValue],
        msgspec.Meta(
            description="Every value of the kernel's stats block under the log's names, as printed: many are running totals "
            "since the simulator started, not the kernel's own. Per-kernel values: GET /api/runs/{id}/stats/values, "
            "and `value` in SQL's kernel_stats."
        ),
    ]
    reused_from: Annotated[
        int | None,
        msgspec.Meta(
            description="In a sim that reuses repeated kernels, the kernel_launch_uid whose result this launch took "
            "instead of being simulated (its stats map says so too, as `reused_from`); absent for a launch simulated."
        ),
    ] = None
    kernel_short_name: Annotated[str | None, msgspec.Meta(description=SHORT_NAME)] = None


# The fields added to the reference's Comparison and ComparisonRow are left out while null, so
# an answer without real timing is the reference's, field for field, and each row's kernel_short_name.
class ComparisonRow(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    kernel_index: int
    kernel_name: str
    real_ns: Annotated[float | None, msgspec.Meta(description="The real duration, the mean over the trace's hardware repetitions.")]
    sim_ns: Annotated[
        dict[str, float | None],
        msgspec.Meta(description="Per config of the comparison's `configs`: the median sim_time_ns over its replicas; null if none finished this kernel."),
    ]
    real_ns_spread: Annotated[Spread | None, msgspec.Meta(description="With two or more repetitions: their spread.")] = None
    real_cycles: Annotated[
        float | None, msgspec.Meta(description="The real GPU cycles (ncu's gpc__cycles_elapsed.avg), the mean over repetitions.")
    ] = None
    real_cycles_spread: Spread | None = None
    sim_cycles: Annotated[
        dict[str, float | None] | None,
        msgspec.Meta(description="With real cycles: each config's median gpu_sim_cycle over its replicas."),
    ] = None
    kernel_short_name: Annotated[str | None, msgspec.Meta(description=SHORT_NAME)] = None


class CounterRow(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    kernel_index: int
    real: Annotated[float | None, msgspec.Meta(description="The hardware counter's value, the mean over the trace's hardware repetitions.")]
    sim: Annotated[
        dict[str, float | None],
        msgspec.Meta(
            description="Per config of the comparison's `configs`: the median over its replicas of the kernel's own value of the "
            "stats (kernel_stats' `value`, never a running total), summed; null where no replica has them."
        ),
    ]
    real_spread: Annotated[Spread | None, msgspec.Meta(description="With two or more repetitions: their spread.")] = None


class CounterComparison(msgspec.Struct, frozen=True, kw_only=True):
    """A hardware counter of the trace's real timing against the simulator stats Accel-Sim's
    util/plotting/correl_mappings.py pairs it with."""

    label: Annotated[str, msgspec.Meta(description="correl_mappings.py's name for it, such as `L2 Reads`.")]
    hw_metric: Annotated[str, msgspec.Meta(description="Nsight Compute's metric, in its base unit (a count, or a percentage).")]
    sim_stats: Annotated[list[str], msgspec.Meta(description="The simulator's stats (docs/stats-naming.md) whose per-kernel values are summed.")]
    rows: Annotated[list[CounterRow], msgspec.Meta(description="A row per row of the comparison, by kernel_index.")]
    correlation: Annotated[dict[str, Correlation], msgspec.Meta(description="sim against real, per config, scored as `correlation` scores time.")]


class Comparison(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    has_real_timing: bool
    configs: Annotated[
        list[str],
        msgspec.Meta(
            description="The run's configs in the order of its entries. A config whose replicas ran config files of more than "
            "one digest (edited in place, then replicas added) is never pooled: it is listed once per digest, as `NAME@<first "
            "6 hex of the digest>` (GpuConfig.digest), such as `SM61_TITANX@1a4911`, in the order its replicas took them; a "
            "config of one digest keeps its name. sim_ns, sim_cycles and the scores are keyed by these."
        ),
    ]
    rows: list[ComparisonRow]
    correlation: Annotated[
        dict[str, Correlation] | None, msgspec.Meta(description="With real durations: sim_ns against real_ns, per config.")
    ] = None
    cycles_correlation: Annotated[
        dict[str, Correlation] | None, msgspec.Meta(description="With real cycles: sim_cycles against real_cycles, per config.")
    ] = None
    config_labels: Annotated[
        dict[str, str] | None,
        msgspec.Meta(
            description="The replicas of a config listed apart per digest in `configs`: each one's label there, by sim id; "
            "absent when every config's replicas ran the same files."
        ),
    ] = None
    # Present only on a partial comparison, so that a finished run's answer is as it was.
    partial: Annotated[
        bool,
        msgspec.Meta(
            description="True while the run is active, or when a config lacks a kernel row another config has: totals and "
            "ratios over the rows are then final only over the kernels_compared rows that every config has."
        ),
    ] = False
    kernels_done: Annotated[
        dict[str, int] | None, msgspec.Meta(description="When partial: per config, the kernel rows it has a sim_ns for.")
    ] = None
    kernels_compared: Annotated[
        int | None, msgspec.Meta(description="When partial: the kernel rows every config has a sim_ns for, over which to total and compare.")
    ] = None
    kernels_total: Annotated[int | None, msgspec.Meta(description="When partial: the trace's kernels, a row each once finished.")] = None
    counters: Annotated[
        dict[str, CounterComparison] | None,
        msgspec.Meta(
            description="With a real-timing file from Nsight Compute that has hardware counters: each, by a stable name (warp_instructions, "
            "l2_reads, l2_read_hits, l2_writes, l2_write_hits, l1d_reads, l1d_read_hits, l1d_writes, l1d_write_hits, dram_reads, "
            "dram_writes, occupancy), against its simulator stats; absent without counters."
        ),
    ] = None


# A fast sim against its reference (GET and POST /api/sims/{sim_id}/reference): Cascade's own,
# past the reference. Errors are signed, (fast - reference) / reference * 100, null where the
# reference's value is 0 or either is not known yet.


class ReferenceSim(msgspec.Struct, frozen=True, kw_only=True):
    sim_id: str
    state: SimState
    kernels_done: int
    wall_s: Annotated[float | None, msgspec.Meta(description="From its first launch to its end; null until it succeeded, and for a result taken from a deleted run's sim (its own time is unknown then).")]
    config_digests: Annotated[dict[str, str] | None, msgspec.Meta(description="Its config files' sha256, as its launch recorded them.")]


class ReferenceComparison(msgspec.Struct, frozen=True, kw_only=True):
    sim_id: Annotated[str, msgspec.Meta(description="The fast sim: split, reusing repeated kernels, or both.")]
    run_id: str
    gpu_config: str
    split: SplitView | None
    reuse: bool
    fast: ReferenceSim
    reference: ReferenceSim
    same_config: Annotated[
        bool | None,
        msgspec.Meta(description="Whether both sims ran config files of the same digests; null until both launched."),
    ]
    speedup: Annotated[float | None, msgspec.Meta(description="The reference's wall time over the fast sim's; null until both succeeded, or while either's is unknown.")]
    totals: ReferenceTotals
    kernels: Annotated[list[ReferenceKernel], msgspec.Meta(description="Every launch either sim has, by kernel_launch_uid.")]


# A run's stats by name (GET /api/runs/{run_id}/stats and .../stats/values): Cascade's own,
# past the reference. Names are docs/stats-naming.md's; `[*]` in a name stands for any index.


class StatName(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kernels: Annotated[dict[str, int], msgspec.Meta(description="Per config: how many of the run's kernels (by kernel_index) have it.")]


class StatTable(msgspec.Struct, frozen=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(description="A per-unit table: the matching names with each index as [*], e.g. L2_cache_bank[*].Miss_rate.")]
    stats: Annotated[int, msgspec.Meta(description="How many names it covers.")]


class StatCatalogue(msgspec.Struct, frozen=True, kw_only=True):
    names: Annotated[list[StatName], msgspec.Meta(description="The first of the names matching q, by name (indices as numbers).")]
    tables: Annotated[list[StatTable], msgspec.Meta(description="Every per-unit table among all the names matching q, sorted.")]
    truncated: Annotated[bool, msgspec.Meta(description="More names match than `names` holds.")]


class StatValuesRow(msgspec.Struct, frozen=True, kw_only=True):
    kernel_index: int
    kernel_name: Annotated[str, msgspec.Meta(description="From the first of the config's replicas that has the stat.")]
    gpu_config: str
    units: Annotated[list[int], msgspec.Meta(description="The indices the name's [*] matched, in order; empty without [*].")]
    replicas: Annotated[int, msgspec.Meta(description="The config's replicas whose stats have this kernel's value.")]
    median: Annotated[
        float | None,
        msgspec.Meta(description="The median over those replicas of the finite numbers; null when none is one (nan, inf, none)."),
    ]
    min: float | None
    max: float | None
    kernel_short_name: Annotated[str | None, msgspec.Meta(description=SHORT_NAME)] = None
    running_total: Annotated[
        float | None,
        msgspec.Meta(
            description="For a running total (or a ratio of two), which the log prints as a total since the start of the "
            "simulation: the median over those replicas of its total over each sim's launches up to this one; median, "
            "min and max are the kernel's own value. Absent for the other kinds of stat."
        ),
    ] = None


class StatValues(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    configs: Annotated[
        list[str],
        msgspec.Meta(
            description="As the run's comparison lists them (Comparison.configs): a config whose replicas ran config files of "
            "more than one digest once per digest, as `NAME@<first 6 hex of the digest>`, never pooled; rows and the "
            "catalogue's kernels name them so."
        ),
    ]
    stats: Annotated[list[str], msgspec.Meta(description="The names the run's kernels have that match, by their indices.")]
    rows: Annotated[list[StatValuesRow], msgspec.Meta(description="By kernel_index, config (the run's entry order), then units.")]
    truncated: Annotated[bool, msgspec.Meta(description="More rows match than the answer holds.")]


# A run's derived metrics (GET /api/runs/{run_id}/stats/derived): Cascade's own, past the
# reference; cascade_formats/derived_metrics.py has the formulas.


class DerivedMetric(msgspec.Struct, frozen=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(description="Its key in each row's `values`, e.g. l2_hit_rate.")]
    label: str
    unit: Annotated[Literal["ratio", "bytes", "GB/s", "inst/cycle"], msgspec.Meta(description="A ratio is 0 to 1.")]
    formula: Annotated[str, msgspec.Meta(description="How a kernel's value is computed, in its stats' and its config's options' names.")]
    over_kernels: Annotated[str, msgspec.Meta(description="How a config's value over its kernels is formed from theirs.")]
    stats: Annotated[list[str], msgspec.Meta(description="The stats it reads, each kernel's own value; [*] summed over units.")]
    options: Annotated[list[str], msgspec.Meta(description="The gpgpusim.config options it reads.")]


OptionsFrom = Literal["log", "config"]


class DerivedConfig(msgspec.Struct, frozen=True, kw_only=True):
    gpu_config: Annotated[str, msgspec.Meta(description="As StatValues.configs names it.")]
    options: Annotated[dict[str, str], msgspec.Meta(description="The values of the options the metrics read, as `options_from` gives them.")]
    options_from: Annotated[
        OptionsFrom | None,
        msgspec.Meta(
            description="`log`: the option dump of one of its sims' logs, what the simulator ran with; `config`: the config's "
            "gpgpusim.config as this server has it now (no sim's log had a dump); null when neither could be read."
        ),
    ]
    dram_peak_gbps: Annotated[float | None, msgspec.Meta(description="Peak DRAM bandwidth from those options; null if one is not set.")]
    sms: Annotated[int | None, msgspec.Meta(description="-gpgpu_n_clusters × -gpgpu_n_cores_per_cluster.")]
    error: Annotated[str | None, msgspec.Meta(description="Why its options could not be read (their metrics are null); null when read.")]
    replicas: Annotated[int, msgspec.Meta(description="Its replicas with kernels.")]
    kernels: Annotated[int, msgspec.Meta(description="Its kernel indices with stats.")]
    values: Annotated[
        dict[str, float | None],
        msgspec.Meta(description="By metric, over all its kernels: the median over replicas of each replica's value; null when none has one."),
    ]


class DerivedKernel(msgspec.Struct, frozen=True, kw_only=True):
    kernel_index: int
    kernel_name: str
    kernel_short_name: str
    gpu_config: str
    replicas: int
    values: Annotated[dict[str, float | None], msgspec.Meta(description="By metric: the median over the config's replicas; null when none has one.")]


class DerivedMetrics(msgspec.Struct, frozen=True, kw_only=True):
    metrics: Annotated[list[DerivedMetric], msgspec.Meta(description="What each value is, with its formula.")]
    configs: Annotated[list[DerivedConfig], msgspec.Meta(description="Per config (the run's entry order), its options and its values over its kernels.")]
    kernels: Annotated[list[DerivedKernel], msgspec.Meta(description="By kernel_index, then config; at most 50,000.")]
    truncated: Annotated[bool, msgspec.Meta(description="More kernels have stats than `kernels` holds; configs' values count them all.")]


class SimResults(msgspec.Struct, frozen=True, kw_only=True):
    sim: Sim
    trace_id: str
    gpu_config: GpuConfig | None
    kernels: list[KernelStat]
    totals: SimMetrics


class RunResults(msgspec.Struct, frozen=True, kw_only=True):
    run: RunSummary
    trace: TraceDetail
    sims: list[SimResults]
    comparison: Comparison


class SimFile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    size: int
    content_type: str
    created_at: datetime


class RunFile(SimFile, frozen=True, kw_only=True):
    sim_id: str
    gpu_config: str
    replica: int


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    task: Annotated[str, msgspec.Meta(description="What fails: a supervised task (projector, dispatcher, runner ...), nats or nats-server.")]
    error: str
    since: datetime
    restarts: int


class Rebuild(msgspec.Struct, frozen=True, kw_only=True):
    """The read model being rebuilt from the log, because another version of Cascade built
    it: reads answer from the old one, as it was, and requests that change something are
    refused (503) until the new one has caught up and taken its place."""

    reason: str  # what changed since the old one was built
    applied: int  # events the new one has applied, of the stream's `stream_seq`


class Health(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["ok", "degraded"]
    stream_seq: Annotated[int | None, msgspec.Meta(description="The log's last sequence; null while NATS does not answer.")]
    projected_seq: int  # the last event reads show
    queue_depth: Annotated[
        int | None,
        msgspec.Meta(description="Unfinished sims that no live runner holds: waiting for one. Null while NATS does not answer."),
    ]
    runners: Annotated[int | None, msgspec.Meta(description="Live runners; null while NATS does not answer.")]
    parked: int  # stored messages no consumer could use (`GET /api/parked`)
    problems: list[Problem]
    rebuild: Rebuild | None = None  # set while the read model is rebuilt


class ParkedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A stored message that is no event this version can use, or one it cannot apply:
    every consumer went on past it."""

    seq: int
    subject: str
    event_type: str | None
    error: str
    parked_at: datetime


SqlFormat = Literal["arrow", "csv", "json", "parquet"]  # in msgspec's order, which is pydantic's then


class SqlQuery(msgspec.Struct, frozen=True, kw_only=True):
    sql: Annotated[str, msgspec.Meta(min_length=1, description="One SELECT (WITH, FROM-first, VALUES, SHOW and DESCRIBE are SELECTs too).")]
    format: Annotated[
        SqlFormat,
        msgspec.Meta(description="`json` (an SqlAnswer), `csv` (with a header), `arrow` (an Arrow IPC stream) or `parquet`."),
    ] = "json"


class SqlColumn(msgspec.Struct, frozen=True):
    name: str
    type: Annotated[str, msgspec.Meta(description="DuckDB's name of the column's type, such as BIGINT, DOUBLE, VARCHAR or VARCHAR[].")]


class SqlAnswer(msgspec.Struct, frozen=True):
    """A query's answer as JSON: its columns, then its rows, each a list of values in the
    columns' order. A DOUBLE or FLOAT that is not a finite number is the string "NaN",
    "Infinity" or "-Infinity", as in stats maps; times are RFC 3339 texts, BLOBs base64."""

    columns: list[SqlColumn]
    rows: list[list[Any]]


class ErrorDetail(msgspec.Struct, frozen=True):
    detail: str


class ValidationIssue(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    type: str
    loc: list[str | int]
    msg: str
    input: Any
    ctx: dict[str, Any] | None = None


class ValidationErrorBody(msgspec.Struct, frozen=True):
    detail: list[ValidationIssue]


class SignIn(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What `POST /api/session` trades for a session: the API token, or a one-time sign-in
    code from the link `serve` printed; neither when the token is in the Authorization header."""

    token: str | None = None
    code: str | None = None
