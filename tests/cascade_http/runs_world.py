"""The world of the Runs API reference's examples, built from events as the trace upload, the
API and a runner would append them: trace `demo` (sm_86, 20 kernels, with a step timeline)
and run `run-210d75c008c4`, whose two SM86_RTX3070 sims each finished the six BabelStream
kernels the reference prints, with a 10,691-line log and six output files.

Where the reference does not show a value (it trims), the value here is made up to be
consistent with what it shows: stats maps have exactly as many keys as it says, the log and
kernel-stats.csv exactly as many lines, the files exactly their sizes.
"""

from __future__ import annotations

import itertools
import shutil
import sys
from array import array
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
from starlette.testclient import TestClient

from cascade_app.config import Settings
from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_core.packed_stats import PackedStats
from cascade_nats import deflated
from cascade_sim import sim_report, simulator
from tests.cascade_formats import timeline_fixture
from tests.cascade_http.conftest import TOKEN, service
from tests.cascade_http.reference import text_example
from tests.support import LOGS, TREE


def at(hms: str) -> datetime:
    """A time on the reference's day, 2026-11-08, from "08:59:03.024065"."""
    return datetime.fromisoformat(f"2026-11-08T{hms}+00:00").astimezone(UTC)


RUN_ID = "run-210d75c008c4"
SIMS = ("sim-1047ddbdf5b1", "sim-e8f63b6b3bed")
CLOCK_MHZ = 1132.0
RUN_CREATED = at("08:59:03.024065")

# (uid, name, gpu_sim_cycle, gpu_sim_insn, gpu_ipc): BabelStream's kernels, the first three
# as the reference prints them, cycles as the step-timeline fixture has them.
KERNELS = [
    (1, "_Z11init_kernelIdEvPT_S1_S1_S0_S0_S0_", 19456, 3.1513),
    (2, "_Z11copy_kernelIdEvPKT_PS0_", 11264, 1.9017),
    (3, "_Z10mul_kernelIdEvPT_PKS0_", 12288, 1.9768),
    (4, "_Z10add_kernelIdEvPKT_S2_PS0_", 16384, 3.0653),
    (5, "_Z12triad_kernelIdEvPT_PKS0_S3_", 16384, 2.2303),
    (6, "_Z10dot_kernelIdEvPKT_S2_PS0_i", 26484480, 579.4149),
]
LATEST = ev.SimMetrics(gpu_tot_sim_cycle=76713.0, gpu_tot_sim_insn=26560256.0, gpu_tot_ipc=346.2289, sim_rate_ips=510774.0)
# The stats maps' sizes: the reference shows four keys of each and trims 945 and 950 more.
STATS_KEYS = {1: 949, 2: 954}
TAIL_START = [
    "Reply_Network_in_buffer_full_per_cycle =       0.0000",
    "Reply_Network_in_buffer_avg_util =       0.0000",
    "Reply_Network_out_buffer_full_per_cycle =       0.0000",
]

# name -> (size, content type, stored at) of sim 0's files; sim 1 stores its own 30 ms later.
FILES = {
    "exit-status.txt": (2, "text/plain", "08:59:06.120587"),
    "gpgpu_inst_stats.txt": (133, "text/plain", "08:59:06.121677"),
    "kernel-stats.csv": (3829, "text/csv", "08:59:06.122701"),
    "opt125m_H100_perfetto.json.gz": (104763, "application/gzip", "08:59:06.123623"),
    "perf_counter.csv.gz": (474373, "application/gzip", "08:59:06.124946"),
    "accelsim.log.gz": (37105, "application/gzip", "08:59:06.128163"),
}
# (launcher_ref, launched at, finished at) per sim.
LIVES = [("64418", "08:59:03.224424", "08:59:06.130355"), ("64419", "08:59:03.224173", "08:59:06.164567")]

_ids = itertools.count()


# Configs the reference lists that the shared tree lacks: name -> core clock.
EXTRA_CONFIGS = {"SM80_A100": 1410.0, "SM90_H100": 1980.0, "SM90_H200": 1980.0}


def reference_tree(root: Path) -> Path:
    """The shared Accel-Sim tree plus the reference's other configs."""
    shutil.copytree(TREE, root)
    for name, clock in EXTRA_CONFIGS.items():
        config = root / "gpu-simulator" / "gpgpu-sim" / "configs" / "tested-cfgs" / name / "gpgpusim.config"
        config.parent.mkdir(parents=True)
        config.write_text(f"-gpgpu_clock_domains {clock}:{clock}:{clock}:2619.0\n")
    return root


