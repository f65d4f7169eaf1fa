"""Runs and sims as terminal text: tables, progress lines and summaries (pure functions).

Numbers read as the web app shows them (`static/js/format.js`): three significant digits
with k/M/G/T, IPC to one decimal from 100 up, `-` for what is not known yet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from cascade_api.models import ChunkView, Comparison, ReferenceComparison, ReferenceSim, RunDetail, RunSummary, Sim
from cascade_core.correlation import Correlation, Spread
from cascade_core.sim import Resumed
from cascade_core.sims import SIM_STATES
from cascade_formats.kernel_names import short_name

NONE = "-"
BAR_WIDTH = 20
RATE_WIDTH = len("10.5 k inst/s")


def compact(n: float | None) -> str:
    """26560256 -> "26.6 M"."""
    if n is None:
        return NONE
    n = float(f"{n:.3g}")  # rounded first, so 999950 is "1 M", not "1e+03 k"
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= limit:
            return f"{n / limit:.3g} {suffix}"
    return f"{n:.3g}"


def rate(ips: float | None) -> str:
    return NONE if ips is None else f"{compact(ips)} inst/s"


def ipc(x: float | None) -> str:
    if x is None:
        return NONE
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3g}"


def integer(n: float | None) -> str:
    return NONE if n is None else f"{n:,.0f}"


def local_time(at: datetime | None) -> str:
    return NONE if at is None else at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = min(width, done * width // total) if total > 0 else 0
    return f"[{'#' * filled}{'.' * (width - filled)}]"


def counts(sim_counts: dict[str, int]) -> str:
    """`{"failed": 1, "succeeded": 2}` -> "2 succeeded, 1 failed", in lifecycle order."""
    order = sorted(sim_counts, key=lambda s: SIM_STATES.index(s) if s in SIM_STATES else len(SIM_STATES))
    return ", ".join(f"{sim_counts[state]} {state}" for state in order) or "no sims"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    """Aligned columns two spaces apart; the columns numbered in `right` are right-aligned."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
        for row in (header, *rows)
    ]


def label(sim: Sim) -> str:
    return f"{sim.gpu_config} r{sim.replica}"


# --- a run being watched -------------------------------------------------------------------


def progress(sims: Sequence[Sim]) -> list[str]:
    """One line per sim: config and replica, state, kernels done as a bar, IPC, simulation
    rate, and last the current kernel (of any length: a terminal cuts it, not the numbers);
    or the error of a failed sim, or why a sim may never finish unless someone acts."""
    width = max((len(label(s)) for s in sims), default=0)
    digits = max((len(str(s.kernels_total)) for s in sims), default=1)
    return [_progress_line(sim, width, digits) for sim in sims]


def _progress_line(sim: Sim, width: int, digits: int) -> str:
    head = (
        f"{label(sim):<{width}}  {sim.state:<9}  {bar(sim.kernels_done, sim.kernels_total)}"
        f"  {sim.kernels_done:>{digits}}/{sim.kernels_total:<{digits}}"
    )
    if sim.state == "failed" and sim.error:
        return f"{head}  error: {_one_line(sim.error)}"  # one line, however many it had
    if sim.cut_short is not None:
        return f"{head}  cut short: {sim.cut_short.said}"
    if sim.attention:
        return f"{head}  needs attention: {sim.attention}"
    if sim.cached_from is not None:
        return f"{head}  cached: the result of {sim.cached_from}"
    kernel = short_name(sim.current_kernel) if sim.current_kernel else NONE
    return f"{head}  IPC {ipc(sim.latest.gpu_tot_ipc):>6}  {rate(sim.latest.sim_rate_ips):<{RATE_WIDTH}}  {kernel}"


def outcome(detail: RunDetail) -> list[str]:
    """How a run ended: its state and counts, then each failed sim with its error, and each
    sim cut short with what it did not simulate."""
    lines = [f"run {detail.id} {detail.state}: {counts(detail.sim_counts)}{cut_short(detail)}"]
    resumed = [(s, f"chunk {c.index + 1} " if c is not None else "", r) for s, c, r in _resumes(detail.sims)]
    if resumed:
        lines += ["", "resumed after a lost runner:"]
        lines += [f"  {label(s)} {s.id} {chunk}attempt {r.attempt} at launch {r.first}, warm-up {r.warmup}" for s, chunk, r in resumed]
    for sim in detail.sims:
        if sim.state == "failed":
            lines.append(f"  {label(sim)} {sim.id} failed: {sim.error or 'no error given'}")
        if sim.cut_short is not None:
            lines.append(f"  {label(sim)} {sim.id} cut short: {sim.cut_short.said}")
    return lines


