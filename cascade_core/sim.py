"""A sim as the domain holds it: its lifecycle (decided by `sims.py`), its attempts before the
current one, the attempts that resumed a lost runner's, a split sim's chunks, its progress,
running totals and outcome; and `evolve`, the one place an event changes any of it.

A sim run whole and each chunk of a split sim are lives of one kind (`Life`: a `Sim` or a
`SimChunk`): a claim starts their attempt the same way (`_started`), and a heartbeat moves
their progress on the same way (`_beat`). A split sim's own state, progress and totals follow
from its chunks' (`_stitched`).

Pure: an event and the sim in, the sim out, `sim` itself when nothing changed, so a caller can
tell a change by identity. The read model stores a sim as its row (`projections/rows.py`), the
runner's report decides with its life (`cascade_sim/sim_report.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, assert_never

import msgspec

from cascade_core import events as ev
from cascade_core import sims
from cascade_core import split as splitting

LOG_TAIL = 20  # the last log lines a sim keeps


def totals(cycles: float | None, insn: float | None, sim_rate_ips: float | None = None) -> ev.SimMetrics:
    """Running totals with `gpu_tot_ipc` as the simulator prints it (`gpu_tot_ipc = %12.4f`)."""
    ipc = round(insn / cycles, 4) if cycles and insn is not None else None
    return ev.SimMetrics(gpu_tot_sim_cycle=cycles, gpu_tot_sim_insn=insn, gpu_tot_ipc=ipc, sim_rate_ips=sim_rate_ips)


class Resumed(msgspec.Struct, frozen=True, kw_only=True):
    """An attempt that took over from a lost runner's where it stopped."""

    attempt: int
    first: Annotated[int, msgspec.Meta(description="The first launch (uid) it simulated: those before are earlier attempts' results, kept.")]
    warmup: Annotated[int, msgspec.Meta(description="Launches before `first` it simulated first and discarded, to warm the caches.")]


class SimAttempt(msgspec.Struct, frozen=True, kw_only=True):
    attempt: int
    state: Annotated[
        Literal["failed", "cancelled", "lost"],
        msgspec.Meta(description="How it ended: failed, cancelled, or lost (its runner stopped responding and another attempt took over)."),
    ]
    error: str | None
    exit_code: int | None
    runner_id: str | None
    host: str | None
    started_at: datetime | None
    finished_at: datetime | None