def settings(tmp: Path, nats_url: str) -> Settings:
    """A service over `tmp` with the reference's configs, running no sims itself."""
    return Settings(
        token=TOKEN, data_dir=tmp / "data", nats_url=nats_url, accelsim_dir=reference_tree(tmp / "accel-sim"), runner=False, samples=False
    )


def event_id() -> str:
    return f"test-{next(_ids)}"


def sim_time_ns(cycles: int) -> float:
    return cycles / CLOCK_MHZ * 1000


# --- traces ---------------------------------------------------------------------------------


def trace_events(
    trace_id: str = "demo",
    *,
    arch: str = "sm_86",
    kernel_count: int = 20,
    started: datetime = at("08:59:02.587743"),
    ready: datetime | None = at("08:59:02.592073"),
    sample: bool = False,
    step_timeline: bool = True,
    real_timing: Sequence[float] = (),
) -> list[ev.Event]:
    """A trace's upload; ready (or still processing, with `ready=None`)."""
    common = {"trace_id": trace_id}
    kernels = [
        ev.TraceKernel(uid=uid, name=f"_Z6kernelv{uid}", grid="1x1x1", block="256x1x1", shmem=0, nregs=16, file=f"kernel-{uid}.traceg")
        for uid in range(1, kernel_count + 1)
    ]
    events: list[ev.Event] = [
        ev.TraceUploadStarted(id=event_id(), at=started, content_type="application/x-tar", sample=sample, **common),
        ev.TraceFilesStored(id=event_id(), at=started, files=[ev.StoredFile("kernelslist.g", 1000, "d0")], **common),
        ev.TraceKernelsListed(id=event_id(), at=started, kernels=kernels, **common),
    ]
    if real_timing:
        rows = [ev.RealTiming(kernel_id=i + 1, kernel_name=f"_Z6kernelv{i + 1}", duration_ns=ns) for i, ns in enumerate(real_timing)]
        events.append(ev.TraceRealTimingListed(id=event_id(), at=started, rows=rows, **common))
    if ready is not None:
        events.append(
            ev.TraceReady(
                id=event_id(),
                at=ready,
                trace_gpu_arch=arch,
                kernel_count=kernel_count,
                bytes=16890250,
                suggested_sim_config="SM86_RTX3070" if arch == "sm_86" else None,
                has_real_timing=bool(real_timing),
                has_step_timeline=step_timeline,
                **common,
            )
        )
    return events


def failed_trace(trace_id: str) -> list[ev.Event]:
    started = at("08:59:02.600000")
    return [
        ev.TraceUploadStarted(id=event_id(), at=started, trace_id=trace_id, content_type="application/x-tar"),
        ev.TraceFailed(id=event_id(), at=started + timedelta(milliseconds=5), trace_id=trace_id, error="kernelslist.g: no kernels"),
    ]


# --- runs and sims ----------------------------------------------------------------------------


def run_created(
    run_id: str = RUN_ID,
    sims: Sequence[tuple[str, str, int]] = ((SIMS[0], "SM86_RTX3070", 0), (SIMS[1], "SM86_RTX3070", 1)),
    *,
    trace_id: str = "demo",
    created: datetime = RUN_CREATED,
    kernels_total: int = 20,
    sample: bool = False,
) -> ev.RunCreated:
    counts: dict[str, int] = {}
    for _, config, _ in sims:
        counts[config] = counts.get(config, 0) + 1
    return ev.RunCreated(
        id=event_id(),
        at=created,
        run_id=run_id,
        trace_id=trace_id,
        entries=[ev.ConfigCount(gpu_config=c, count=n) for c, n in counts.items()],
        sims=[ev.SimSpec(sim_id=sim_id, gpu_config=config, replica=replica) for sim_id, config, replica in sims],
        kernels_total=kernels_total,
        sample=sample,
    )


def stats_map(uid: int, name: str, cycles: int, insn: int, keys: int = 950) -> dict[str, float | str]:
    """A stats map of `keys` keys, about 30 KB, opening as the reference's do."""
    stats: dict[str, float | str] = {"kernel_name": name, "kernel_launch_uid": float(uid), "gpu_sim_cycle": float(cycles), "gpu_sim_insn": float(insn)}
    for i in range(keys - len(stats)):
        stats[f"L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT_{i:04d}]"] = float(i * uid)
    return stats


def kernel_finished(run_id: str, sim_id: str, index: int, when: datetime, *, attempt: int = 1, stats: bool = True) -> ev.KernelFinished:
    uid, name, insn, ipc = KERNELS[index]
    cycles = timeline_fixture.SIM_CYCLES[uid]
    return ev.KernelFinished(
        id=event_id(),
        at=when,
        run_id=run_id,
        sim_id=sim_id,
        attempt=attempt,
        kernel_index=index,
        uid=uid,
        name=name,
        gpu_sim_cycle=cycles,
        gpu_sim_insn=insn,
        gpu_ipc=ipc,
        sim_time_ns=sim_time_ns(cycles),
        stats=packed_stats.from_mapping(stats_map(uid, name, cycles, insn, STATS_KEYS.get(uid, 950))) if stats else None,
    )