def cut_short(run: RunSummary) -> str:
    """A run's sims cut short, after its counts: ", 1 cut short"; nothing when none."""
    return f", {run.cut_short} cut short" if run.cut_short else ""


# --- lists and summaries -------------------------------------------------------------------


def runs_table(runs: Sequence[RunSummary]) -> list[str]:
    if not runs:
        return ["no runs"]
    rows = [[r.id, r.trace_id, r.state, counts(r.sim_counts) + cut_short(r), cycles_text(r), local_time(r.created_at)] for r in runs]
    return table(["run", "trace", "state", "sims", "cycles", "created"], rows)


def cycles_text(run: RunSummary) -> str:
    """Each config's total cycles (`RunSummary.cycles`): the median of its whole replicas, with
    their range when they differ; the config named when the run has several."""
    named = len(run.entries) > 1 or len(run.cycles) > 1
    return ", ".join(
        (f"{c.gpu_config} " if named else "") + integer(c.median) + (f" ({integer(c.min)}-{integer(c.max)})" if c.min != c.max else "")
        for c in run.cycles
    ) or NONE


def run_text(detail: RunDetail, config_labels: Mapping[str, str] = {}) -> list[str]:
    """A run for reading: what it ran, each sim's state and totals (its config by its label
    when replicas of it ran config files of several digests: `Comparison.config_labels`, by
    sim id), the sims that may never finish unless someone acts and why, and what the failed
    ones said last."""
    trace = detail.trace
    lines = [
        f"run      {detail.id}  {detail.state}  ({counts(detail.sim_counts)}{cut_short(detail)})",
        f"trace    {trace.id}  ({trace.trace_gpu_arch or 'arch unknown'}, {trace.kernel_count} kernels)",
        f"created  {local_time(detail.created_at)}",
        f"entries  {', '.join(f'{e.gpu_config} x{e.count}' for e in detail.entries)}",
        *([f"name     {detail.name}"] if detail.name else []),
        *([f"tags     {' '.join(detail.tags)}"] if detail.tags else []),
        "",
    ]
    header = ["config", "replica", "sim", "state", "attempt", "kernels", "cycles", "instructions", "IPC", "rate", "exit"]
    rows = [
        [config_labels.get(s.id, s.gpu_config), str(s.replica), s.id, s.state, str(s.attempt or 1), f"{s.kernels_done}/{s.kernels_total}",
         integer(s.latest.gpu_tot_sim_cycle), integer(s.latest.gpu_tot_sim_insn), ipc(s.latest.gpu_tot_ipc),
         rate(s.latest.sim_rate_ips), NONE if s.exit_code is None else str(s.exit_code)]
        for s in detail.sims
    ]
    lines += table(header, rows, right=frozenset({1, 4, 5, 6, 7, 8, 9, 10}))
    apart = sorted({s.gpu_config for s in detail.sims if s.id in config_labels})
    if apart:
        lines += ["", f"{', '.join(apart)}: replicas ran config files of different digests, shown apart as NAME@<digest> and never pooled"]
    references = [s for s in detail.sims if s.reference_for]
    if references:
        lines += ["", "references (whole, in sequence; cascade sim reference SIM compares them):"]
        lines += [f"  {label(s)} {s.id} of {s.reference_for}" for s in references]
    cut = [s for s in detail.sims if s.cut_short is not None]
    if cut:
        lines += ["", "cut short (succeeded without simulating every launch; their totals cover the launches simulated):"]
        lines += [f"  {label(s)} {s.id}: {s.cut_short.said}" for s in cut if s.cut_short is not None]
    stuck = [s for s in detail.sims if s.attention]
    if stuck:
        lines += ["", f"{len(stuck)} sim{'s' if len(stuck) > 1 else ''} may never finish unless someone acts:"]
        lines += [f"  {label(s)} {s.id}: {s.attention}" for s in stuck]
    retried = [s for s in detail.sims if s.attempts]
    if retried:
        lines += ["", "earlier attempts:"]
        lines += [f"  {label(s)} {s.id} attempt {a.attempt} {a.state}{_said(a.error)}" for s in retried for a in s.attempts]
    resumed = [(s, f"chunk {c.index + 1} " if c is not None else "", r) for s, c, r in _resumes(detail.sims)]
    if resumed:
        lines += ["", "resumed after a lost runner:"]
        lines += [f"  {label(s)} {s.id} {chunk}attempt {r.attempt} at launch {r.first}, warm-up {r.warmup}" for s, chunk, r in resumed]
    for sim in detail.sims:
        if sim.state == "failed":
            lines += ["", f"{sim.id} ({label(sim)}) failed: {sim.error or 'no error given'}"]
            if sim.log_tail:
                lines += [f"  last {len(sim.log_tail)} log lines:", *(f"  | {line}" for line in sim.log_tail)]
    return lines


