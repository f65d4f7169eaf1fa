"""Hypothesis strategies for valid event histories: traces, runs and sims living their
lives, interleaved, with superseded attempts, late facts and cancels."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_core.packed_stats import PackedStats
from cascade_sim import event_sender

T0 = datetime(2026, 11, 8, 8, 0, tzinfo=UTC)
CONFIGS = ("SM7_QV100", "SM61_TITANX")


class _Clock:
    def __init__(self) -> None:
        self.n = 0

    def tick(self) -> tuple[str, datetime]:
        self.n += 1
        return f"ev-{self.n}", T0 + timedelta(milliseconds=self.n)


@st.composite
def _trace_life(draw: st.DrawFn) -> list[str]:
    steps = ["started", "files", "kernels"]
    steps += draw(st.sampled_from([["ready"], ["failed"], []]))
    if steps[-1] == "ready":
        # Real timing attached: none, once, replaced, or two racing (the second to list wins).
        steps += draw(st.sampled_from([[], ["rows t1", "attach t1 -"], ["rows t1", "attach t1 -", "rows t2", "attach t2 t1"], ["rows t1", "rows t2", "attach t2 -", "attach t1 -"]]))
    if draw(st.booleans()):
        steps.append("deleted")
        if draw(st.booleans()):
            steps += ["started", "files"]
    return steps


RESUMED_AT = 2  # the launch a resumed attempt starts from


@st.composite
def _sim_life(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Actions of one sim: (action, attempt)."""
    actions: list[tuple[str, int]] = []
    attempt = 0
    for _ in range(draw(st.integers(0, 12))):
        choice = draw(st.sampled_from(["claim", "resume", "launch", "beat", "beat", "kernel", "kernel", "file", "finish", "stale"]))
        if choice == "claim" or choice == "resume" and attempt:
            attempt += 1
            actions.append((choice, attempt))  # a resume takes over from a lost runner's attempt
        elif choice == "stale" and attempt >= 2:
            actions.append(("beat", attempt - 1))  # a fact from a runner that was replaced
        elif attempt or choice == "finish":
            actions.append((choice, attempt))
    return actions


@st.composite
def histories(draw: st.DrawFn, deletes: bool = True) -> list[ev.Event]:
    """`deletes`: whether a run may be deleted (at any point: the fold does not judge)."""
    clock = _Clock()
    lanes: list[list[object]] = []
    for t in range(draw(st.integers(1, 2))):
        lanes.append([("trace", f"tr.{t}", step) for step in draw(_trace_life())])
    for r in range(draw(st.integers(1, 2))):
        sims = [f"sim-{r}-{i}" for i in range(draw(st.integers(1, 4)))]
        lanes.append([("run", f"run-{r}", sims)])
        for sim in sims:
            lanes.append([("sim", f"run-{r}", sim, action) for action in draw(_sim_life())])
        if draw(st.booleans()):
            lanes.append([("cancel", f"run-{r}")])
        if deletes and draw(st.integers(0, 3)) == 0:  # deleted, and its sims' later facts ignored
            lanes.append([("delete", f"run-{r}")])
    # Interleave the lanes, each in its own order; a sim's, cancel's or delete's lane waits for its run.
    positions = [0] * len(lanes)
    created: set[str] = set()
    counters: dict[str, list[int]] = {}
    out: list[ev.Event] = []
    while True:
        eligible = [
            i
            for i, lane in enumerate(lanes)
            if positions[i] < len(lane) and (lane[positions[i]][0] not in ("sim", "cancel", "delete") or lane[positions[i]][1] in created)  # type: ignore[index]
        ]
        if not eligible:
            return named_once(out)
        i = eligible[draw(st.integers(0, len(eligible) - 1))]
        item = lanes[i][positions[i]]
        positions[i] += 1
        if item[0] == "run":  # type: ignore[index]
            created.add(item[1])  # type: ignore[index]
        out.append(_event(clock, item, counters))  # type: ignore[arg-type]


