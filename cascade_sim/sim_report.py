"""What a sim attempt's output means as events. Pure: lines and parser outputs in, events out
through `emit`, with ids and times given, so the runner and the recorded samples say the same
things the same way. Every event goes out as the sim's decider says (`cascade_core/sims.py`),
given the sim as this attempt knows it: its own events, and those the runner reads from the
log (`observe`), so a fact that would change nothing is not sent.
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypedDict, assert_never

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cascade_core import events as ev
from cascade_core import packed_stats, sims
from cascade_core.gpu_configs import GpuConfig
from cascade_core.packed_stats import PackedStats
from cascade_core.reuse import Reuse
from cascade_core.sim import totals
from cascade_core.split import Chunk, Launches
from cascade_nats.deflated import stats_map
from cascade_sim import _tokenizer, simulator

# Log lines a heartbeat carries: it goes out when this much has piled up, so with one piece of
# output more it stays well under the event size limit.
MAX_LINES_BYTES = 192 * 1024
# xz's preset 1: a third of what ISA-L's zlib made of a heartbeat's lines, whose stats blocks
# repeat the same names farther apart than zlib's 32 KB window reaches, for 0.5 ms of the
# runner's CPU a kernel and 0.1 ms more of serve's to read them (bench/README.md, "The
# heartbeats' lines as xz"); with no check, as the names' (the store keeps an event whole).
_XZ_PRESET = 1


def deflated(pieces: list[str]) -> bytes | None:
    """A heartbeat's lines, given in pieces, as its `log_deflated`; None for no lines."""
    if not pieces:
        return None
    return lzma.compress("\n".join(pieces).encode(), format=lzma.FORMAT_XZ, check=lzma.CHECK_NONE, preset=_XZ_PRESET)


class Kept(msgspec.Struct, frozen=True, kw_only=True):
    """What the attempts before a resumed one recorded of its launches: how many (from the
    sim's, or its chunk's, first) and their totals."""

    launches: int
    gpu_tot_sim_cycle: float
    gpu_tot_sim_insn: float