def _resumes(sims: Sequence[Sim]) -> Iterator[tuple[Sim, ChunkView | None, Resumed]]:
    """Every attempt of the sims, or of their chunks, that resumed a lost runner's."""
    for sim in sims:
        yield from ((sim, None, r) for r in sim.resumed)
        for chunk in sim.split.chunks if sim.split is not None else []:
            yield from ((sim, chunk, r) for r in chunk.resumed)


def _one_line(error: str | None) -> str:
    return " ".join(error.split()) if error else "no error given"


def _said(error: str | None) -> str:
    """An earlier attempt's error on its line; nothing for one that had none (a cancel)."""
    return f": {_one_line(error)}" if error else ""


# --- a run's comparison --------------------------------------------------------------------


def comparison_table(comparison: Comparison) -> list[str]:
    """Each kernel's simulated time per config (the median over replicas), its real time
    when the trace has one (the mean over hardware repetitions, with their range as
    plot-correlation.py labels it), and last each config's total and its ratio to the
    first's, over the kernels every config has (a partial comparison says how many); then
    each config's scores against the real values."""
    if not comparison.rows:
        return ["no kernel has finished yet"]
    configs = comparison.configs
    real = comparison.has_real_timing
    spread = any(row.real_ns_spread is not None for row in comparison.rows)
    cycles = any(row.real_cycles is not None for row in comparison.rows)
    extra = [*(["real"] if real else []), *(["real range"] if spread else []), *(["real cycles"] if cycles else [])]
    header = ["#", "kernel", *configs, *extra]
    rows = [
        [str(row.kernel_index), short_name(row.kernel_name), *(_time(row.sim_ns.get(c)) for c in configs),
         *([_time(row.real_ns)] if real else []), *([_range(row.real_ns, row.real_ns_spread)] if spread else []),
         *([integer(row.real_cycles)] if cycles else [])]
        for row in comparison.rows
    ]
    common = [row for row in comparison.rows if all(row.sim_ns.get(c) is not None for c in configs)]
    totals = {c: sum(row.sim_ns[c] or 0.0 for row in common) for c in configs}
    real_total = sum(row.real_ns for row in common if row.real_ns is not None)
    blank = [""] * (len(extra) - real)
    rows.append(["", "total", *(_time(totals[c]) for c in configs), *([_time(real_total)] if real else []), *blank])
    first = totals[configs[0]]
    rows.append(["", f"vs {configs[0]}", *(f"{totals[c] / first:.3f}x" if first else NONE for c in configs),
                 *([f"{real_total / first:.3f}x" if first else NONE] if real else []), *blank])
    right = frozenset(range(2, len(header)))
    lines = table(header, rows, right=right)
    if comparison.partial:
        lines.append(f"partial: {len(common)} of {comparison.kernels_total} kernels finished by every config; totals and ratios are over those")
    for title, scores in (("real time", comparison.correlation), ("real cycles", comparison.cycles_correlation)):
        if scores is not None:
            lines += ["", f"against {title}, as Accel-Sim's plot-correlation.py scores it:", *scores_table(scores)]
    return lines


_SCORES = ["kernels", "Correl", "Err", "Agg_Err", "RPD", "NRMSE", "<1%", "<10%"]


def scores_table(scores: dict[str, Correlation]) -> list[str]:
    """Each config's scores, in plot-correlation.py's names and number formats."""
    header = ["config", *_SCORES, "over", "under"]
    rows = [[config, *_scores(s), str(s.over), str(s.under)] for config, s in scores.items()]
    return table(header, rows, right=frozenset(range(1, len(header))))


