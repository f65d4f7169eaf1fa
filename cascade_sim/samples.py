"""Sample traces with finished runs, so a fresh install has something to show on every route.

- Recorded: the vectoradd and combo traces run by the real Accel-Sim on SM61_TITANX (the
  logs and traces in `sample_data/accelsim`, byte for byte from the simulator). Their runs are
  replayed through the same `SimReport` the runner uses, so kernels, every stat, log lines
  and files are exactly what a live run produces, three replicas each.
- LLM serving: facebook/opt-125m on H100 with a measured step timeline and real kernel
  timing (`cascade_sim/sample_data/opt125m_h100_step_timeline.json`), on SM90_H100. Its
  trace carries a PROVENANCE.md saying which numbers are measured and which synthetic.

Samples are events with stable ids and fixed times: loading them again, or from a second
server, adds nothing. Their traces hold no instruction traces, so no run can be created on
them (409), and their runs are finished, so a cancel changes nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from importlib import resources

import msgspec

from cascade_core import events as ev
from cascade_core.gpu_configs import GpuConfig
from cascade_core.object_names import digest, sim_file, trace_file
from cascade_formats.kernel_stats import kernel_stats_csv
from cascade_formats.tracefiles import KernelLaunch, parse_kernel_header, parse_kernelslist, trace_arch, trace_kernels
from cascade_nats import subjects
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore
from cascade_sim.install import AccelSimOutput
from cascade_sim.sim_report import Job, Launch, SimReport

log = logging.getLogger("cascade.samples")

SAMPLE_AT = datetime(2026, 11, 8, 6, 50, 10, tzinfo=UTC)
TITANX = GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0)
H100 = GpuConfig(name="SM90_H100", arch="sm_90", core_clock_mhz=1980.0)
RECORDED_REPLICAS = 3


class Sample(msgspec.Struct, frozen=True):
    name: str
    events: list[ev.Event]
    files: dict[str, bytes]  # object name -> content


class _Clock:
    """Ids and times for one sample: stable across loads."""

    def __init__(self, name: str, start: datetime) -> None:
        self.name = name
        self.count = itertools.count(1)
        self.at = start

    def next_id(self) -> str:
        return f"sample.{self.name}.{next(self.count)}"

    def now(self) -> datetime:
        self.at += timedelta(milliseconds=7)
        return self.at


def _data(package: str, name: str) -> bytes:
    return resources.files(package).joinpath(name).read_bytes()


def _recorded_trace(clock: _Clock, trace_id: str, folder: str) -> tuple[list[ev.Event], int]:
    files = {p.name: p.read_bytes() for p in resources.files("cascade_sim.sample_data").joinpath(f"accelsim/{folder}").iterdir()}
    entries = parse_kernelslist(files["kernelslist.g"].decode())
    headers = {}
    for entry in entries:
        if isinstance(entry, KernelLaunch) and entry.file not in headers:
            raw = files[entry.file]
            text = (_xz_head(raw) if entry.file.endswith(".xz") else raw[: 64 * 1024]).decode(errors="replace")
            headers[entry.file] = parse_kernel_header(text, entry.file)
    kernels = trace_kernels(entries, headers)
    events: list[ev.Event] = [
        ev.TraceUploadStarted(id=clock.next_id(), at=clock.now(), trace_id=trace_id, content_type="application/x-tar", sample=True),
        ev.TraceKernelsListed(id=clock.next_id(), at=clock.now(), trace_id=trace_id, kernels=kernels),
        ev.TraceReady(
            id=clock.next_id(),
            at=clock.now(),
            trace_id=trace_id,
            trace_gpu_arch=trace_arch(headers.values()),
            kernel_count=len(kernels),
            bytes=sum(len(b) for b in files.values()),
            suggested_sim_config=TITANX.name,
            has_real_timing=False,
            has_step_timeline=False,
        ),
    ]
    return events, len(kernels)


def _xz_head(raw: bytes) -> bytes:
    import lzma

    return lzma.LZMADecompressor().decompress(raw, max_length=64 * 1024)


def _replayed_sim(clock: _Clock, job: Job, log_text: str, files: dict[str, bytes]) -> list[ev.Event]:
    """A sim's events as the runner would have sent them for this recorded output."""
    events: list[ev.Event] = [
        ev.SimClaimed(
            id=clock.next_id(), at=clock.now(), run_id=job.run_id, sim_id=job.sim_id, attempt=1,
            runner_id="sample", host="recorded",
        )
    ]
    report = SimReport(job=job, emit=events.append, next_id=clock.next_id, now=clock.now, reader=AccelSimOutput())
    report.launch = Launch(launcher_ref="recorded", host="recorded", config_digests={})
    for piece in (log_text[i : i + 65536] for i in range(0, len(log_text), 65536)):
        report.stdout(piece)
    report.end_of_output()
    result = report.outcome(0, [])
    log_gz = gzip.compress(log_text.encode(), mtime=0)
    for name, content in (
        ("accelsim.log.gz", log_gz),
        ("exit-status.txt", f"{result.exit_code}\n".encode()),
        ("kernel-stats.csv", kernel_stats_csv(report.kernels)),
    ):
        object_name = sim_file(job.sim_id, job.attempt, name)
        files[object_name] = content
        report.file_stored(name=name, size=len(content), object_name=object_name, digest=digest(hashlib.sha256(content)))
    report.heartbeat()
    report.finished(result)
    return events


