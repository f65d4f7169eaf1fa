"""Every fact Cascade records, as one tagged union of versioned, immutable event types.

Each event carries its envelope (id, time, causation and correlation ids) in the keyword-only
base, and names its aggregate through its own id fields. The tag (`type`) ends in a version:
a schema change adds a new type and an upcaster (`UPCASTERS`), it never rewrites the log.
Events from the simulator runner are facts, not decisions: they carry the sim's `attempt`
so that facts from a superseded attempt can be told apart and ignored.

Events own every type they hold, and none carries a constraint: a stored event must decode
for as long as the log lives, so limits are the API's to check when a request comes in
(the requests' Structs, such as `runs.RunCreate`), never the log's when it is read back.
"""

from __future__ import annotations

import functools
import operator
import zlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, cast, get_args

import msgspec

from cascade_core import packed_stats, stats_v1
from cascade_core.packed_stats import PackedStats

class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True, gc=False):
    id: str
    at: datetime
    causation_id: str | None = None
    correlation_id: str | None = None


# --- traces -------------------------------------------------------------------------------


class StoredFile(msgspec.Struct, frozen=True):
    path: str
    bytes: int
    digest: str


class RealTiming(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    """A kernel launch as measured on hardware, in one pass over the program (`repeat`, from
    0): its duration, its GPU cycles (Nsight Compute's `gpc__cycles_elapsed.avg`), or both;
    and the hardware counters of `cascade_core.counters` the file has, by ncu's metric name
    in its base unit (absent in older events and without them). `kernel_id` is the launch's
    uid in the trace (in older events, the id the file gave it); either way it orders a
    pass's rows."""

    kernel_id: int
    kernel_name: str
    duration_ns: float | None
    repeat: int = 0
    cycles: float | None = None
    counters: dict[str, float] | None = None


class TraceEvent(Event, frozen=True, kw_only=True):
    trace_id: str


class TraceUploadStarted(TraceEvent, frozen=True, tag="trace.upload_started.v1"):
    content_type: str
    sample: bool = False


class TracePathAdded(TraceEvent, frozen=True, tag="trace.path_added.v1"):
    """A trace that lies at `path` on a filesystem the service shares with runners, added
    where it lies (`cascade trace add --path`): its files, with their digests as they were
    when it was added, follow in `trace.files_stored.v1` events; a runner reads them at
    `path` and refuses any whose digest has changed. With `copied`, they were also stored in
    the object store as an upload's are, and a runner that cannot see `path` fetches them."""

    path: str  # absolute, symbolic links resolved, under a root the operator allows
    copied: bool = False


class TraceFilesStored(TraceEvent, frozen=True, tag="trace.files_stored.v1"):
    """Some of the files of an upload, in the object store under `accelsim-traces/<id>/`.
    A large upload is announced in several of these so each stays small."""

    files: list[StoredFile]


class TraceKernel(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A kernel launch of the trace, as `kernelslist.g` and the kernel file's header say."""

    uid: int
    name: str
    grid: str
    block: str
    shmem: int
    nregs: int
    file: str
    cuda_stream_id: int | None = None


class TraceKernelsListed(TraceEvent, frozen=True, tag="trace.kernels_listed.v1"):
    kernels: list[TraceKernel]


UPLOAD_TIMING = "upload"  # the timing_id of the real timing an upload brought
TimingFormat = Literal["cascade", "ncu", "nsys"]  # the layouts of a real timing file (cascade_formats.realtiming)
Measure = Literal["duration_ns", "cycles"]  # what a real timing file measures


class TraceRealTimingListed(TraceEvent, frozen=True, tag="trace.real_timing_listed.v1"):
    """Rows of real timing, under `timing_id`: the upload's own (`real_timing.csv`), or one
    attached later, which only counts once its `trace.real_timing_attached.v1` follows."""

    rows: list[RealTiming]
    timing_id: str = UPLOAD_TIMING


class TraceRealTimingAttached(TraceEvent, frozen=True, tag="trace.real_timing_attached.v1"):
    """The rows listed under `timing_id` are the ready trace's real timing from here on, in
    place of `replaces`: the timing it had (`upload`, an earlier `timing_id`), or None for
    none. Applied only while the trace still has `replaces`, so a replacement says what it
    replaces and replays the same. `kernels`, `repeats`, `measures` and `format` describe the
    rows (`cascade_formats.realtiming`)."""

    timing_id: str
    replaces: str | None
    format: TimingFormat
    kernels: int
    repeats: int
    measures: list[Measure]
    counters: list[str] = []  # the hardware counters the rows carry (ncu metric names); none in older events


class TraceReady(TraceEvent, frozen=True, tag="trace.ready.v1"):
    trace_gpu_arch: str
    kernel_count: int
    bytes: int
    suggested_sim_config: str | None
    has_real_timing: bool
    has_step_timeline: bool
    model: str | None = None
    layers: list[str | int] = []
    source_gpu: str | None = None


class TraceFailed(TraceEvent, frozen=True, tag="trace.failed.v1"):
    error: str
    bytes: int = 0


class TraceDeleted(TraceEvent, frozen=True, tag="trace.deleted.v1"):
    pass


# --- runs ---------------------------------------------------------------------------------


class Split(msgspec.Struct, frozen=True, gc=False):
    """A sim cut into chunks of `kernels_per_chunk` launches, each simulated after `warmup`
    launches before it whose results are discarded (`cascade_core/split.py`)."""

    kernels_per_chunk: int
    warmup: int


class ConfigCount(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """One entry of a run as it was requested: a GPU config, how many sims run it, how
    they are split ("auto": as `split.auto` chose, in the sims' `split`), whether they
    reuse repeated kernels' results (`cascade_core/reuse.py`), and whether each has a
    reference sim beside it."""

    gpu_config: str
    count: int
    split: Split | Literal["auto"] | None = None
    reuse: bool = False
    reference: bool = False  # each sim has a reference sim too (`SimSpec.reference_for`)
    fresh: bool = False  # its sims are simulated even when a sim alike already succeeded (no result cache)
    # Simulator options of the entry's own: its sims run the unnamed variant of `gpu_config`
    # they make (`variants.unnamed_name`), whose event holds the files.
    options: dict[str, str] | None = None


class SimSpec(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    sim_id: str
    gpu_config: str
    replica: int
    split: Split | None = None  # None: simulated whole
    reuse: bool = False  # a kernel simulated twice in the sim is not simulated again
    # The split or reusing sim of the run this one is the reference of: the same trace and
    # config simulated whole and in sequence, which the fast sim's results are measured
    # against (`cascade_core/reference.py`). None for every other sim.
    reference_for: str | None = None
    fresh: bool = False  # simulated even when a sim alike already succeeded (`ConfigCount.fresh`)


class RunCreated(Event, frozen=True, tag="run.created.v1"):
    run_id: str
    trace_id: str
    entries: list[ConfigCount]
    sims: list[SimSpec]
    kernels_total: int
    sample: bool = False
    name: str | None = None  # a person's name for the run (`runs.RunCreate`)
    tags: list[str] = []


class RunCancelRequested(Event, frozen=True, tag="run.cancel_requested.v1"):
    """Every sim of the run not finished at this point in the log becomes cancelled."""

    run_id: str


class RetriedSim(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A failed or cancelled sim to run again, as attempt `attempt` (the one after its last)."""

    sim_id: str
    gpu_config: str
    attempt: int
    reuse: bool = False  # as the sim was created: its new attempt reuses repeated kernels too


class RetriedChunk(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A failed or cancelled chunk of a split sim (cut as `split`) to run again, as attempt
    `attempt` of the chunk (the one after its last); its sim's finished chunks are kept."""

    sim_id: str
    gpu_config: str
    chunk: int
    split: Split
    attempt: int
    reuse: bool = False


class RunRetryRequested(Event, frozen=True, tag="run.retry_requested.v1"):
    """Each listed sim (or chunk of a split sim) that is still failed or cancelled at its
    attempt before `attempt` waits for a runner again, for that attempt
    (`cascade_core/sims.py`: `retried`)."""

    run_id: str
    trace_id: str
    kernels_total: int
    sims: list[RetriedSim]
    chunks: list[RetriedChunk] = []  # of split sims


class RunEntriesAdded(Event, frozen=True, tag="run.entries_added.v1"):
    """More sims for a run (a top-up): `entries` as requested, fanned out to `sims`, each
    numbered on from the replicas its config has. `key`: the request's idempotency key, so
    the same request twice adds once. A sim's reference asked for later (`POST
    /api/sims/{id}/reference`) is added so too, with no entry: it is no sim the run's entries
    asked for."""

    run_id: str
    trace_id: str
    kernels_total: int
    entries: list[ConfigCount]
    sims: list[SimSpec]
    key: str | None = None


class RunDeleted(Event, frozen=True, tag="run.deleted.v1"):
    """The run is gone from the read model, its sims and all they hold with it; its events
    stay in the log for audits. Decided only once none of its sims is unfinished
    (`cascade_core/runs.py`: `decide_delete`), so no runner works for it any more."""

    run_id: str


# --- campaigns ----------------------------------------------------------------------------


class CampaignEvent(Event, frozen=True, kw_only=True):
    """An event of a campaign: a named, tagged set of runs (`cascade_core/campaigns.py`). Its
    subject is its name's, so that a name is taken once."""

    campaign_id: str
    name: str


class CampaignCreated(CampaignEvent, frozen=True, tag="campaign.created.v1"):
    """A campaign named: its runs come after, in `campaign.runs_added.v1`. `baseline`: the
    config its table is normalised to unless a reader asks for another."""

    tags: list[str] = []
    baseline: str | None = None


class CampaignRun(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    run_id: str
    trace_id: str


class CampaignRunsAdded(CampaignEvent, frozen=True, tag="campaign.runs_added.v1"):
    """Runs made for the campaign, one per trace, each created as any run is (`run.created.v1`):
    at its creation, and for the traces a top-up adds."""

    runs: list[CampaignRun]


# --- sims ---------------------------------------------------------------------------------


class SimEvent(Event, frozen=True, kw_only=True):
    run_id: str
    sim_id: str
    # Which chunk of a split sim (from 0) a launch request or a runner's fact is about; None
    # for a sim simulated whole. A chunk lives as a sim does (`cascade_core/sims.py`), the
    # sim's state following from its chunks'.
    chunk: int | None = None


class SimMetrics(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A sim's cumulative metrics so far, as the simulator last printed them."""

    gpu_tot_sim_cycle: float | None = None
    gpu_tot_sim_insn: float | None = None
    gpu_tot_ipc: float | None = None
    sim_rate_ips: float | None = None


class SimQueued(SimEvent, frozen=True, tag="sim.queued.v1"):
    """A launch request, one per sim (per chunk of a split sim), taken by exactly one runner.
    `by_config`: placed on its config's launch subject, which only runners that have the
    config consume (`subjects.of`), as every request is since placement by config; an older
    one is on the subject every runner consumed."""

    trace_id: str
    gpu_config: str
    kernels_total: int
    split: Split | None = None
    # The attempt a retry asked for (`run.retry_requested.v1`); 0 for a sim's first request,
    # whose claim is attempt 1 or, after a lost runner, the next.
    attempt: int = 0
    reuse: bool = False
    by_config: bool = False
    # Simulated even when a sim alike already succeeded: the runner asks no result cache
    # (`cascade_sim/result_cache.py`).
    fresh: bool = False


class Resume(msgspec.Struct, frozen=True, gc=False):
    """An attempt that takes over from a lost runner's where it stopped: it measures the
    sim's (or its chunk's) launches from `first` on, after `warmup` launches before it
    simulated and discarded, and the results of the launches before `first` are the earlier
    attempts' (`cascade_core/split.py`: `resumed`)."""

    first: int
    warmup: int


class SimClaimed(SimEvent, frozen=True, tag="sim.claimed.v1"):
    """`resume`: the attempt resumes a lost runner's (absent: it starts from the first launch)."""

    attempt: int
    runner_id: str
    host: str
    resume: Resume | None = None


class SimLaunched(SimEvent, frozen=True, tag="sim.launched.v1"):
    """`launcher_ref`: what the simulator runs as, the simulator's pid for a runner on its own,
    the Slurm job's id for one in a Slurm job; `runner_id`: the runner that claimed the
    attempt (absent in older events), so the newest life event always names it."""

    attempt: int
    launcher_ref: str
    host: str
    config_digests: dict[str, str]
    accel_sim_build: str | None = None
    gpgpu_sim_build: str | None = None
    runner_id: str | None = None
    # The sim whose result this attempt took instead of simulating (`cascade_sim/result_cache.py`):
    # its events follow, re-addressed, and its build and config digests are the source's.
    cached_from: str | None = None


class SimHeartbeat(SimEvent, frozen=True, tag="sim.heartbeat.v1"):
    """Progress, and the log lines printed since the last heartbeat: `text` holds them joined
    by newlines, the first numbered `first_line_seq` (a sim's lines count from 1). One text
    rather than a list of lines, since a sim prints hundreds of thousands. The runner sends
    them compressed (`log_deflated`, the xz of the UTF-8, or its zlib in older heartbeats;
    `cascade_nats.deflated.log_text` reads any); older still carry them in `log`."""

    attempt: int
    kernels_done: int
    current_kernel: str | None
    latest: SimMetrics
    first_line_seq: int = 0
    log: str = ""
    # Base64 in the JSON: as xz, a seventeenth of the text's bytes for Accel-Sim's output, as
    # zlib a sixth (bench/README.md, "The heartbeats' lines as xz"): the event stream,
    # nats-server's writes and serve's reads shrink by that.
    log_deflated: bytes | None = None


def log_utf8(beat: SimHeartbeat, inflate: Callable[[bytes], bytes] = zlib.decompress) -> bytes:
    """The heartbeat's lines, joined by newlines, as UTF-8. `inflate` undoes the zlib of
    older heartbeats: the standard library's here, ISA-L's for every reader of the whole log
    (`cascade_nats/deflated.py`), which the core does not import."""
    packed = beat.log_deflated
    if packed is None:
        return beat.log.encode()
    return packed_stats.decompressed(packed, inflate)


def log_text(beat: SimHeartbeat, inflate: Callable[[bytes], bytes] = zlib.decompress) -> str:
    """`log_utf8` decoded."""
    return beat.log if beat.log_deflated is None else log_utf8(beat, inflate).decode()


def lines_in(text: str) -> int:
    """How many lines a heartbeat's text holds (`deflated.log_text`: the fold reads it once for
    its count and its tail)."""
    return text.count("\n") + 1 if text else 0


class KernelFinished(SimEvent, frozen=True, tag="sim.kernel_finished.v2"):
    attempt: int
    kernel_index: int
    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    sim_time_ns: float
    # The stats map, every value of the block, packed (`cascade_core/packed_stats.py`): a
    # fraction of its JSON's size (bench/README.md). None: the result has no map.
    stats: PackedStats | None = None
    # Which naming rule made the stats map's keys (docs/stats-naming.md): 1 for events
    # written before the rule had a number (`Access#2`, lines without "=" left out), 2 for
    # the current one.
    stats_naming: int = 1
    # The launch (uid) whose result this is, for a kernel not simulated in a sim that reuses
    # repeated kernels (`cascade_core/reuse.py`); None for a kernel simulated.
    reused_from: int | None = None
    # Each value of `stats` less the same name's in the block the same simulator process
    # printed before it (none before, or no such name there: less 0), as a float64 each in
    # `stats`' order, in zlib's format: the runner alone sees every block in order, a chunk's
    # and a resume's warm-up ones included. What a running total's per-kernel value is made
    # from (docs/architecture.md, "Per-kernel values"); a reused kernel's are its source's.
    # None in events from before it, and in those whose `stats` carries them with its values
    # (`PackedStats.with_differences`, a fifth smaller together).
    per_kernel: bytes | None = None


class SimFileStored(SimEvent, frozen=True, tag="sim.file_stored.v1"):
    attempt: int
    name: str
    size: int
    content_type: str
    object_name: str
    digest: str


class PartialKernel(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The launch the simulator was running when it stopped at its limit: it printed a stats
    block for it with no kernel name, whose counts cover only the part it simulated."""

    uid: int
    name: str | None  # as its launch line named it; None when the log had none
    gpu_sim_cycle: int
    gpu_sim_insn: int


class CutShort(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A sim (or chunk) that ran to a normal exit without simulating all its launches: the
    simulator stopped at a limit it was given (`limit_option`, such as `-gpgpu_max_cycle`, with
    its `limit_value`; None when the log names none), or ended with launches of its kernel list
    never run. `kernels_done` of `kernels_total` launches finished; `partial` the one it cut."""

    limit_option: str | None = None
    limit_value: int | None = None
    kernels_done: int
    kernels_total: int
    partial: PartialKernel | None = None


class SimFinished(SimEvent, frozen=True, tag="sim.finished.v1"):
    attempt: int
    outcome: Literal["succeeded", "failed"]
    exit_code: int | None = None
    error: str | None = None
    # A success that did not simulate every launch (None: it did, or it failed); events
    # recorded before it was told have none.
    cut_short: CutShort | None = None


# --- runners ------------------------------------------------------------------------------


class RunnerEnded(Event, frozen=True, tag="runner.ended.v1"):
    """The scheduler a runner ran under ended it (`launcher` "slurm": the job `launcher_ref`),
    as that scheduler accounts for it: `state` in its words (Slurm's TIMEOUT, OUT_OF_MEMORY,
    PREEMPTED, NODE_FAIL, CANCELLED, ...), `reason` a line for people. Sims whose attempt the
    runner held are decided from it when their requests come back (`sims.decide`)."""

    runner_id: str
    launcher: str
    launcher_ref: str
    state: str
    reason: str


# --- GPU configs ---------------------------------------------------------------------------


class GpuConfigDerived(Event, frozen=True, tag="gpu_config.derived.v1"):
    """A config variant: config `base`'s files with `options` set in its gpgpusim.config
    (`cascade_core/variants.py`), stored in the object store under their sha256
    (`object_names.config_file`), `files` by name. `unnamed`: made for a run entry's own
    options, named after its base and their digest. Runners that have the base run it."""

    name: str
    base: str
    options: dict[str, str]
    files: dict[str, str]  # file name -> sha256 (hex)
    arch: str
    core_clock_mhz: float
    unnamed: bool = False


class StatNamesDefined(Event, frozen=True, tag="stat_names.defined.v1"):
    """A set of stats maps' names (`packed_stats`): `names`, its text, known as `digest`, which
    kernel results whose maps have those names carry instead of it (`PackedStats.names_digest`).
    A runner stores it before the first result that names it; more than one of a set may be
    stored (by runners, or one after a restart), all alike."""

    digest: str
    names: str


AnyEvent = (
    TraceUploadStarted
    | TracePathAdded
    | TraceFilesStored
    | TraceKernelsListed
    | TraceRealTimingListed
    | TraceRealTimingAttached
    | TraceReady
    | TraceFailed
    | TraceDeleted
    | RunCreated
    | RunCancelRequested
    | RunRetryRequested
    | RunEntriesAdded
    | RunDeleted
    | CampaignCreated
    | CampaignRunsAdded
    | SimQueued
    | SimClaimed
    | SimLaunched
    | SimHeartbeat
    | KernelFinished
    | SimFileStored
    | SimFinished
    | RunnerEnded
    | GpuConfigDerived
    | StatNamesDefined
)

# --- old versions -------------------------------------------------------------------------


class KernelFinishedV1(SimEvent, frozen=True, tag="sim.kernel_finished.v1"):
    """A kernel result with its stats map as the JSON object the read model stored: ~30 to
    430 KB for a real kernel, near the event size limit. Read as `KernelFinished`."""

    attempt: int
    kernel_index: int
    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    sim_time_ns: float
    stats: msgspec.Raw = msgspec.Raw(b"{}")
    stats_naming: int = 1


def _kernel_finished_v2(old: KernelFinishedV1) -> KernelFinished:
    fields = msgspec.structs.asdict(old)
    return KernelFinished(**{**fields, "stats": stats_v1.packed(old.stats, old.name)})


# Old event type -> the function giving its next form: the current type, or a newer old one
# that is upcast in turn. An old type stays defined in this module, out of `AnyEvent`, for as
# long as the log may hold it; decoding keeps every stored version readable, and folds only
# ever see current types.
UPCASTERS: dict[type[Event], Callable[[Any], Event]] = {KernelFinishedV1: _kernel_finished_v2}


class Unreadable(ValueError):
    """A stored message that is no event this version can use: not JSON, not an event, a type
    or version it does not know (from a newer Cascade), or an event stored on a subject it
    does not belong to. Consumers park it and go on past it. `event_type` is the type the
    message names, when it names one."""

    def __init__(self, error: str, event_type: str | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.event_type = event_type


class _Named(msgspec.Struct):
    """What a message says it is, read without the rest of it."""

    type: object = None


_encoder = msgspec.json.Encoder()
_named = msgspec.json.Decoder(_Named)
_JOIN_BELOW = 4096  # bytes per event on average


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def tag_of(event_class: type[Event]) -> str:
    return cast(str, event_class.__struct_config__.tag)


def event_type(event: Event) -> str:
    return tag_of(type(event))


class Codec:
    """Reads stored events: one of the `current` types as it is, one of an old type (a key of
    `upcasters`) as the current type its upcasters make of it."""

    def __init__(self, current: Sequence[type[Event]], upcasters: Mapping[type[Event], Callable[[Any], Event]]) -> None:
        stored = [*current, *upcasters]
        self._decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(functools.reduce(operator.or_, stored))
        self._upcasters = dict(upcasters)
        self._current = frozenset(current)
        self._known = frozenset(map(tag_of, stored))

    def decode(self, data: bytes) -> Event:
        """One stored event in its current form; `Unreadable` if it is none."""
        try:
            event = self._decoder.decode(data)
        except msgspec.DecodeError as err:
            raise self._unreadable(data, err) from err
        return self._upcast(event) if type(event) in self._upcasters else event

    def decode_all(self, data: Sequence[bytes]) -> list[Event]:
        """Many events. Small ones go to the decoder in one call, as JSON lines (encoded JSON
        holds no raw newline), which saves a call each; big ones (heartbeats' logs, stats maps) one
        by one, since joining them would copy every byte once more. `Unreadable` names the
        first message that is no event."""
        if len(data) > 1 and sum(map(len, data)) < _JOIN_BELOW * len(data):
            try:
                events = self._decoder.decode_lines(b"\n".join(data))
            except msgspec.DecodeError:
                events = []  # one of them is no event: decoded one by one, it is named
            if len(events) == len(data):  # else an empty payload made no line: decode one by one to name it
                if not self._upcasters:
                    return events
                return [self._upcast(event) if type(event) in self._upcasters else event for event in events]
        return [self.decode(one) for one in data]

    def _unreadable(self, data: bytes, err: msgspec.DecodeError) -> Unreadable:
        try:
            named = _named.decode(data).type
        except msgspec.DecodeError:
            return Unreadable(f"not an event: {err}")
        if not isinstance(named, str):
            return Unreadable(f"not an event: {err}")
        if named not in self._known:
            return Unreadable(f"unknown event type {named!r} (written by a newer version?)", named)
        return Unreadable(f"not a valid {named}: {err}", named)

    def _upcast(self, event: Event) -> Event:
        stored = event_type(event)
        for _ in self._upcasters:  # each step leaves an old type behind: a chain has no more
            upcast = self._upcasters.get(type(event))
            if upcast is None:
                break
            try:
                event = upcast(event)
            except Exception as err:  # noqa: BLE001 - whatever an upcaster trips on, the event is unusable
                raise Unreadable(f"cannot upcast {event_type(event)}: {err}", stored) from err
        if type(event) not in self._current:
            raise Unreadable(f"upcasting {stored} gave a {type(event).__name__}, which is no current event type", stored)
        return event


_CODEC = Codec(get_args(AnyEvent), UPCASTERS)


def decode(data: bytes) -> AnyEvent:
    """One stored event in its current form; `Unreadable` if it is none."""
    return cast(AnyEvent, _CODEC.decode(data))


def decode_all(data: Sequence[bytes]) -> list[AnyEvent]:
    """Many stored events in their current form (`Codec.decode_all`)."""
    return cast(list[AnyEvent], _CODEC.decode_all(data))

