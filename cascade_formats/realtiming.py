"""Real kernel timing: `real_timing.csv` in an upload, or a file attached to a ready trace
(`PUT /api/traces/{id}/real-timing`), in one of three CSV layouts told apart by the header.

- Cascade's own, `kernel_id,kernel_name,duration_ns`: a row per kernel launch, in kernel_id
  order (the ids only order the rows).
- Nsight Compute's `ncu --csv`. Its default page has a row per launch and metric
  (`"ID",...,"Kernel Name",...,"Metric Name","Metric Unit","Metric Value"`); `--page raw`
  has a row per launch, a column per metric, and a row of units under the header. Two
  metrics are read: `gpu__time_duration.sum` (the launch's duration) and
  `gpc__cycles_elapsed.avg` (its GPU cycles, what Accel-Sim's hardware runs collect:
  util/hw_stats/run_hw.py). IDs order the launches; values may carry thousands separators.
  The hardware counters of `cascade_core.counters` (warp instructions, L1D, L2 and DRAM
  sectors, occupancy) are read too where the file has them: a counter must then be there
  for every launch, in a unit it can be converted from, as the times must.
- Nsight Systems' `nsys stats --report cuda_gpu_trace --format csv`: a row per GPU activity
  (`Start (ns),Duration (ns),CorrId,...,Name`); memory copies and sets (`[CUDA memcpy
  HtoD]`, `[CUDA memset]`) are left out and the kernels ordered by CorrId, which counts the
  CUDA calls in the order the program made them.

What the profilers print before their table (`==PROF== ...`, `Processing [...] with
[...]...`) is skipped, and so are ncu's `==...==` lines anywhere. The header seen again
starts another pass over the program: passes concatenated (`cat pass-*.csv`) are hardware
repetitions of every launch, as Accel-Sim's `run_hw.py -R` makes them, and the comparison
shows their mean and spread. A pass holds the trace's launches in launch order, from the
first (all of them, or the first N), and each launch's name must be its kernel's (`line_up`).

Every error is a `TraceError` naming the file and line and saying what is wrong.
"""

from __future__ import annotations

import _csv
import csv
import io
import math
import re
from collections.abc import Iterator, Sequence

import msgspec

from cascade_core.counters import Counter, by_metric
from cascade_core.events import Measure, RealTiming, TimingFormat, TraceKernel
from cascade_core.traces import TimingFile
from cascade_formats.kernel_names import short_name
from cascade_formats.tracefiles import TraceError, text_of

__all__ = ["MAX_BYTES", "Launch", "Measure", "Timing", "TimingFormat", "line_up", "parse_timing", "same_kernel", "timing_file"]

# The most of a timing file that is read, in an upload or attached: ncu's default page for
# 100,000 launches and a handful of metrics stays well under it.
MAX_BYTES = 64 << 20

CASCADE_COLUMNS = ["kernel_id", "kernel_name", "duration_ns"]
NCU_TIME = "gpu__time_duration.sum"
NCU_CYCLES = "gpc__cycles_elapsed.avg"
NCU_METRICS: dict[str, Measure] = {NCU_TIME: "duration_ns", NCU_CYCLES: "cycles"}
# ncu prints a metric in the unit that reads best unless told `--print-units base`.
_UNITS: dict[Measure, dict[str, float]] = {
    "duration_ns": {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9},
    "cycles": {"cycle": 1, "Kcycle": 1e3, "Mcycle": 1e6, "Gcycle": 1e9},
}
_BASE_UNIT: dict[Measure, str] = {"duration_ns": "nsecond", "cycles": "cycle"}
NCU_COUNTERS: dict[str, Counter] = by_metric()
# A count ncu may print with a prefix, as it does cycles; a percentage as it is.
_PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
NSYS_DURATION = "Duration (ns)"
_DECIMAL = re.compile(r"[0-9]+")


class Launch(msgspec.Struct, frozen=True, kw_only=True):
    """One kernel launch as a pass of the file shows it; `line` is where it first appears."""

    line: int
    name: str
    duration_ns: float | None = None
    cycles: float | None = None
    counters: dict[str, float] | None = None  # by ncu's metric name