def recorded(name: str, folder: str, log_file: str) -> Sample:
    clock = _Clock(name, SAMPLE_AT)
    trace_id = f"sample__{folder}"
    events, kernel_count = _recorded_trace(clock, trace_id, folder)
    run_id = f"run-sample-{name}"
    sims = [ev.SimSpec(sim_id=f"sim-sample-{name}-{r}", gpu_config=TITANX.name, replica=r) for r in range(RECORDED_REPLICAS)]
    events.append(
        ev.RunCreated(
            id=clock.next_id(), at=clock.now(), run_id=run_id, trace_id=trace_id,
            entries=[ev.ConfigCount(gpu_config=TITANX.name, count=RECORDED_REPLICAS)], sims=sims, kernels_total=kernel_count, sample=True,
        )
    )
    log_text = _data("cascade_sim.sample_data", f"accelsim/{log_file}").decode()
    files: dict[str, bytes] = {}
    for spec in sims:
        job = Job(run_id=run_id, sim_id=spec.sim_id, attempt=1, trace_id=trace_id, gpu_config=TITANX, kernels_total=kernel_count)
        events += _replayed_sim(clock, job, log_text, files)
    return Sample(name, events, files)


# --- the LLM-serving sample -----------------------------------------------------------------

LLM_TRACE = "sample__facebook_opt-125m__h100-e2e"
LLM_RUN = "run-sample-opt125m-h100-e2e"

# uid, name, simulated cycles and instructions on H100: uids 1-11 as the API reference's
# kernel-stats.csv example prints them; 12-20 synthetic, repeating the decode layer's pattern.
_NVJET = "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_bias_TNT"
_RESHAPE = "_ZN4vllm30reshape_and_cache_flash_kernelIttLNS_18Fp8KVCacheDataTypeE0EEEvPKT_S4_PT0_S6_PKlllllliiiPKfSA_i"
_PREFILL_FLASH = (
    "_ZN7cutlass13device_kernelIN5flash20enable_sm90_or_laterINS1_16FlashAttnFwdSm90INS1_25CollectiveMain"
    "loopFwdSm90ILi2EN4cute5tupleIJNS5_1CILi1EEES8_S8_EEENS6_IJNS7_ILi64EEENS7_ILi192EEESA_EEELi64ENS_6ha"
    "lf_tEfNS_4arch4Sm90ELb1ELb0ELb0ELb1ELb1ELb0ELb0ELb1ELb1ELb1ELb0ELb0ENS_10bfloat16_tELi1EEENS1_21Coll"
    "ectiveEpilogueFwdINS6_IJSA_SA_SB_EEES9_SD_SF_Li128ELb1ELb1ELb0ELb0ELi1EEENS1_36VarlenDynamicPersiste"
    "ntTileSchedulerILi64ELi192ELi128ELi128ELb0ELb1ELb1ELb1ELb0ELb1EEEEEEEEEvNT_6ParamsE"
)
_FLASH = (
    "_ZN7cutlass13device_kernelIN5flash20enable_sm90_or_laterINS1_16FlashAttnFwdSm90INS1_25CollectiveMain"
    "loopFwdSm90ILi2EN4cute5tupleIJNS5_1CILi1EEES8_S8_EEENS6_IJNS7_ILi64EEENS7_ILi192EEESA_EEELi64ENS_6ha"
    "lf_tEfNS_4arch4Sm90ELb0ELb0ELb0ELb1ELb1ELb0ELb0ELb1ELb1ELb1ELb0ELb0ENS_10bfloat16_tELi1EEENS1_21Coll"
    "ectiveEpilogueFwdINS6_IJSA_SA_SB_EEES9_SD_SF_Li128ELb1ELb1ELb0ELb0ELi1EEENS1_36VarlenDynamicPersiste"
    "ntTileSchedulerILi64ELi192ELi128ELi128ELb0ELb1ELb1ELb0ELb0ELb1EEEEEEEEEvNT_6ParamsE"
)
_FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_"
LLM_KERNELS: list[tuple[str, int, int]] = [
    (_NVJET, 10120, 4765148),
    (_RESHAPE, 7429, 395584),
    (_PREFILL_FLASH, 14142, 5542420),
    (_FILL, 5345, 3078),
    (_NVJET, 8998, 1588148),
    (_NVJET, 8634, 4762652),
    (_RESHAPE, 7026, 65760),
    (_FLASH, 12302, 5247952),
    (_FILL, 5348, 3078),
    (_NVJET, 8424, 1588020),
    (_NVJET, 8621, 4766492),
    *[
        (name, cycles, insn)
        for _ in range(2)
        for name, cycles, insn in ((_RESHAPE, 7031, 65760), (_FLASH, 12296, 5247952), (_FILL, 5347, 3078), (_NVJET, 8431, 1588020))
    ],
    (_NVJET, 8619, 4766492),
]
# Measured (nsys) durations: uids 1-6 are the step timeline's covered kernels; 7-20 synthetic,
# 1.05x their simulated time, so the comparison has a plausible real column to show.
_MEASURED_NS = {1: 5120, 2: 1888, 3: 6976, 4: 1248, 5: 4896, 6: 4768}