class SimChunk(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One chunk of a split sim: its life as `sims.py` evolves it, and its progress
    (measured kernels only, totals summed over them)."""

    state: str = "pending"
    attempt: int = 0
    runner_id: str | None = None
    host: str | None = None
    error: str | None = None
    exit_code: int | None = None
    kernels_done: int = 0
    gpu_tot_sim_cycle: float | None = None
    gpu_tot_sim_insn: float | None = None
    sim_rate_ips: float | None = None
    last_heartbeat_at: datetime | None = None
    log_seq: int = 0  # the highest log line sequence of the chunk recorded
    resumed: list[Resumed] = []  # the chunk's attempts that resumed a lost runner's
    started_at: datetime | None = None  # its current attempt's launch
    finished_at: datetime | None = None  # its current attempt's end


class SimSplit(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """How a split sim was cut, and its chunks."""

    kernels_per_chunk: int
    warmup: int
    chunks: list[SimChunk]

    @property
    def cut(self) -> ev.Split:
        return ev.Split(kernels_per_chunk=self.kernels_per_chunk, warmup=self.warmup)


class Sim(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    id: str
    run_id: str
    gpu_config: str
    replica: int
    state: str
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
    gpu_tot_sim_cycle: float | None
    gpu_tot_sim_insn: float | None
    gpu_tot_ipc: float | None
    sim_rate_ips: float | None
    # Its last LOG_TAIL log lines, each ending in a newline, as one text: a list would be a
    # LIST column, which DuckDB updates as a delete and insert at every heartbeat.
    log_tail: str
    log_seq: int  # the highest log line sequence recorded
    kernels_recorded: int  # kernel results recorded for the current attempt
    attempt: int
    runner_id: str | None
    host: str | None
    config_digests: dict[str, str] | None  # its launch's config files: file -> sha256
    accel_sim_build: str | None
    gpgpu_sim_build: str | None
    split: SimSplit | None  # a split sim's cut and chunks; None for a sim whole
    reuse: bool  # it reuses repeated kernels' results (`cascade_core/reuse.py`)
    attempts: list[SimAttempt]  # the attempts before the current one, as they ended
    reference_for: str | None  # the split or reusing sim this one is the reference of (`events.SimSpec`)
    resumed: list[Resumed]  # the attempts that resumed a lost runner's
    # It succeeded without simulating every launch (the simulator stopped at a limit it was
    # given, `-gpgpu_max_cycle` and the like, or left launches unrun), as its runner read the
    # simulator's output: its results cover only the launches before, so a comparison must not
    # take them for the whole trace's. A split sim's is its first chunk's cut short.
    cut_short: ev.CutShort | None = None
    sample: bool = False  # of a sample run (`cascade_sim/samples.py`), which ships with Cascade
    # The sim whose result its attempt took instead of simulating (`events.SimLaunched.cached_from`);
    # a split sim's is its first chunk launched's.
    cached_from: str | None = None

    @property
    def chunk(self) -> None:
        """The sim whole's life (`sims.Lifecycle`); a chunk's is in `split`."""
        return None

    @property
    def life(self) -> sims.SimLife:
        return sims.SimLife(run_id=self.run_id, sim_id=self.id, state=self.state, attempt=self.attempt, runner_id=self.runner_id, host=self.host)

    def chunk_life(self, index: int) -> sims.SimLife:
        assert self.split is not None
        c = self.split.chunks[index]
        return sims.SimLife(run_id=self.run_id, sim_id=self.id, state=c.state, attempt=c.attempt, runner_id=c.runner_id, host=c.host, chunk=index)

    @property
    def log_lines(self) -> list[str]:
        """The lines of `log_tail`."""
        return self.log_tail.split("\n")[:-1]

    @property
    def latest(self) -> ev.SimMetrics:
        return ev.SimMetrics(
            gpu_tot_sim_cycle=self.gpu_tot_sim_cycle, gpu_tot_sim_insn=self.gpu_tot_sim_insn, gpu_tot_ipc=self.gpu_tot_ipc, sim_rate_ips=self.sim_rate_ips
        )


Life = TypeVar("Life", Sim, SimChunk)


def cut_short_said(cut: ev.CutShort) -> str:
    """What a sim cut short means, in words: a limit reached (some configs limit instructions
    on purpose, as Accel-Sim's `-1B_INSN` ones do), not an error."""
    done = f"{cut.kernels_done} of {cut.kernels_total} launches simulated"
    if cut.limit_option is not None:
        said = f"stopped at its limit {cut.limit_option} {cut.limit_value}: {done}"
    else:
        said = f"ended with {cut.kernels_total - cut.kernels_done} launches of its list not run: {done}"
    if cut.partial is not None:
        said += f"; launch {cut.partial.uid}, cut after {cut.partial.gpu_sim_cycle} cycles, is left out of every total"
    return said


def new(e: ev.RunCreated | ev.RunEntriesAdded, spec: ev.SimSpec) -> Sim:
    """A sim as its run lists it: pending, nothing run yet."""
    split = None
    if spec.split is not None:
        count = splitting.chunk_count(e.kernels_total, spec.split)
        split = SimSplit(kernels_per_chunk=spec.split.kernels_per_chunk, warmup=spec.split.warmup, chunks=[SimChunk()] * count)
    return Sim(
        id=spec.sim_id, run_id=e.run_id, gpu_config=spec.gpu_config, replica=spec.replica, state="pending", error=None, created_at=e.at,
        finished_at=None, exit_code=None, kernels_total=e.kernels_total, attempt=0, runner_id=None, host=None, config_digests=None,
        accel_sim_build=None, gpgpu_sim_build=None, split=split, reuse=spec.reuse, attempts=[], reference_for=spec.reference_for,
        resumed=[], sample=isinstance(e, ev.RunCreated) and e.sample, **_NO_PROGRESS,  # a sample run takes no top-up
    )


# What an attempt's run sets: a sim starts without, and a new attempt starts over.
_NO_PROGRESS: dict[str, Any] = {
    "launcher_ref": None,
    "started_at": None,
    "last_heartbeat_at": None,
    "kernels_done": 0,
    "current_kernel": None,
    "gpu_tot_sim_cycle": None,
    "gpu_tot_sim_insn": None,
    "gpu_tot_ipc": None,
    "sim_rate_ips": None,
    "log_tail": "",
    "log_seq": 0,
    "kernels_recorded": 0,
    "cut_short": None,
    "cached_from": None,
}


# --- one mechanism for a sim whole and a chunk ---------------------------------------------


def _lived(life: Life, after: sims.SimLife, **changes: Any) -> Life:
    """`life` at the lifecycle `after`, with `changes`; a sim whole's attempt that another one
    replaces (a retry, or a lost runner's) goes to its past attempts."""
    if isinstance(life, Sim) and after.attempt != life.attempt and life.attempt and life.state != "pending":
        changes["attempts"] = [*life.attempts, _past(life)]
    return msgspec.structs.replace(life, state=after.state, attempt=after.attempt, runner_id=after.runner_id, host=after.host, **changes)


def _past(sim: Sim) -> SimAttempt:
    """The sim's current attempt as one of its past ones: how it ended, or lost when a new
    attempt took over from an unfinished one."""
    lost = sim.state in sims.UNDER_WAY
    return SimAttempt(
        attempt=sim.attempt,
        state="lost" if lost else sim.state,  # type: ignore[arg-type]  # failed or cancelled: a retry replaces nothing else
        error=f"runner lost: {sim.runner_id} on {sim.host} stopped responding" if lost else sim.error,
        exit_code=sim.exit_code,
        runner_id=sim.runner_id,
        host=sim.host,
        started_at=sim.started_at,
        finished_at=sim.finished_at,
    )


def _started(life: Life, e: ev.SimClaimed, first: int) -> dict[str, Any]:
    """What a claim of a new attempt makes of a life's progress: it starts over, or, taking
    over from a lost runner's (`e.resume`), keeps what that recorded before the resume's first
    launch (the life's launches are from `first`). Either way the attempt's heartbeats are
    judged by its own clock: a runner whose clock is behind the lost one's is still heard."""
    if e.resume is None or not life.attempt:
        return {"kernels_done": 0, "gpu_tot_sim_cycle": None, "gpu_tot_sim_insn": None, "sim_rate_ips": None, "last_heartbeat_at": None, "log_seq": 0}
    resumed = Resumed(attempt=e.attempt, first=e.resume.first, warmup=e.resume.warmup)
    return {"kernels_done": e.resume.first - first, "sim_rate_ips": None, "last_heartbeat_at": None, "resumed": [*life.resumed, resumed]}


def _beat(life: Life, e: ev.SimHeartbeat, last_line: int) -> dict[str, Any]:
    """What a heartbeat makes of a life's progress: its lines (up to `last_line`) recorded, and
    its counts and totals when it is the latest heard."""
    changes: dict[str, Any] = {}
    if last_line > life.log_seq:
        changes["log_seq"] = last_line
    if life.last_heartbeat_at is None or e.at > life.last_heartbeat_at:
        latest = e.latest
        changes["last_heartbeat_at"] = e.at
        changes["kernels_done"] = e.kernels_done
        changes["gpu_tot_sim_cycle"] = latest.gpu_tot_sim_cycle
        changes["gpu_tot_sim_insn"] = latest.gpu_tot_sim_insn
        changes["sim_rate_ips"] = latest.sim_rate_ips
    return changes


def _tail(sim: Sim, text: str, count: int, fresh_from: int) -> str:
    """The sim's `log_tail` once the `count` lines of `text` from `fresh_from` on are added:
    as many of the old tail's first lines as the new ones push out are cut off in one piece
    (a replay's heartbeats bring a line or two each)."""
    fresh = min(LOG_TAIL, count - fresh_from)  # the lines of `text` the tail takes
    added = (text if fresh == count else "\n".join(text.rsplit("\n", LOG_TAIL)[-fresh:])) + "\n"
    if fresh == LOG_TAIL:
        return added
    pushed_out = sim.log_tail.count("\n") + fresh - LOG_TAIL
    return (sim.log_tail if pushed_out <= 0 else sim.log_tail.split("\n", pushed_out)[pushed_out]) + added


# --- what an event makes of a sim ----------------------------------------------------------


Evolving = sims.SimLifeEvent | ev.RunRetryRequested


def evolve(sim: Sim, event: Evolving) -> Sim:
    """The sim after `event`; `sim` itself when the event changes nothing."""
    match event:
        case ev.SimHeartbeat():
            if event.sim_id != sim.id or not takes(sim, event):
                return sim
            text = ev.log_text(event)
            return heartbeat(sim, event, text, ev.lines_in(text))
        case ev.RunRetryRequested():
            return _retried(sim, event)
        case ev.RunCancelRequested():
            if event.run_id != sim.run_id:
                return sim
            if sim.split is not None:
                return _chunks_lived(sim, event)
            return _whole_lived(sim, event)
        case ev.SimQueued():
            return sim
        case _:
            if event.sim_id != sim.id or event.run_id != sim.run_id:
                return sim
            if event.chunk is None:
                return _whole(sim, event)
            if sim.split is None:
                return sim  # a chunk of a sim that is not split says nothing that counts
            return _chunk(sim, event)


def takes(sim: Sim, fact: sims.Fact) -> bool:
    """Whether the sim takes a runner's fact (its data: a kernel, log lines, a file): one of its
    current attempt, or of its chunk's; a chunk's kernel only while the sim runs (its kernels,
    log and files are all stored under the sim's attempt)."""
    if fact.chunk is None:
        return sims.counts(sim, fact)
    if sim.split is None:
        return False
    _check_chunk(sim, fact.chunk)
    if not sims.counts(sim.chunk_life(fact.chunk), fact):
        return False
    return type(fact) is not ev.KernelFinished or sims.current(sim, sim.attempt)


def heartbeat(sim: Sim, e: ev.SimHeartbeat, text: str, count: int) -> Sim:
    """The sim after a heartbeat it takes (`takes`), whose `count` lines are `text` (given: a
    deflated heartbeat's are inflated at each read, and counted over all their length)."""
    if e.chunk is not None:
        return _chunk_beat(sim, e, text, count)
    fresh_from = max(0, sim.log_seq + 1 - e.first_line_seq)  # how many of its lines were recorded already
    changes = _beat(sim, e, e.first_line_seq + count - 1 if fresh_from < count else 0)
    if fresh_from < count:
        changes["log_tail"] = _tail(sim, text, count, fresh_from)
    if "last_heartbeat_at" in changes:
        changes["current_kernel"] = e.current_kernel
        changes["gpu_tot_ipc"] = e.latest.gpu_tot_ipc
    return msgspec.structs.replace(sim, **changes) if changes else sim


_Told = ev.SimClaimed | ev.SimLaunched | ev.KernelFinished | ev.SimFileStored | ev.SimFinished  # what a runner tells of a sim


def _whole(sim: Sim, e: _Told) -> Sim:
    match e:
        case ev.KernelFinished():
            return recorded(sim, e.kernel_index) if sims.counts(sim, e) else sim
        case ev.SimFileStored():
            return sim
        case ev.SimClaimed() | ev.SimLaunched() | ev.SimFinished():
            return _whole_lived(sim, e)
        case _:
            assert_never(e)


def recorded(sim: Sim, kernel_index: int) -> Sim:
    """The sim once a kernel result of its current attempt is recorded."""
    return sim if kernel_index < sim.kernels_recorded else msgspec.structs.replace(sim, kernels_recorded=kernel_index + 1)


def _whole_lived(sim: Sim, e: ev.SimClaimed | ev.SimLaunched | ev.SimFinished | ev.RunCancelRequested) -> Sim:
    before = sim.life
    after = sims.evolve(before, e)
    if after is before:
        return sim
    match e:
        case ev.SimClaimed():
            changes = {**_NO_PROGRESS, **_started(sim, e, 1)}
            if e.resume is not None and sim.attempt:
                # It carries on from the lost attempt: what that recorded before the resume's
                # first launch is kept (the log whole), the rest goes, as the launches after run again.
                kept = ("log_tail", "log_seq", "gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc")
                changes |= {name: getattr(sim, name) for name in kept}
                changes["kernels_recorded"] = changes["kernels_done"]
            return _lived(sim, after, **changes)
        case ev.SimLaunched():
            return _lived(sim, after, **_launch(e))
        case ev.SimFinished():
            return _lived(sim, after, exit_code=e.exit_code, error=e.error, finished_at=e.at, cut_short=e.cut_short)
        case ev.RunCancelRequested():
            return _lived(sim, after, finished_at=e.at)
        case _:
            assert_never(e)


def _launch(e: ev.SimLaunched) -> dict[str, Any]:
    return {
        "launcher_ref": e.launcher_ref,
        "started_at": e.at,
        "config_digests": e.config_digests,
        "accel_sim_build": e.accel_sim_build,
        "gpgpu_sim_build": e.gpgpu_sim_build,
        "cached_from": e.cached_from,
    }


def _retried(sim: Sim, e: ev.RunRetryRequested) -> Sim:
    """A retry: the sim, or each of its chunks listed, waits for the attempt it asked for."""
    if e.run_id != sim.run_id:
        return sim
    if sim.split is not None:
        for chunk in e.chunks:
            if chunk.sim_id == sim.id:
                sim = _chunk_retried(sim, chunk.chunk, chunk.attempt)
        return sim
    again = next((s for s in e.sims if s.sim_id == sim.id), None)
    if again is None:
        return sim
    before = sim.life
    after = sims.retried(before, again.attempt)
    if after is before:
        return sim
    return _lived(sim, after, **_NO_PROGRESS, error=None, exit_code=None, finished_at=None)


def _chunk_retried(sim: Sim, index: int, attempt: int) -> Sim:
    """A chunk waits for the attempt a retry asked for, its kernels, log and files kept (its
    sim's, by natural key: a kernel it records again is stored once)."""
    split = sim.split
    assert split is not None
    _check_chunk(sim, index)
    before = sim.chunk_life(index)
    after = sims.retried(before, attempt)
    if after is before:
        return sim
    chunks = list(split.chunks)
    chunks[index] = _lived(chunks[index], after, error=None, exit_code=None)
    state = splitting.sim_state([c.state for c in chunks])
    split = msgspec.structs.replace(split, chunks=chunks)
    return msgspec.structs.replace(sim, split=split, state=state, error=None, exit_code=None, finished_at=None)


# --- a split sim: each chunk lives as a sim does, the sim sums them up --------------------------


def _check_chunk(sim: Sim, index: int) -> None:
    assert sim.split is not None
    if not 0 <= index < len(sim.split.chunks):
        raise ValueError(f"sim {sim.id} has {len(sim.split.chunks)} chunks, not a chunk {index}")


def _chunk(sim: Sim, e: _Told) -> Sim:
    assert e.chunk is not None
    _check_chunk(sim, e.chunk)
    match e:
        case ev.SimClaimed() | ev.SimLaunched() | ev.SimFinished():
            return _chunks_lived(sim, e)
        case ev.KernelFinished() if takes(sim, e):
            return recorded(sim, e.kernel_index)
        case _:
            return sim


def _chunks_lived(sim: Sim, e: ev.SimClaimed | ev.SimLaunched | ev.SimFinished | ev.RunCancelRequested) -> Sim:
    """Every chunk after a life event (a chunk's own, a sibling's failure, the run's cancel),
    and the sim as they leave it."""
    split = sim.split
    assert split is not None
    lives = [sim.chunk_life(i) for i in range(len(split.chunks))]
    chunks = list(split.chunks)
    for i, (before, after) in enumerate(zip(lives, sims.evolve_split(lives, e))):
        if after == before:
            continue
        changes: dict[str, Any] = {}
        if isinstance(e, ev.SimClaimed):
            changes = _started(chunks[i], e, splitting.chunk_of(sim.kernels_total, split.cut, i).first) | {"started_at": None, "finished_at": None}
        if isinstance(e, ev.SimLaunched) and e.chunk == i:
            changes["started_at"] = e.at
        if isinstance(e, ev.SimFinished) and e.chunk == i:
            changes |= {"error": e.error, "exit_code": e.exit_code, "finished_at": e.at}
        chunks[i] = _lived(chunks[i], after, **changes)
    if chunks == split.chunks:
        return sim
    fields = _launch(e) if isinstance(e, ev.SimLaunched) and sim.started_at is None else {}  # its first launch is the sim's
    if isinstance(e, ev.SimClaimed):
        fields |= {"runner_id": e.runner_id, "host": e.host}
    if isinstance(e, ev.SimFinished) and e.cut_short is not None and sim.cut_short is None and e.chunk is not None:
        if chunks[e.chunk] != split.chunks[e.chunk]:  # the chunk's own finish, which counted
            fields["cut_short"] = e.cut_short
    return _stitched(sim, chunks, e, fields)


def _stitched(sim: Sim, chunks: list[SimChunk], e: ev.SimClaimed | ev.SimLaunched | ev.SimFinished | ev.RunCancelRequested, fields: dict[str, Any]) -> Sim:
    """The sim as its chunks make it: its state from theirs, its attempt 1 once one was
    claimed (its kernels, log and files are all stored under it), its progress their sum."""
    assert sim.split is not None
    state = splitting.sim_state([c.state for c in chunks])
    fields |= {
        "split": msgspec.structs.replace(sim.split, chunks=chunks),
        "state": state,
        "attempt": max(sim.attempt, 1 if any(c.attempt for c in chunks) else 0),
        **_summed(chunks),
    }
    if state in sims.FINISHED and sim.state not in sims.FINISHED:
        fields["finished_at"] = e.at
        cut = fields.get("cut_short", sim.cut_short)
        if cut is not None:  # the sim's launches, not the chunk's
            fields["cut_short"] = msgspec.structs.replace(cut, kernels_done=fields["kernels_done"], kernels_total=sim.kernels_total)
        failed = next((i for i, c in enumerate(chunks) if c.state == "failed"), None)
        if failed is not None:
            label = splitting.chunk_of(sim.kernels_total, sim.split.cut, failed).label
            fields |= {"error": f"{label}: {chunks[failed].error}", "exit_code": chunks[failed].exit_code}
        elif isinstance(e, ev.SimFinished):
            fields["exit_code"] = e.exit_code
    return msgspec.structs.replace(sim, **fields)


def _summed(chunks: list[SimChunk]) -> dict[str, Any]:
    """A split sim's progress and totals: those of its chunks' measured kernels, summed
    (`gpu_tot_*` are running sums over the launches, so the sums over the chunks are the sim's)."""
    cycles = [c.gpu_tot_sim_cycle for c in chunks if c.gpu_tot_sim_cycle is not None]
    insn = [c.gpu_tot_sim_insn for c in chunks if c.gpu_tot_sim_insn is not None]
    rates = [c.sim_rate_ips for c in chunks if c.sim_rate_ips is not None]
    summed = totals(sum(cycles) if cycles else None, sum(insn) if insn else None, sum(rates) if rates else None)
    return {"kernels_done": sum(c.kernels_done for c in chunks), **msgspec.structs.asdict(summed)}


def _chunk_beat(sim: Sim, e: ev.SimHeartbeat, text: str, count: int) -> Sim:
    """A chunk's progress and log lines: numbered in a range of its own (`SimReport`), so the
    log reads chunk after chunk."""
    assert sim.split is not None and e.chunk is not None
    chunks = list(sim.split.chunks)
    chunk = chunks[e.chunk]
    fresh_from = max(0, chunk.log_seq + 1 - e.first_line_seq)
    last = e.first_line_seq + count - 1 if fresh_from < count else 0
    beat = _beat(chunk, e, last)
    changes: dict[str, Any] = {}
    if last:
        changes["log_tail"] = _tail(sim, text, count, fresh_from)
        changes["log_seq"] = max(sim.log_seq, last)
    if beat:
        chunks[e.chunk] = msgspec.structs.replace(chunk, **beat)
        changes["split"] = msgspec.structs.replace(sim.split, chunks=chunks)
    if "last_heartbeat_at" in beat:
        changes |= _summed(chunks)
        if sim.last_heartbeat_at is None or e.at > sim.last_heartbeat_at:
            changes |= {"last_heartbeat_at": e.at, "current_kernel": e.current_kernel}
    return msgspec.structs.replace(sim, **changes) if changes else sim