def log_lines() -> list[str]:
    """The reference's 10,691-line log: its first 12 lines as printed, real Accel-Sim output
    (vectoradd on SM86_RTX3070) repeated after them, and a last 20 that open as the
    reference's log_tail does."""
    _, head, more = text_example("Download a sim's log")
    real = (LOGS / "vectoradd-100-32__SM86_RTX3070.log").read_text().splitlines()
    tail = TAIL_START + real[-17:]
    body = list(itertools.islice(itertools.cycle(real), len(head) + more - len(head) - len(tail)))
    return head + body + tail


def file_bytes(name: str) -> bytes:
    size = FILES[name][0]
    if name == "exit-status.txt":
        return b"0\n"
    if name == "kernel-stats.csv":
        _, shown, more = text_example("Download an output file")
        text = "\n".join(shown) + "\n"
        lines = [f"{12 + i},_Z10dot_kernelIdEvPKT_S2_PS0_i,{5000 + i},{3000 + i},0.6" for i in range(more)]
        pad = size - len(text.encode()) - sum(len(line) + 1 for line in lines)
        lines[-1] += "0" * pad  # the last ipc gets more digits, so the file has its size
        return (text + "\n".join(lines) + "\n").encode()
    return bytes((i * 7 + len(name)) % 256 for i in range(size))


def object_name(sim_id: str, name: str) -> str:
    return f"sims/{sim_id}/{name}"