PROVENANCE = """# facebook/opt-125m on H100: what this sample is

Not a capture of a real run end to end. Measured or copied from the Cascade API reference's
example: the step timeline's walls, GPU busy times, gaps, request timings and the two kernels
it prints; the simulated cycles and instructions of trace kernels 1-11 (its kernel-stats.csv
example); the measured durations of trace kernels 1-6. Synthetic: the step timeline's other
681 kernels (names, launch dimensions, durations, offsets), trace kernels 12-20 (a repeat of
the decode layer's pattern), and the real durations of kernels 7-20 (1.05x simulated). No
instruction traces are stored: this trace cannot be simulated again.
"""


def _llm_trace_files() -> dict[str, bytes]:
    timeline = _data("cascade_sim.sample_data", "opt125m_h100_step_timeline.json")
    rows = ["kernel_id,kernel_name,duration_ns"]
    for uid, (name, cycles, _) in enumerate(LLM_KERNELS, 1):
        measured = _MEASURED_NS.get(uid, round(cycles / H100.core_clock_mhz * 1000 * 1.05))
        rows.append(f"{uid},{name},{measured}")
    info = {"model": "facebook/opt-125m", "layers": [], "source_gpu": "NVIDIA H100 80GB HBM3"}
    return {
        "step_timeline.json": timeline,
        "real_timing.csv": ("\n".join(rows) + "\n").encode(),
        "cascade.json": msgspec.json.encode(info),
        "PROVENANCE.md": PROVENANCE.encode(),
    }