class Timing(msgspec.Struct, frozen=True):
    format: TimingFormat
    passes: list[list[Launch]]  # each a pass over the program, its launches in launch order
    measures: list[Measure]  # what every launch has, in `Measure` order


# --- reading a file ---------------------------------------------------------------------------


def parse_timing(text: str, source: str) -> Timing:
    """The launches of a timing file, pass by pass; `source` names the file in errors."""
    # Spreadsheet tools save CSV with a byte order mark; it is not part of the header.
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""), strict=True)
    records = _records(reader, source)
    first: tuple[int, list[str]] | None = None
    for line, row in records:
        layout = _layout(row, line, source)
        if layout is not None:
            break
        first = first or (line, row)
    else:
        if first is None:
            raise TraceError(f"{source} is empty; its first line must be {','.join(CASCADE_COLUMNS)}")
        raise TraceError(
            f"{source} has no header of a known layout (line {first[0]} is {_shown(first[1])}): expected "
            f"{','.join(CASCADE_COLUMNS)}, Nsight Compute's CSV (ncu --csv, with {NCU_TIME} or {NCU_CYCLES}) "
            "or Nsight Systems' (nsys stats --report cuda_gpu_trace --format csv)"
        )
    header, header_line = row, line
    passes = [layout]
    for line, row in records:
        if layout.message(row):
            continue
        other = _layout(row, line, source)
        if other is None:
            passes[-1].add(row, line)
        elif row == header:
            passes.append(other)
        else:
            raise TraceError(f"{source} line {line}: a header unlike the one on line {header_line}; every pass must be in one layout")
    done = [p.launches() for p in passes]
    measures = _measures(done, source)
    _counted(done, source)
    return Timing(layout.format, done, measures)


def _records(reader: _csv.Reader, source: str) -> Iterator[tuple[int, list[str]]]:
    """Each row that is not blank, with the line it ends on."""
    try:
        for row in reader:
            if row and any(field.strip() for field in row):
                yield reader.line_num, row
    except csv.Error as error:
        raise TraceError(f"{source} line {reader.line_num}: {error}") from None


def _shown(row: Sequence[str]) -> str:
    text = ",".join(row)
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _measures(passes: list[list[Launch]], source: str) -> list[Measure]:
    """The measures every launch has: a launch without one the others have is an error."""
    launches = [launch for p in passes for launch in p]
    measures: list[Measure] = [m for m in ("duration_ns", "cycles") if any(getattr(x, m) is not None for x in launches)]
    if launches and not measures:
        raise TraceError(f"{source}: no launch has a {NCU_TIME} or {NCU_CYCLES} value; profile with --metrics {NCU_TIME},{NCU_CYCLES}")
    for launch in launches:
        for measure in measures:
            if getattr(launch, measure) is None:
                raise TraceError(f"{source} line {launch.line}: {launch.name[:200]!r} has no {_label(measure)}, which other launches have")
    return measures


def _counted(passes: list[list[Launch]], source: str) -> None:
    """Every launch has the counters any launch has: a counter measured for only some
    launches would be scored over those alone, unlike every other, so it is refused."""
    launches = [launch for p in passes for launch in p]
    metrics = {m: launch for launch in launches for m in launch.counters or {}}
    for launch in launches:
        missing = [m for m in metrics if m not in (launch.counters or {})]
        if missing:
            first = metrics[missing[0]]
            raise TraceError(
                f"{source} line {launch.line}: {launch.name[:200]!r} has no {missing[0]}, which the launch on line {first.line} has; "
                "profile every launch with the same metrics"
            )


def _label(measure: Measure) -> str:
    return "duration" if measure == "duration_ns" else "cycle count"


class _Pass:
    """One pass over the program in one layout: rows in, launches out in launch order."""

    format: TimingFormat

    def __init__(self, header: list[str], line: int, source: str) -> None:
        self.header = header
        self.header_line = line
        self.source = source

    def where(self, line: int) -> str:
        return f"{self.source} line {line}"

    def message(self, row: list[str]) -> bool:
        """Whether the row is a profiler's message between or after its tables (`==PROF==
        Disconnected ...`, `NOTICE: ...`): a line of one field, where tables have many."""
        return len(row) == 1 or row[0].startswith("==")

    def fields(self, row: list[str], line: int) -> None:
        if len(row) != len(self.header):
            raise TraceError(f"{self.where(line)}: {len(row)} fields, where the header on line {self.header_line} has {len(self.header)}")

    def add(self, row: list[str], line: int) -> None:
        raise NotImplementedError

    def launches(self) -> list[Launch]:
        raise NotImplementedError