def sim_life(
    run_id: str,
    sim_id: str,
    *,
    launcher_ref: str = "64418",
    launched: datetime = at("08:59:03.224424"),
    finished: datetime = at("08:59:06.130355"),
    files_at: datetime = at("08:59:06.120587"),
    kernels: int = len(KERNELS),
    lines: Sequence[str] = (),
    files: Sequence[str] = tuple(FILES),
    outcome: str = "succeeded",
    attempt: int = 1,
    stats: bool = True,
    config_digests: Mapping[str, str] = {"gpgpusim.config": "abc"},
) -> list[ev.Event]:
    """What a runner appends for one sim, in order: claim, launch (on config files of these
    digests), heartbeats with log lines and the kernels finished between them, the files, a
    final heartbeat, the outcome."""
    common = {"run_id": run_id, "sim_id": sim_id}
    events: list[ev.Event] = [
        ev.SimClaimed(id=event_id(), at=launched - timedelta(milliseconds=100), attempt=attempt, runner_id="runner-1", host="h1", **common),
        ev.SimLaunched(
            id=event_id(), at=launched, attempt=attempt, launcher_ref=launcher_ref, host="h1", config_digests=dict(config_digests), **common
        ),
    ]
    step = (files_at - launched) / (kernels + 2)
    chunk = -(-len(lines) // (kernels + 1)) if lines else 0
    for i in range(kernels + 1):
        when = launched + step * (i + 1)
        part = list(lines[i * chunk : (i + 1) * chunk])
        events.append(
            ev.SimHeartbeat(
                id=event_id(),
                at=when,
                attempt=attempt,
                kernels_done=i,
                current_kernel=KERNELS[min(i, len(KERNELS) - 1)][1],
                latest=ev.SimMetrics(gpu_tot_sim_cycle=1000.0 * i, gpu_tot_sim_insn=2000.0 * i, gpu_tot_ipc=2.0, sim_rate_ips=500000.0),
                first_line_seq=i * chunk + 1,
                log="\n".join(part),
                **common,
            )
        )
        if i < kernels:
            events.append(kernel_finished(run_id, sim_id, i, when + step / 2, attempt=attempt, stats=stats))
    offsets = {name: at(FILES[name][2]) - at(FILES["exit-status.txt"][2]) for name in FILES}
    for name in files:
        size, content_type, _ = FILES[name]
        events.append(
            ev.SimFileStored(
                id=event_id(), at=files_at + offsets[name], attempt=attempt, name=name, size=size,
                content_type=content_type, object_name=object_name(sim_id, name), digest="d", **common,
            )
        )
    last = KERNELS[kernels - 1][1] if kernels else None
    events.append(
        ev.SimHeartbeat(id=event_id(), at=finished, attempt=attempt, kernels_done=kernels, current_kernel=last, latest=LATEST, **common)
    )
    exit_code = 0 if outcome == "succeeded" else 1
    events.append(ev.SimFinished(id=event_id(), at=finished, attempt=attempt, outcome=outcome, exit_code=exit_code, **common))  # type: ignore[arg-type]
    return events


def finished_sim(
    run_id: str,
    sim_id: str,
    kernels: Sequence[tuple[str, int]],
    clock_mhz: float,
    when: datetime,
    *,
    stats: Sequence[Mapping[str, Any]] = (),
    config_digests: Mapping[str, str] = {},
) -> list[ev.Event]:
    """A sim's life as a runner appends it: claimed, launched (on config files of these
    digests), a kernel result per (name, cycles) a millisecond apart (with the i-th of
    `stats` as its map, each value's difference from the map before with its values, else
    none), a last heartbeat, succeeded."""
    common: dict[str, Any] = {"run_id": run_id, "sim_id": sim_id, "attempt": 1}
    events: list[ev.Event] = [
        ev.SimClaimed(id=event_id(), at=when, runner_id="runner-seeded", host="h", **common),
        ev.SimLaunched(id=event_id(), at=when, launcher_ref="1", host="h", config_digests=dict(config_digests), **common),
    ]
    packed = [packed_stats.from_mapping(m) for m in stats]
    blocks = [None if p is None else block_of(p) for p in packed]
    for i, (name, cycles) in enumerate(kernels):
        block = blocks[i] if stats else None
        with_differences = None if block is None else with_its_differences(packed[i], block, blocks[i - 1] if i else None)
        events.append(
            ev.KernelFinished(
                id=event_id(), at=when + timedelta(milliseconds=i), kernel_index=i, uid=i + 1, name=name, gpu_sim_cycle=cycles,
                gpu_sim_insn=cycles * 3, gpu_ipc=3.0, sim_time_ns=cycles / clock_mhz * 1000, stats=with_differences, **common,
            )
        )
    done = when + timedelta(milliseconds=len(kernels) + 1)
    events.append(ev.SimHeartbeat(id=event_id(), at=done, kernels_done=len(kernels), current_kernel=kernels[-1][0], latest=LATEST, **common))
    events.append(ev.SimFinished(id=event_id(), at=done, outcome="succeeded", exit_code=0, **common))
    return events


def with_its_differences(stats: PackedStats | None, block: simulator.Stats, before: simulator.Stats | None) -> PackedStats | None:
    """The map `stats` (whose values `block` holds, as the runner's parser gives them) as the
    runner sends it: each value's difference from the block `before` after its values."""
    if stats is None:
        return None
    floats = packed_stats.packed_floats(block.floats + sim_report.differences(block, before))
    return msgspec.structs.replace(stats, values=floats, with_differences=True)


def block_of(stats: PackedStats) -> simulator.Stats:
    """A map as the runner's parser gives it, its floats in this machine's order."""
    floats = array("d", deflated.floats_of(stats))
    if sys.byteorder == "big":
        floats.byteswap()
    texts = {i: t for i, t in stats.texts.items() if t is not None}
    return simulator.Stats(packed_stats.names_of(stats), floats.tobytes(), texts)


def reference_run() -> list[ev.Event]:
    """Run run-210d75c008c4 from creation to both sims succeeded."""
    lines = log_lines()
    events: list[ev.Event] = [run_created()]
    for i, (sim_id, (ref, launched, finished)) in enumerate(zip(SIMS, LIVES)):
        files_at = at(FILES["exit-status.txt"][2]) + timedelta(milliseconds=30 * i)
        events += sim_life(RUN_ID, sim_id, launcher_ref=ref, launched=at(launched), finished=at(finished), files_at=files_at, lines=lines)
    return events


# --- appending ------------------------------------------------------------------------------


def append(client: TestClient, events: Sequence[ev.Event]) -> list[int]:
    """Append as a runner does (pipelined facts) and wait until the read model shows them."""
    c = service(client)

    async def go() -> list[int]:
        seqs = await c.store.append_facts(list(events), timeout=30.0)
        await c.projector.wait_for(seqs[-1], timeout=30.0)
        return seqs

    assert client.portal is not None
    return client.portal.call(go)


def put_object(client: TestClient, name: str, data: bytes) -> None:
    c = service(client)

    async def chunks() -> AsyncIterator[bytes]:
        yield data

    async def go() -> None:
        await c.objects.put(name, chunks())

    assert client.portal is not None
    client.portal.call(go)


def reference_objects() -> dict[str, bytes]:
    """Trace demo's step timeline and both sims' files, by object name."""
    objects = {"accelsim-traces/demo/step_timeline.json": msgspec.json.encode(timeline_fixture.build_timeline())}
    return objects | {object_name(sim_id, name): file_bytes(name) for sim_id in SIMS for name in FILES}


def store_reference_files(client: TestClient) -> None:
    for name, data in reference_objects().items():
        put_object(client, name, data)