def llm() -> Sample:
    clock = _Clock("opt125m-h100-e2e", SAMPLE_AT - timedelta(minutes=5))
    trace_files = _llm_trace_files()
    files = {trace_file(LLM_TRACE, path): content for path, content in trace_files.items()}
    kernels = [
        ev.TraceKernel(uid=uid, name=name, grid="1x1x1", block="128x1x1", shmem=0, nregs=0, file=f"kernel-{uid}.traceg.xz")
        for uid, (name, _, _) in enumerate(LLM_KERNELS, 1)
    ]
    real = [
        ev.RealTiming(kernel_id=int(k), kernel_name=n, duration_ns=float(d))
        for k, n, d in (line.split(",") for line in trace_files["real_timing.csv"].decode().splitlines()[1:])
    ]
    events: list[ev.Event] = [
        ev.TraceUploadStarted(id=clock.next_id(), at=clock.now(), trace_id=LLM_TRACE, content_type="application/x-tar", sample=True),
        ev.TraceFilesStored(
            id=clock.next_id(), at=clock.now(), trace_id=LLM_TRACE,
            files=[ev.StoredFile(path, len(content), digest(hashlib.sha256(content))) for path, content in trace_files.items()],
        ),
        ev.TraceKernelsListed(id=clock.next_id(), at=clock.now(), trace_id=LLM_TRACE, kernels=kernels),
        ev.TraceRealTimingListed(id=clock.next_id(), at=clock.now(), trace_id=LLM_TRACE, rows=real),
        ev.TraceReady(
            id=clock.next_id(), at=clock.now(), trace_id=LLM_TRACE, trace_gpu_arch="sm_90", kernel_count=len(kernels),
            bytes=sum(len(c) for c in trace_files.values()), suggested_sim_config=H100.name, has_real_timing=True,
            has_step_timeline=True, model="facebook/opt-125m", layers=[], source_gpu="NVIDIA H100 80GB HBM3",
        ),
    ]
    clock.at = SAMPLE_AT
    sim_id = "sim-sample-opt125m-h100-0"
    events.append(
        ev.RunCreated(
            id=clock.next_id(), at=SAMPLE_AT, run_id=LLM_RUN, trace_id=LLM_TRACE, entries=[ev.ConfigCount(gpu_config=H100.name, count=1)],
            sims=[ev.SimSpec(sim_id=sim_id, gpu_config=H100.name, replica=0)], kernels_total=len(kernels), sample=True,
        )
    )
    job = Job(run_id=LLM_RUN, sim_id=sim_id, attempt=1, trace_id=LLM_TRACE, gpu_config=H100, kernels_total=len(kernels))
    events.append(
        ev.SimClaimed(id=clock.next_id(), at=clock.now(), run_id=LLM_RUN, sim_id=sim_id, attempt=1, runner_id="sample", host="recorded")
    )
    report = SimReport(job=job, emit=events.append, next_id=clock.next_id, now=clock.now, reader=AccelSimOutput())
    report.launch = Launch(launcher_ref="recorded", host="recorded", config_digests={})
    report.stdout(PROVENANCE)
    report.stdout("".join(_stats_block(uid, name, cycles, insn, kernels_before=uid - 1) for uid, (name, cycles, insn) in enumerate(LLM_KERNELS, 1)))
    report.stdout("GPGPU-Sim: *** exit detected ***\n")
    report.end_of_output()
    result = report.outcome(0, [])
    for name, content in (("exit-status.txt", b"0\n"), ("kernel-stats.csv", kernel_stats_csv(report.kernels))):
        object_name = sim_file(sim_id, job.attempt, name)
        files[object_name] = content
        report.file_stored(name=name, size=len(content), object_name=object_name, digest=digest(hashlib.sha256(content)))
    report.heartbeat()
    report.finished(result)
    return Sample("opt125m-h100-e2e", events, files)


def _stats_block(uid: int, name: str, cycles: int, insn: int, kernels_before: int) -> str:
    """The summary lines of a stats block in the simulator's own format, for a kernel whose
    full block was not recorded: the parser reads it as it reads the real ones."""
    total_cycles = sum(c for _, c, _ in LLM_KERNELS[: kernels_before + 1])
    total_insn = sum(i for _, _, i in LLM_KERNELS[: kernels_before + 1])
    return (
        f"kernel_name = {name} \nkernel_launch_uid = {uid} \ngpu_sim_cycle = {cycles}\ngpu_sim_insn = {insn}\n"
        f"gpu_ipc = {insn / cycles:12.4f}\ngpu_tot_sim_cycle = {total_cycles}\ngpu_tot_sim_insn = {total_insn}\n"
        f"gpu_tot_ipc = {total_insn / total_cycles:12.4f}\ngpgpu_silicon_slowdown = 0x\n"
    )


def samples() -> list[Sample]:
    return [
        recorded("vectoradd-titanx", "vectoradd-100-32", "vectoradd-100-32__SM61_TITANX.log"),
        recorded("combo-titanx", "combo-vec-mm-xz", "combo-vec-mm-xz__SM61_TITANX.log"),
        llm(),
    ]


# --- loading (the I/O edge) ---------------------------------------------------------------


async def load(store: EventStore, objects: Objects, build: Callable[[], list[Sample]] = samples) -> int:
    """Append every sample not fully in the log yet; returns how many were added."""
    added = 0
    for sample in build():
        last = sample.events[-1]
        stored = await store.last_on(subjects.of(last))
        if stored is not None and stored.event.id == last.id:
            continue
        for name, content in sample.files.items():
            await objects.put(name, _once(content), content_type=None)
        await store.append_facts(sample.events, timeout=60)
        added += 1
        log.info("loaded sample %s (%d events)", sample.name, len(sample.events))
    return added


async def _once(content: bytes) -> AsyncIterator[bytes]:
    yield content