class Job(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    sim_id: str
    attempt: int
    trace_id: str
    gpu_config: GpuConfig
    kernels_total: int
    chunk: Chunk | None = None  # the chunk of a split sim this attempt simulates
    # What a sim (or its chunk) reusing repeated kernels simulates, and whose result the others take.
    reuse: Reuse | None = None
    # What an attempt of a sim whole that resumes a lost runner's simulates (`split.resumed`;
    # a resumed chunk's is its `chunk`), and what the attempts before it recorded.
    resumed: Chunk | None = None
    kept: Kept | None = None
    config_files: Path | None = None  # a variant's files, fetched (None: the simulator's own config's)

    @property
    def launches(self) -> Launches | None:
        """The launches the simulator runs, when not all of the trace's."""
        return self.reuse if self.reuse is not None else self.cut

    @property
    def cut(self) -> Chunk | None:
        """The launches the simulator runs, when they are a range of them after a warm-up."""
        return self.chunk if self.chunk is not None else self.resumed

    @property
    def name(self) -> str:
        """The sim, or its chunk, as ids and logs name it."""
        return sims.chunk_name(self.sim_id, None if self.chunk is None else self.chunk.index)

    def file_name(self, name: str) -> str:
        """A file of the attempt as the sim's files list it: a chunk's are its own."""
        return name if self.chunk is None else f"chunk{self.chunk.index + 1:03d}.{name}"


def first_line_seq(job: Job) -> int:
    """Where the attempt's log lines are numbered from: 1 for a sim run whole; for a chunk, a
    range of its own past every earlier chunk's (and its own earlier attempts'), so the sim's
    log reads chunk after chunk whichever ran first."""
    if job.chunk is None:
        # A resumed attempt's follow the lines of those before, which its sim keeps.
        return 1 if job.kept is None else ((job.attempt - 1) << 32) + 1
    return ((job.chunk.index + 1) << 40) + ((job.attempt - 1) << 32) + 1


class Launch(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how the simulator runs: what makes the result reproducible."""

    launcher_ref: str
    host: str
    config_digests: dict[str, str]


def content_type(name: str) -> str:
    if name.endswith(".gz"):
        return "application/gzip"
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    return {"txt": "text/plain", "log": "text/plain", "csv": "text/csv", "json": "application/json"}.get(
        suffix, "application/octet-stream"
    )


def compressed(floats: bytes) -> bytes:
    """A map's floats and their differences in zlib's format, at zlib's default level: a
    fifth smaller than ISA-L's fastest, for 0.4 ms of the runner's CPU a kernel where the
    simulator spends seconds (bench/README.md, "Values and differences together")."""
    return zlib.compress(floats, 6)


def packed(stats: simulator.Stats, differences: bytes | None = None) -> PackedStats:
    """A stats map as its event carries it: its names once per set, its floats and, given
    them, their `differences` from the block before, compressed together."""
    return packed_stats.pack(stats.names, stats.floats, stats.texts, compress=compressed, differences=differences)


def differences(stats: simulator.Stats, before: simulator.Stats | None) -> bytes:
    """Each float of `stats` less the same name's in `before` (0 where it has none), as
    float64s in the machine's byte order: a block's values less the block before's."""
    if before is None:
        return stats.floats
    now = pa.Array.from_buffers(pa.float64(), len(stats.names), [None, pa.py_buffer(stats.floats)])
    earlier = pa.Array.from_buffers(pa.float64(), len(before.names), [None, pa.py_buffer(before.floats)])
    if before.names != stats.names:
        place = {name: i for i, name in enumerate(before.names)}
        earlier = pc.fill_null(earlier.take(pa.array([place.get(name) for name in stats.names], pa.int32())), 0.0)
    return bytes(pc.subtract(now, earlier).buffers()[1])


def _marked(stats: simulator.Stats, source: int) -> simulator.Stats:
    """A reused kernel's stats map: its source's, saying which launch it is from."""
    return stats.with_value("reused_from", float(source))


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def kept_by(last: ev.AnyEvent | None, attempt: int, chunk: Chunk) -> Kept | None:
    """What a lost attempt of a sim (its launches `chunk`: `split.whole` for a sim whole)
    recorded, from the last event on its data subject: a heartbeat's count and totals, or a
    kernel result's launch and the totals in its map (a kernel result goes out just before
    its heartbeat). None when that is not the attempt's, or says no launch was recorded."""
    if isinstance(last, ev.SimHeartbeat) and last.attempt == attempt:
        cycles, insn, done = last.latest.gpu_tot_sim_cycle, last.latest.gpu_tot_sim_insn, last.kernels_done
    elif isinstance(last, ev.KernelFinished) and last.attempt == attempt and last.stats is not None:
        stats = stats_map(last.stats)
        cycles, insn, done = _float(stats.get("gpu_tot_sim_cycle")), _float(stats.get("gpu_tot_sim_insn")), last.uid - chunk.first + 1
    else:
        return None
    if cycles is None or insn is None or done <= 0:
        return None
    return Kept(launches=done, gpu_tot_sim_cycle=cycles, gpu_tot_sim_insn=insn)


class _Common(TypedDict):
    """The fields every event of the attempt has."""

    id: str
    at: datetime
    run_id: str
    sim_id: str
    attempt: int
    chunk: int | None  # None for a sim simulated whole


class SimReport:
    def __init__(
        self,
        *,
        job: Job,
        emit: Callable[[ev.Event], None],
        next_id: Callable[[], str],
        now: Callable[[], datetime],
        reader: simulator.OutputReader,
        sim: sims.SimLife | None = None,
    ) -> None:
        self.job = job
        self.reader = reader
        # The sim as this attempt knows it; by default, just claimed for the job's attempt.
        self.sim = sim or sims.SimLife(run_id=job.run_id, sim_id=job.sim_id, state="launching", attempt=job.attempt)
        self.emit = emit
        self.next_id = next_id
        self.now = now
        self.kernels: list[simulator.KernelBlock] = []  # summaries, for kernel-stats.csv
        self.current_kernel: str | None = None
        self.latest = ev.SimMetrics()
        self._through_kernels = ev.SimMetrics()  # the totals through its last kernel finished
        self.stopped: simulator.Stopped | None = None  # the simulator stopped at a limit
        self._log: list[str] = []  # complete lines since the last heartbeat, in pieces
        self._log_bytes = 0
        self._log_lines = 0
        self.next_line_seq = first_line_seq(job)
        self._partial = ""  # stdout after its last line break
        self.versions = simulator.Versions(accel_sim_build=None, gpgpu_sim_build=None)
        self.launch: Launch | None = None  # set once the process runs
        self.launched = False
        # The sim's kernels' totals when the simulator runs only some of its launches: a chunk's
        # own (warm-up left out), or a reusing sim's, reused kernels included.
        kept = job.kept
        self._measured = ev.SimMetrics(gpu_tot_sim_cycle=0.0, gpu_tot_sim_insn=0.0) if kept is None else totals(kept.gpu_tot_sim_cycle, kept.gpu_tot_sim_insn)
        self._kept_launches = 0 if kept is None else kept.launches
        if kept is not None:
            self.latest = self._measured
        # A reusing sim's results that later launches take: by uid, the kernel, its stats map
        # and its per-kernel values.
        self._reusable: dict[int, tuple[simulator.KernelBlock, simulator.Stats, bytes]] = {}
        self._block_before: simulator.Stats | None = None  # the simulator's last block, warm-up or not
        self._sources = set() if job.reuse is None else job.reuse.sources_reused()
        if job.chunk is not None:
            self.add_lines(f"==== cascade: {job.chunk.label} (attempt {job.attempt}) ====")
        if job.reuse is not None:
            self.add_lines(f"==== cascade: {job.reuse.label} ====")
        cut = job.cut
        if cut is not None and kept is not None:
            warm = f", after warm-up launches {cut.first - cut.warmup}-{cut.first - 1}" if cut.warmup else ""
            self.add_lines(
                f"==== cascade: attempt {job.attempt} resumes a lost runner's at launch {cut.first}{warm}: "
                f"the {kept.launches} launches before are the earlier attempts' ===="
            )

    @property
    def current(self) -> bool:
        """Whether the job's attempt is still the sim's: no other attempt replaced it."""
        return self.sim.attempt == self.job.attempt

    def observe(self, event: sims.SimLifeEvent) -> None:
        """An event of the sim or its run, read from the log."""
        self.sim = sims.evolve(self.sim, event)

    def decide(self, command: sims.Command) -> list[sims.Decided]:
        """What the sim's decider makes of `command`, sent."""
        decided = sims.decide(command, self.sim)
        for event in decided:
            self.sim = sims.evolve(self.sim, event)
            self.emit(event)
        return decided

    def _record(self, fact: sims.Fact) -> None:
        self.decide(sims.Record(fact))

    def _common(self) -> _Common:
        j = self.job
        chunk = None if j.chunk is None else j.chunk.index
        return {
            "id": self.next_id(), "at": self.now(), "run_id": j.run_id, "sim_id": j.sim_id, "attempt": j.attempt, "chunk": chunk
        }

    def launched_once(self) -> None:
        """Announce the launch, with the build strings if the simulator printed them yet."""
        if self.launched or self.launch is None:
            return
        self.launched = True
        self._record(
            ev.SimLaunched(
                **self._common(),
                launcher_ref=self.launch.launcher_ref,
                host=self.launch.host,
                config_digests=self.launch.config_digests,
                accel_sim_build=self.versions.accel_sim_build,
                gpgpu_sim_build=self.versions.gpgpu_sim_build,
                runner_id=self.sim.runner_id,
            )
        )

    def heartbeat(self) -> None:
        self.launched_once()
        self._record(
            ev.SimHeartbeat(
                **self._common(),
                kernels_done=self._kept_launches + len(self.kernels),
                current_kernel=self.current_kernel,
                latest=self.latest,
                first_line_seq=self.next_line_seq - self._log_lines,
                log_deflated=deflated(self._log),
            )
        )
        self._log = []
        self._log_bytes = self._log_lines = 0

    def add_lines(self, text: str) -> None:
        """Complete lines of output, joined by newlines (no newline after the last)."""
        count = _tokenizer.lines(text) + 1
        self._log.append(text)
        self._log_bytes += len(text) + 1
        self._log_lines += count
        self.next_line_seq += count
        if self._log_bytes >= MAX_LINES_BYTES:
            self.heartbeat()

    def stdout(self, piece: str) -> None:
        """A piece of the simulator's stdout, split anywhere: its lines go to the log, its
        meaning to events."""
        text = self._partial + piece
        end = text.rfind("\n")
        if end >= 0:
            self.add_lines(text[:end])
        self._partial = text[end + 1 :]
        self.handle(self.reader.feed(piece))

    def handle(self, outputs: list[simulator.Output]) -> None:
        for out in outputs:
            match out:
                case simulator.KernelBlock():
                    self._kernel_finished(out)
                case simulator.KernelLaunched():
                    self.launched_once()
                    self.current_kernel = out.name
                case simulator.Totals() if self.job.launches is not None:
                    # The simulator's running sums are over what it ran (a chunk's warm-up, none
                    # of a reusing sim's reused launches): the sim's kernels' are the ones that count.
                    self.latest = msgspec.structs.replace(self._measured, sim_rate_ips=float(out.sim_rate_ips))
                case simulator.Totals():
                    self.latest = ev.SimMetrics(
                        gpu_tot_sim_cycle=float(out.gpu_tot_sim_cycle),
                        gpu_tot_sim_insn=float(out.gpu_tot_sim_insn),
                        gpu_tot_ipc=out.gpu_tot_ipc,
                        sim_rate_ips=float(out.sim_rate_ips),
                    )
                case simulator.Versions():
                    self.versions = out
                    self.launched_once()
                case simulator.Stopped():
                    self._stopped(out)
                case _:
                    assert_never(out)

    def _kernel_finished(self, k: simulator.KernelBlock) -> None:
        self.launched_once()
        cut, reuse, launches = self.job.cut, self.job.reuse, self.job.launches
        per_kernel = differences(k.stats, self._block_before)
        self._block_before = k.stats
        if cut is not None and not cut.measures(k.uid):
            return  # warm-up: simulated for the caches' sake, and discarded
        if launches is not None:
            k = msgspec.structs.replace(k, uid=launches.global_uid(k.uid))
        stats = k.stats
        if reuse is None and cut is not None:
            stats = self._running_totals(k, stats)
        self._kernel(k, stats, per_kernel)
        if launches is None:  # the heartbeat below says the totals through this kernel, printed with it
            cycles, insn, ipc = (_float(stats.get(name)) for name in ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc"))
            self.latest = ev.SimMetrics(gpu_tot_sim_cycle=cycles, gpu_tot_sim_insn=insn, gpu_tot_ipc=ipc, sim_rate_ips=self.latest.sim_rate_ips)
            self._through_kernels = self.latest
        if reuse is not None:
            if k.uid in self._sources:
                self._reusable[k.uid] = (self.kernels[-1], stats, per_kernel)
            for uid in reuse.reused_after(k.uid):
                source, source_stats, source_per_kernel = self._reusable[reuse.source(uid)]
                self.add_lines(f"==== cascade: launch {uid}: the result of launch {source.uid} reused ====")
                marked = _marked(source_stats, source.uid)
                # `reused_from` is the map's last name, and no running total.
                per_kernel = source_per_kernel + marked.floats[len(source_per_kernel) :]
                self._kernel(msgspec.structs.replace(source, uid=uid), marked, per_kernel, reused_from=source.uid)
        self.heartbeat()

    def _stopped(self, stopped: simulator.Stopped) -> None:
        """The simulator stopped at a limit: the launch it cut counts in no total (its uid made
        the sim's), and the totals go back to those through the last launch it finished (the
        simulator's own include the cut one's part)."""
        launches, partial = self.job.launches, stopped.partial
        if launches is not None and partial is not None:
            partial = msgspec.structs.replace(partial, uid=launches.global_uid(partial.uid))
        self.stopped = msgspec.structs.replace(stopped, partial=partial)
        if launches is None:
            self.latest = msgspec.structs.replace(self._through_kernels, sim_rate_ips=self.latest.sim_rate_ips)

    def cut_short(self) -> ev.CutShort | None:
        """What the attempt did not simulate of its launches (a chunk's measured ones, the
        kept ones of a resumed attempt counted done), when it stopped at a limit or ended
        before the last; None when it simulated them all."""
        chunk = self.job.chunk
        total = self.job.kernels_total if chunk is None else chunk.last - chunk.first + 1
        done = self._kept_launches + len(self.kernels)
        if self.stopped is None and done >= total:
            return None
        stopped = self.stopped or simulator.Stopped(limit=None, value=None, partial=None)
        return ev.CutShort(
            limit_option=stopped.limit, limit_value=stopped.value, kernels_done=done, kernels_total=total, partial=stopped.partial
        )

    def _kernel(self, k: simulator.KernelBlock, stats: simulator.Stats, per_kernel: bytes, reused_from: int | None = None) -> None:
        """Record a kernel result of the sim (uid global), its stats map packed, with each
        value's difference from the simulator's block before (`differences`)."""
        if self.job.launches is not None:
            cycles, insn = self._measured.gpu_tot_sim_cycle or 0.0, self._measured.gpu_tot_sim_insn or 0.0
            self._measured = totals(cycles + k.gpu_sim_cycle, insn + k.gpu_sim_insn)
            self.latest = msgspec.structs.replace(self._measured, sim_rate_ips=self.latest.sim_rate_ips)
        self._record(
            ev.KernelFinished(
                **self._common(),
                kernel_index=len(self.kernels) if self.job.launches is None else k.uid - 1,
                uid=k.uid,
                name=k.name,
                gpu_sim_cycle=k.gpu_sim_cycle,
                gpu_sim_insn=k.gpu_sim_insn,
                gpu_ipc=k.gpu_ipc,
                sim_time_ns=k.gpu_sim_cycle / self.job.gpu_config.core_clock_mhz * 1000,
                stats=packed(stats, per_kernel),
                stats_naming=self.reader.stats_naming,
                reused_from=reused_from,
            )
        )
        # Only the summary is kept for kernel-stats.csv: the full maps are in the events.
        self.kernels.append(msgspec.structs.replace(k, stats=simulator.NO_STATS))

    def _running_totals(self, k: simulator.KernelBlock, stats: simulator.Stats) -> simulator.Stats:
        """A kernel's map with `gpu_tot_*` over the launches its sim (a sim whole) or chunk
        measured up to it, the kept ones included, not over what this run simulated: for a
        resumed sim whole, what the sim run straight printed."""
        cycles = (self._measured.gpu_tot_sim_cycle or 0.0) + k.gpu_sim_cycle
        insn = (self._measured.gpu_tot_sim_insn or 0.0) + k.gpu_sim_insn
        ipc = totals(cycles, insn).gpu_tot_ipc
        recomputed = {"gpu_tot_sim_cycle": cycles, "gpu_tot_sim_insn": insn, "gpu_tot_ipc": ipc}
        for name, value in recomputed.items():
            if value is not None and name in stats.names:
                stats = stats.with_value(name, value)
        return stats

    def end_of_output(self) -> None:
        if self._partial:
            self.add_lines(self._partial)
            self._partial = ""
        self.handle(self.reader.finish())

    def outcome(self, returncode: int, stderr_tail: list[str]) -> sims.Outcome:
        return self.reader.outcome(returncode, stderr_tail)

    def file_stored(self, *, name: str, size: int, object_name: str, digest: str) -> None:
        self._record(
            ev.SimFileStored(
                **self._common(),
                name=name,
                size=size,
                content_type=content_type(name),
                object_name=object_name,
                digest=digest,
            )
        )

    def finished(self, outcome: sims.Outcome, *, wall_time_limit_s: float | None = None) -> ev.SimFinished | None:
        """The attempt ended: its simulator's `outcome`, unless the runner stopped it for
        running past `wall_time_limit_s`. The event sent, or None if it would change nothing."""
        command = sims.Finish(
            event_id=self.next_id(), at=self.now(), attempt=self.job.attempt, outcome=outcome, wall_time_limit_s=wall_time_limit_s,
            cut_short=self.cut_short() if outcome.succeeded else None,
        )
        return next((e for e in self.decide(command) if isinstance(e, ev.SimFinished)), None)