def _layout(row: list[str], line: int, source: str) -> _Pass | None:
    columns = [c.strip() for c in row]
    if columns == CASCADE_COLUMNS:
        return _CascadePass(row, line, source)
    if columns[0] == "ID" and "Kernel Name" in columns:
        if "Metric Name" in columns and "Metric Value" in columns:
            return _NcuMetricsPass(row, line, source)
        return _NcuRawPass(row, line, source)
    if NSYS_DURATION in columns and "Name" in columns:
        return _NsysPass(row, line, source)
    return None


def _number(value: str, what: str, where: str) -> float:
    """A non-negative finite number; ncu groups thousands with commas."""
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise TraceError(f"{where}: {what} {value!r} is not a non-negative number")
    return number


def _whole(value: str, what: str, where: str) -> int:
    if not _DECIMAL.fullmatch(value.strip()):
        raise TraceError(f"{where}: {what} {value!r} is not a non-negative whole number")
    return int(value)


def _scale(measure: Measure, unit: str, where: str) -> float:
    scale = _UNITS[measure].get(unit.strip())
    if scale is None:
        known = ", ".join(_UNITS[measure])
        raise TraceError(f"{where}: unit {unit!r} of {_label(measure)}s is not one of {known}")
    return scale


def _counter_scale(counter: Counter, unit: str, where: str) -> float:
    unit = unit.strip()
    prefixes = _PREFIXES if counter.unit != "%" else {"": 1.0}
    scale = next((s for p, s in prefixes.items() if unit == p + counter.unit), None)
    if scale is None:
        known = ", ".join(p + counter.unit for p in prefixes)
        raise TraceError(f"{where}: unit {unit!r} of {counter.metric} is not one of {known}")
    return scale


class _CascadePass(_Pass):
    format = "cascade"

    def __init__(self, header: list[str], line: int, source: str) -> None:
        super().__init__(header, line, source)
        self.rows: list[tuple[int, Launch]] = []
        self.first_line: dict[int, int] = {}

    def add(self, row: list[str], line: int) -> None:
        where = self.where(line)
        if len(row) != 3:
            raise TraceError(f"{where}: expected 3 fields ({','.join(CASCADE_COLUMNS)}), found {len(row)}")
        kernel_id = _whole(row[0], "kernel_id", where)
        if kernel_id in self.first_line:
            raise TraceError(f"{where}: kernel_id {kernel_id} already appears on line {self.first_line[kernel_id]}")
        self.first_line[kernel_id] = line
        self.rows.append((kernel_id, Launch(line=line, name=row[1], duration_ns=_number(row[2], "duration_ns", where))))

    def message(self, row: list[str]) -> bool:
        return False  # written by a person or a script: every line counts

    def launches(self) -> list[Launch]:
        return [launch for _, launch in sorted(self.rows, key=lambda r: r[0])]


class _ById(_Pass):
    """ncu's layouts: launches by their ID, each gathered from its rows."""

    format = "ncu"

    def __init__(self, header: list[str], line: int, source: str) -> None:
        super().__init__(header, line, source)
        columns = [c.strip() for c in header]
        self.column = columns.index
        self.id_at, self.name_at = self.column("ID"), self.column("Kernel Name")
        self.found: dict[int, dict[str, object]] = {}

    def launch(self, row: list[str], line: int) -> dict[str, object]:
        """The launch the row belongs to, as gathered so far."""
        self.fields(row, line)
        where = self.where(line)
        launch_id = _whole(row[self.id_at], "ID", where)
        name = row[self.name_at]
        launch = self.found.setdefault(launch_id, {"line": line, "name": name})
        if launch["name"] != name:
            raise TraceError(f"{where}: ID {launch_id} is {name[:200]!r} here but {str(launch['name'])[:200]!r} on line {launch['line']}")
        return launch

    def measured(self, launch: dict[str, object], measure: Measure, value: float, line: int) -> None:
        if measure in launch:
            raise TraceError(f"{self.where(line)}: a second {_label(measure)} of the launch on line {launch['line']}")
        launch[measure] = value

    def counted(self, launch: dict[str, object], metric: str, value: float, line: int) -> None:
        counters = launch.setdefault("counters", {})
        assert isinstance(counters, dict)
        if metric in counters:
            raise TraceError(f"{self.where(line)}: a second {metric} of the launch on line {launch['line']}")
        counters[metric] = value

    def launches(self) -> list[Launch]:
        return [msgspec.convert(self.found[i], Launch) for i in sorted(self.found)]