def _scores(s: Correlation) -> list[str]:
    return [
        str(s.kernels), _number(s.correl, ".4"), _percent(s.err_pct), _percent(s.agg_err_pct), _percent(s.rpd_pct),
        _number(s.nrmse, ".2f"), str(s.err_under_1pct), str(s.err_under_10pct),
    ]


def counters_table(comparison: Comparison) -> list[str]:
    """Each hardware counter of the real timing against the sum of its simulator stats'
    per-kernel values, a row per config, scored as time is (`cascade compare --counters`)."""
    if not comparison.counters:
        return ["no hardware counters: the trace's real timing has none of the metrics Accel-Sim's correl_mappings.py pairs "
                "with simulator stats (ncu --csv --metrics smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,...)"]
    header = ["counter", "hw metric", "sim stat", "config", *_SCORES]
    rows = [
        [name, counter.hw_metric, " + ".join(counter.sim_stats), config, *_scores(s)]
        for name, counter in comparison.counters.items()
        for config, s in counter.correlation.items()
    ]
    lines = table(header, rows, right=frozenset(range(4, len(header))))
    if comparison.partial:
        lines.append("partial: the run is not over, or a config lacks kernels another has; scores are over the kernels each config has")
    return lines


def _number(x: float | None, spec: str) -> str:
    return NONE if x is None else format(x, spec)


def _percent(x: float | None) -> str:
    return NONE if x is None else f"{x:.2f}%"


def _range(mean: float | None, spread: Spread | None) -> str:
    """How far the repetitions went above and below their mean: `+3.10%/-2.90%`."""
    if mean is None or spread is None or mean == 0:
        return NONE
    return f"+{(spread.max - mean) / mean * 100:.2f}%/-{(mean - spread.min) / mean * 100:.2f}%"


def _time(ns: float | None) -> str:
    """Nanoseconds as µs with three decimals, the unit Perfetto and the web app use."""
    return NONE if ns is None else f"{ns / 1e3:,.3f} µs"


# --- a fast sim against its reference --------------------------------------------------------


def _signed(x: float | None) -> str:
    return NONE if x is None else f"{x:+.3f}%"


def _how(compared: ReferenceComparison) -> str:
    how = [] if compared.split is None else [f"split {compared.split.kernels_per_chunk} a chunk, warm-up {compared.split.warmup}"]
    return ", ".join([*how, *(["reusing repeated kernels"] if compared.reuse else [])]) or "whole"


def _wall(sim: ReferenceSim) -> str:
    return f"{sim.wall_s:,.1f} s" if sim.wall_s is not None else f"{sim.state}, {sim.kernels_done} kernels so far"


def reference_text(compared: ReferenceComparison) -> list[str]:
    """The fast sim against its reference: how it was made fast, the wall times and the
    speed-up, the totals' errors and the worst kernel's, then each kernel launch."""
    t = compared.totals
    digests = {None: "not known yet", True: "the same config files", False: "DIFFERENT config files: the errors are not the fast sim's alone"}
    lines = [
        f"sim        {compared.sim_id}  {compared.gpu_config}  ({_how(compared)})",
        f"reference  {compared.reference.sim_id}  (whole, in sequence; {digests[compared.same_config]})",
        f"wall       {_wall(compared.fast)} against {_wall(compared.reference)}"
        + (f": {compared.speedup:.2f}x faster" if compared.speedup is not None else ""),
        f"cycles     {integer(t.gpu_sim_cycle)} against {integer(t.reference_gpu_sim_cycle)}: {_signed(t.cycle_error_pct)}"
        f" over {t.kernels} kernels, {t.exact} exact"
        + (f", worst {_signed(t.worst_cycle_error_pct)} (launch {t.worst_kernel_launch_uid})" if t.worst_kernel_launch_uid else ""),
        f"insts      {integer(t.gpu_sim_insn)} against {integer(t.reference_gpu_sim_insn)}: {_signed(t.insn_error_pct)}",
        "",
    ]
    header = ["launch", "kernel", "cycles", "reference", "error", "insn error", "reused from"]
    rows = [
        [str(k.kernel_launch_uid), short_name(k.kernel_name), integer(k.gpu_sim_cycle), integer(k.reference_gpu_sim_cycle),
         _signed(k.cycle_error_pct), _signed(k.insn_error_pct), NONE if k.reused_from is None else str(k.reused_from)]
        for k in compared.kernels
    ]
    return lines + table(header, rows, right=frozenset({0, 2, 3, 4, 5, 6}))