def _event(clock: _Clock, item: tuple, counters: dict[str, list[int]]) -> ev.Event:  # type: ignore[type-arg]
    eid, at = clock.tick()
    kind = item[0]
    if kind == "trace":
        _, trace_id, step = item
        match step:
            case "started":
                return ev.TraceUploadStarted(id=eid, at=at, trace_id=trace_id, content_type="application/x-tar")
            case "files":
                files = [ev.StoredFile("kernelslist.g", 10, "d1"), ev.StoredFile("kernel-1.traceg", 99, "d2")]
                return ev.TraceFilesStored(id=eid, at=at, trace_id=trace_id, files=files)
            case "kernels":
                kernels = [ev.TraceKernel(uid=1, name="_Z1kv", grid="1x1x1", block="32x1x1", shmem=0, nregs=8, file="kernel-1.traceg")]
                return ev.TraceKernelsListed(id=eid, at=at, trace_id=trace_id, kernels=kernels)
            case "ready":
                return ev.TraceReady(
                    id=eid, at=at, trace_id=trace_id, trace_gpu_arch="sm_61", kernel_count=1, bytes=109,
                    suggested_sim_config="SM61_TITANX", has_real_timing=False, has_step_timeline=False,
                )
            case "failed":
                return ev.TraceFailed(id=eid, at=at, trace_id=trace_id, error="kernelslist.g line 1: bad")
            case str() if step.startswith("rows "):
                timing_id = step.split()[1]
                rows = [
                    ev.RealTiming(kernel_id=1, kernel_name="_Z1kv", duration_ns=1000.0 + repeat, repeat=repeat, cycles=1417.0)
                    for repeat in range(2)
                ]
                return ev.TraceRealTimingListed(id=eid, at=at, trace_id=trace_id, rows=rows, timing_id=timing_id)
            case str() if step.startswith("attach "):
                _, timing_id, replaces = step.split()
                return ev.TraceRealTimingAttached(
                    id=eid, at=at, trace_id=trace_id, timing_id=timing_id, replaces=None if replaces == "-" else replaces,
                    format="ncu", kernels=1, repeats=2, measures=["duration_ns", "cycles"],
                )
            case _:
                return ev.TraceDeleted(id=eid, at=at, trace_id=trace_id)
    if kind == "run":
        _, run_id, sims = item
        # Two configs, listed out of alphabetical order, the sims alternating between them.
        specs = [ev.SimSpec(sim_id=s, gpu_config=CONFIGS[i % 2], replica=i // 2) for i, s in enumerate(sims)]
        entries = [ev.ConfigCount(gpu_config=c, count=n) for c, n in ((CONFIGS[0], (len(sims) + 1) // 2), (CONFIGS[1], len(sims) // 2)) if n]
        return ev.RunCreated(id=eid, at=at, run_id=run_id, trace_id="tr.0", entries=entries, sims=specs, kernels_total=3)
    if kind == "cancel":
        return ev.RunCancelRequested(id=eid, at=at, run_id=item[1])
    if kind == "delete":
        return ev.RunDeleted(id=eid, at=at, run_id=item[1])
    _, run_id, sim_id, (action, attempt) = item
    if action == "resume":  # from launch 2 on, its log lines after the earlier attempts' (`sim_report.first_line_seq`)
        counters[f"{sim_id}/{attempt}"] = [(attempt - 1) << 32, RESUMED_AT - 1]
    lines, kernels = counters.setdefault(f"{sim_id}/{attempt}", [0, 0])
    common = {"id": eid, "at": at, "run_id": run_id, "sim_id": sim_id}
    match action:
        case "claim":
            return ev.SimClaimed(**common, attempt=attempt, runner_id="runner-1", host="h1")
        case "resume":
            return ev.SimClaimed(**common, attempt=attempt, runner_id="runner-2", host="h2", resume=ev.Resume(first=RESUMED_AT, warmup=1))
        case "launch":
            return ev.SimLaunched(**common, attempt=attempt, launcher_ref=str(1000 + attempt), host="h1", config_digests={"gpgpusim.config": "abc"})
        case "beat":
            counters[f"{sim_id}/{attempt}"][0] += 3
            return ev.SimHeartbeat(
                **common, attempt=attempt, kernels_done=kernels, current_kernel="_Z1kv",
                latest=ev.SimMetrics(gpu_tot_sim_cycle=float(lines), gpu_tot_sim_insn=2.0, gpu_tot_ipc=0.5, sim_rate_ips=100.0),
                first_line_seq=lines + 1, log="\n".join(f"l{lines + j}" for j in range(3)),
            )
        case "kernel":
            counters[f"{sim_id}/{attempt}"][1] += 1
            return ev.KernelFinished(
                **common, attempt=attempt, kernel_index=kernels, uid=kernels + 1, name="_Z1kv", gpu_sim_cycle=1417,
                gpu_sim_insn=2834, gpu_ipc=2.0, sim_time_ns=1000.0, stats=_stats(sim_id, attempt, kernels),
            )
        case "file":
            return ev.SimFileStored(
                **common, attempt=attempt, name=f"f{kernels}.txt", size=3, content_type="text/plain", object_name=f"sims/{sim_id}/f", digest="x"
            )
        case _:
            outcome = "succeeded" if kernels % 2 == 0 else "failed"
            return ev.SimFinished(**common, attempt=attempt, outcome=outcome, exit_code=0 if outcome == "succeeded" else 1)


def _stats(sim_id: str, attempt: int, kernel: int) -> PackedStats | None:
    """A kernel's stats map as stored, with a name only this attempt's maps have (whose ids
    must not depend on where batches begin, whether or not the attempt's rows are kept),
    and the layout changing with the kernel."""
    stats: dict[str, float | str] = {"kernel_name": "_Z1kv", "gpu_sim_cycle": 1417.0, "note": "-nan%", f"only.{sim_id}.{attempt}": float(kernel)}
    stats["L2_cache_bank[0].Miss_rate" if kernel % 2 else "dram[0][1]"] = "NaN" if kernel % 3 else "none"
    return packed_stats.from_mapping(stats)


def named_once(events: list[ev.Event]) -> list[ev.Event]:
    """The events with kernel results as runners send them (`event_sender.named`): a map
    naming its set of names by digest, the set's own event before the first of a sim's
    results that names it (so a set is defined more than once, as by two runners); but a
    result of an odd kernel index holds its names, as results from before."""
    out: list[ev.Event] = []
    stored: dict[str, set[str]] = {}  # by sim
    for e in events:
        if isinstance(e, ev.KernelFinished) and e.kernel_index % 2 == 0:
            defined, e = event_sender.named(e, stored.setdefault(e.sim_id, set()), e.at)
            if defined is not None:
                stored[e.sim_id].add(defined.digest)
                out.append(defined)
        out.append(e)
    return out


def trace_history(trace_id: str, steps: list[str]) -> list[ev.Event]:
    """One trace's events, step by step as `_trace_life` names them."""
    clock = _Clock()
    return [_event(clock, ("trace", trace_id, step), {}) for step in steps]


def lifecycle() -> list[ev.Event]:
    """One fixed history touching every event type: a trace, a run of three sims (one
    retried after its runner was lost, one cancelled), late and stale facts."""
    clock = _Clock()
    counters: dict[str, list[int]] = {}
    items: list[tuple] = [  # type: ignore[type-arg]
        *[("trace", "demo", s) for s in ("started", "files", "kernels", "ready", "rows t1", "attach t1 -")],
        ("run", "run-a", ["sim-a0", "sim-a1", "sim-a2"]),
        *[("sim", "run-a", "sim-a0", a) for a in [("claim", 1), ("launch", 1), ("beat", 1), ("kernel", 1), ("claim", 2)]],
        *[("sim", "run-a", "sim-a0", a) for a in [("launch", 2), ("beat", 1), ("kernel", 2), ("beat", 2), ("kernel", 2)]],
        *[("sim", "run-a", "sim-a1", a) for a in [("claim", 1), ("launch", 1), ("kernel", 1), ("beat", 1), ("file", 1)]],
        *[("sim", "run-a", "sim-a0", a) for a in [("file", 2), ("finish", 2), ("beat", 2)]],
        ("cancel", "run-a"),
        ("sim", "run-a", "sim-a1", ("finish", 1)),
        *[("trace", "old", s) for s in ("started", "files", "failed", "deleted")],
    ]
    return named_once([_event(clock, item, counters) for item in items])