class _NcuMetricsPass(_ById):
    def __init__(self, header: list[str], line: int, source: str) -> None:
        super().__init__(header, line, source)
        self.metric_at, self.unit_at, self.value_at = (self.column(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))

    def add(self, row: list[str], line: int) -> None:
        launch = self.launch(row, line)
        metric = row[self.metric_at].strip()
        measure, counter = NCU_METRICS.get(metric), NCU_COUNTERS.get(metric)
        if measure is None and counter is None:
            return  # another metric, or a device attribute: neither a time nor a counter
        where = self.where(line)
        value = _number(row[self.value_at], metric, where)
        if measure is not None:
            self.measured(launch, measure, value * _scale(measure, row[self.unit_at], where), line)
        elif counter is not None:
            self.counted(launch, metric, value * _counter_scale(counter, row[self.unit_at], where), line)


class _NcuRawPass(_ById):
    def __init__(self, header: list[str], line: int, source: str) -> None:
        super().__init__(header, line, source)
        columns = [c.strip() for c in header]
        self.metrics = {columns.index(m): (m, measure) for m, measure in NCU_METRICS.items() if m in columns}
        if not self.metrics:
            raise TraceError(
                f"{self.where(line)}: Nsight Compute's raw page without a {NCU_TIME} or {NCU_CYCLES} column; "
                f"profile with --metrics {NCU_TIME},{NCU_CYCLES}"
            )
        self.counters = {columns.index(m): counter for m, counter in NCU_COUNTERS.items() if m in columns}
        self.units: dict[int, float] | None = None

    def add(self, row: list[str], line: int) -> None:
        where = self.where(line)
        if self.units is None:
            units = not row[self.id_at].strip()  # the row of units under the header, if there is one
            if units:
                self.fields(row, line)
            self.units = {
                at: _scale(measure, (row[at] if units else "") or _BASE_UNIT[measure], where) for at, (_, measure) in self.metrics.items()
            }
            self.units |= {at: _counter_scale(counter, row[at] if units else counter.unit, where) for at, counter in self.counters.items()}
            if units:
                return
        launch = self.launch(row, line)
        for at, (metric, measure) in self.metrics.items():
            self.measured(launch, measure, _number(row[at], metric, where) * self.units[at], line)
        for at, counter in self.counters.items():
            self.counted(launch, counter.metric, _number(row[at], counter.metric, where) * self.units[at], line)


class _NsysPass(_Pass):
    format = "nsys"

    def __init__(self, header: list[str], line: int, source: str) -> None:
        super().__init__(header, line, source)
        columns = [c.strip() for c in header]
        self.duration_at, self.name_at = columns.index(NSYS_DURATION), columns.index("Name")
        # CorrId orders the launches as the program made them; without it, the start times.
        self.order_at = next((columns.index(c) for c in ("CorrId", "Start (ns)") if c in columns), None)
        self.order_name = columns[self.order_at] if self.order_at is not None else ""
        self.rows: list[tuple[float, Launch]] = []

    def add(self, row: list[str], line: int) -> None:
        self.fields(row, line)
        name = row[self.name_at]
        if name.startswith("[CUDA "):
            return  # a memory copy or set, not a kernel
        where = self.where(line)
        order = _number(row[self.order_at], self.order_name, where) if self.order_at is not None else float(len(self.rows))
        self.rows.append((order, Launch(line=line, name=name, duration_ns=_number(row[self.duration_at], NSYS_DURATION, where))))

    def launches(self) -> list[Launch]:
        return [launch for _, launch in sorted(self.rows, key=lambda r: r[0])]


# --- lining a file up with the trace ------------------------------------------------------------


def line_up(timing: Timing, kernels: Sequence[TraceKernel], source: str) -> list[RealTiming]:
    """The rows to store: launch i of every pass is the trace's kernel i (its `kernel_id` the
    kernel's uid, `repeat` the pass). A pass may stop short of the trace's end (a profile cut
    with `ncu --launch-count`): the kernels past it have no real value there, as
    plot-correlation.py lines a trace's first kernels up with the hardware's. Refused: a pass
    with more launches than the trace, or none, and a launch whose name is not its kernel's.
    No launch at all is no timing."""
    if not any(timing.passes):
        return []
    rows: list[RealTiming] = []
    for repeat, launches in enumerate(timing.passes):
        if not launches or len(launches) > len(kernels):
            start = f"the pass from line {launches[0].line}" if launches else f"pass {repeat + 1}"
            passes = f" ({len(timing.passes)} passes)" if len(timing.passes) > 1 else ""
            raise TraceError(
                f"{source}: {start}{passes} has {len(launches)} kernel launches, the trace {len(kernels)}; "
                "profile the program and input the trace was made of, and keep the launches it traced"
            )
        for launch, kernel in zip(launches, kernels):
            if not same_kernel(launch.name, kernel.name):
                raise TraceError(
                    f"{source} line {launch.line}: launch {kernel.uid} is {launch.name[:200]!r}, "
                    f"but the trace's kernel {kernel.uid} is {kernel.name[:200]!r} ({short_name(kernel.name)}); "
                    "a pass holds the trace's launches in order, from its first"
                )
            rows.append(
                RealTiming(
                    kernel_id=kernel.uid, kernel_name=launch.name, duration_ns=launch.duration_ns, repeat=repeat, cycles=launch.cycles,
                    counters=launch.counters,
                )
            )
    return rows


TIMING_FILE = "the timing file"  # how errors name an attached file, which comes without a name


def timing_file(body: bytes, kernels: Sequence[TraceKernel]) -> TimingFile | str:
    """A timing file attached to a ready trace, lined up with its `kernels`, for
    `traces.decide_real_timing`; or what is wrong with it: no timing, no launch, launches
    that are not the trace's."""
    try:
        timing = parse_timing(text_of(body, TIMING_FILE), TIMING_FILE)
        rows = line_up(timing, kernels, TIMING_FILE)
    except TraceError as error:
        return str(error)
    if not rows:
        return f"{TIMING_FILE} holds no kernel launches"
    return TimingFile(
        rows=rows,
        format=timing.format,
        kernels=max(len(launches) for launches in timing.passes),
        repeats=len(timing.passes),
        measures=list(timing.measures),
        counters=sorted({metric for row in rows for metric in row.counters or {}}),
    )


def same_kernel(profiled: str, traced: str) -> bool:
    """Whether a profiler's name for a launch is the traced kernel's: the same symbol (as
    `--print-kernel-base mangled` prints it), or the same function name once demangled
    (`vecAdd`, `vecAdd(float *, int)`, `void ns::vecAdd<float>(float *, int)`)."""
    return profiled.strip() == traced or _function(profiled) == short_name(traced)


def _function(demangled: str) -> str:
    """The innermost function name of a demangled signature: its parameter list and template
    arguments cut off, and whatever qualifies it or comes before it (a return type)."""
    name = demangled.strip()
    for opening, closing in (("(", ")"), ("<", ">")):
        if name.endswith(closing):
            name = name[: _opening(name, opening, closing)].rstrip()
    return re.split(r"::|\s", name)[-1] if name else name


def _opening(text: str, opening: str, closing: str) -> int:
    """Where the bracket that closes `text` opens (0 if it never does)."""
    depth = 0
    for at in range(len(text) - 1, -1, -1):
        depth += {closing: 1, opening: -1}.get(text[at], 0)
        if depth == 0:
            return at
    return 0

