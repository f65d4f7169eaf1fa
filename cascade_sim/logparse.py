"""A streaming parser of Accel-Sim's stdout, and the rule that turns a finished run into
success or an error message. Pure: text in, values out, no I/O.

`LogParser.feed` takes the output in chunks split anywhere (even mid-line) and returns what
the complete lines so far say; `finish` flushes the rest. It holds back at most the
incomplete last line, or one unfinished stats block (tens to hundreds of KB), never the log.

Lines outside stats blocks are found with one regex search per piece fed, anchored on line
breaks, so the option dump at the top costs next to nothing. A stats block, from
`kernel_name = ...` to `gpgpu_silicon_slowdown = ...`, is cut out with `str.find` and read
whole: a tokenizer in C (`_tokenizer.c`) cuts out its values (numbers, nan, inf, `none`)
and writes them packed, as the kernel's event carries them (`simulator.Stats`), and their
names, which depend only on the text between the values, are worked out once per kind of
block (`statnames.names`, a `Layout`) and found again for the next block printed the same
way. See bench/README.md for speed.

The naming rule, with an example of every kind of line, is docs/stats-naming.md: every
number of the block under one name built from the log's own words (`gpu_sim_cycle`,
`L1D_cache_core[1].Access`, `maximum service time to same row.dram[2][11]`,
`traffic_breakdown_coretomem[GLOBAL_ACC_R]{8}`), nan and inf as floats, and `kernel_name`
as the kernel's name.
"""

from __future__ import annotations

import math
import re
import signal as signals
from array import array
from collections.abc import Sequence

import msgspec

from cascade_core.events import PartialKernel
from cascade_core.packed_stats import StatValue
from cascade_core.sims import Outcome
from cascade_sim import _tokenizer, statnames
from cascade_sim.simulator import KernelBlock, KernelLaunched, Stats, Stopped, Totals

__all__ = [
    "Build",
    "ExitDetected",
    "KernelBlock",
    "KernelLaunched",
    "Layout",
    "LogParser",
    "Outcome",
    "Output",
    "STATS_NAMING",
    "SimError",
    "StatValue",
    "Stats",
    "Stopped",
    "Totals",
    "error_line",
    "outcome",
    "parse_stats",
]

# The naming rule of docs/stats-naming.md that `parse_stats` follows; a change to any name
# makes it a new one. Events carry it (`events.KernelFinished.stats_naming`).
STATS_NAMING = 2


class Build(msgspec.Struct, frozen=True):
    """The builds the simulator names in its first lines, e.g. accel_sim
    `accelsim-commit-73f9fac_modified_0.0_26-11-29-18-45-08`, gpgpu_sim
    `gpgpu-sim_git-commit-667834cf_modified_0.0`, gpgpu_sim_version `4.2.0`."""

    accel_sim: str | None
    gpgpu_sim: str | None
    gpgpu_sim_version: str | None


class ExitDetected(msgspec.Struct, frozen=True):
    """`GPGPU-Sim: *** exit detected ***`: the simulator ran to its normal end."""


class SimError(msgspec.Struct, frozen=True):
    """A line in which the simulator reports an error, in its own words."""

    message: str


Output = Build | KernelLaunched | KernelBlock | Totals | ExitDetected | Stopped | SimError

# GPGPU-Sim's limits (`-gpgpu_max_cycle`, `_insn`, `_cta`, `_completed_cta`; 0 is none) are
# each checked against a running count after every cycle (`gpgpu_sim::cycle_insn_cta_max_hit`):
# the counts a stats block prints (completed CTAs have none there).
_LIMIT_COUNTS = {"gpgpu_max_cycle": "gpu_tot_sim_cycle", "gpgpu_max_insn": "gpu_tot_sim_insn", "gpgpu_max_cta": "gpu_tot_issued_cta"}


# --- stats blocks -------------------------------------------------------------------------

# What the stream reads of a block besides the map: a kernel's summary and the totals.
_SUMMARY = (
    "kernel_launch_uid", "gpu_sim_cycle", "gpu_sim_insn", "gpu_ipc",
    "gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc", "gpgpu_simulation_rate (inst/sec)",
)


class Layout(msgspec.Struct, frozen=True, gc=False):
    """How the values of blocks printed alike become their map (`_tokenizer.stats`): its
    names, `kernel_name` first; for each value, its position among them (an int32), or -1
    for a value that is not stored; and the positions of `_SUMMARY`'s names (-1: absent)."""

    names: tuple[str, ...]
    slots: bytes
    summary: tuple[int, ...]

    @classmethod
    def of(cls, names: Sequence[str | None]) -> Layout:
        """The layout of a block whose values have these names (None: not stored)."""
        positions = {"kernel_name": 0}  # as in a dict, a name given again keeps its first place
        slots = array("i", [-1 if name is None else positions.setdefault(name, len(positions)) for name in names])
        return cls(tuple(positions), slots.tobytes(), tuple(positions.get(name, -1) for name in _SUMMARY))


# Layouts by skeleton. Blocks of one config and kernel look alike, so their names are worked
# out once (the costly part of a block of a kind not seen before) and found again. Bounded by
# the names held, so that a runner of many configs keeps a few dozen layouts at most.
_layouts: dict[str, Layout] = {}
_MAX_NAMES = 250_000


def parse_stats(block: str) -> dict[str, StatValue]:
    """Every value of one stats block under its name (docs/stats-naming.md). `block` runs
    from `kernel_name` to the `gpgpu_silicon_slowdown` line."""
    return _stats_at(block, 0, len(block))[1].as_dict()


def _stats_at(text: str, start: int, end: int) -> tuple[Layout, Stats]:
    """The layout and the map of the block `text[start:end]`, without copying it out of the
    text. The values are cut out and packed in C (`_tokenizer.c`); the names come from
    `statnames`."""
    eol = text.find("\n", start, end)
    head = text[start : end if eol < 0 else eol]
    kernel_name = head.removeprefix("kernel_name =").strip()
    layout, floats, texts = _tokenizer.stats(text, end if eol < 0 else eol + 1, end, kernel_name, _layout_of)
    return layout, Stats(layout.names, floats, texts)


def _layout_of(skeleton: str) -> Layout:
    layout = _layouts.get(skeleton)
    if layout is None:
        layout = Layout.of(statnames.names(skeleton))
        if sum(len(known.names) for known in _layouts.values()) + len(layout.names) > _MAX_NAMES:
            _layouts.clear()
        _layouts[skeleton] = layout
    return layout


# --- the stream ---------------------------------------------------------------------------

_BLOCK_START = "kernel_name = "
_BLOCK_END = "\ngpgpu_silicon_slowdown = "
# A block that has not ended after this much text is not one (a cut log keeps going with
# other output): give up on it rather than hold the rest of the log.
_MAX_BLOCK = 16 << 20

# Each match is one line of interest; the text before the line is never looked at in
# Python. Every line start is a "\n" because the parser's buffer starts with one.
_EVENT = re.compile(
    r"\n(?:"
    r"(?P<block>kernel_name = )"
    r"|launching kernel name: (?P<launch>.*?) uid: (?P<uid>[0-9]+)"
    r"|GPGPU-Sim Cycle (?P<cycle>[0-9]+): LIVENESS - uArch: inst\.: (?P<insn>[0-9]+) .*?sim_rate=(?P<rate>[0-9]+)"
    r"|(?P<exit>GPGPU-Sim: \*\*\* exit detected \*\*\*)"
    r"|(?P<brk>GPGPU-Sim: \*\* break due to reaching the maximum cycles)"
    r"|-(?P<limit>gpgpu_max_(?:cycle|insn|cta|completed_cta))[ \t]+(?P<limit_value>[0-9]+)"
    r"|Accel-Sim \[build (?P<accel>[^\]\n]*)\]"
    r"|[ \t]*\*\*\* GPGPU-Sim Simulator Version (?P<version>\S+) +\[build (?P<gpgpu>[^\]\n]*)\]"
    r"|(?P<error>unsupported binary version: .*|ERROR.*|GPGPU-Sim\b[^\n]*? ERROR\b.*|Could not open configuration file .*)"
    r")"
)
_ERROR = re.compile(r"unsupported binary version: |ERROR|GPGPU-Sim\b.*? ERROR\b|Could not open configuration file ")


def error_line(line: str) -> str | None:
    """`line` as an error message if the simulator reports an error with it, else None."""
    line = line.strip()
    return line if _ERROR.match(line) else None


class LogParser:
    """Feed the simulator's stdout in pieces of any size; each call returns the outputs of
    the lines it completed, in order. `exit_detected` and `error` (the first error line,
    as later ones tend to be its consequences) summarize what was seen, for `outcome`."""

    def __init__(self) -> None:
        self._buf = "\n"  # text not fully read yet, always from a "\n" on
        self._pending: list[str] = []  # pieces fed since, which complete nothing yet
        self._pending_size = 0
        self._tail = ""  # the last characters fed, to see a block's end marker span pieces
        self._block_at = -1  # offset in _buf of the "\n" before an unfinished block
        self._end_from = 0  # where to resume looking for that block's end marker
        self._end_found = False  # the marker is at _end_from, its line not complete yet
        self._accel_sim: str | None = None
        self._build_sent = False
        self._last_uid = 0
        self._last_name: str | None = None
        self._limits: dict[str, int] = {}  # the option dump's limits, by option name
        self._counts: dict[str, float] = {}  # their running counts, as a cut launch's block printed them
        self._partial: PartialKernel | None = None  # the block printed for a cut launch
        self.exit_detected = False
        self.error: str | None = None

    def feed(self, text: str) -> list[Output]:
        tail, edge = self._tail, self._tail + text[: len(_BLOCK_END) - 1]
        self._tail = text[1 - len(_BLOCK_END) :] if len(text) >= len(_BLOCK_END) - 1 else edge[1 - len(_BLOCK_END) :]
        at = len(self._buf) + self._pending_size  # where `text` goes in the buffer _drain joins
        self._pending.append(text)
        self._pending_size += len(text)
        # Joining the buffer only when the new text can complete a line or a block keeps
        # feeding linear in the text, however small the pieces.
        if self._block_at < 0 or self._end_found:
            ready = "\n" in text
        else:
            # Each text is searched once for the block's end marker (which may span the edge
            # between two texts), and _drain finds it where this search did.
            if (found := edge.find(_BLOCK_END)) >= 0:
                self._end_from = at - len(tail) + found
            elif (found := _tokenizer.find(text, _BLOCK_END, 0)) >= 0:
                self._end_from = at + found
            ready = found >= 0 or len(self._buf) - self._block_at + self._pending_size > _MAX_BLOCK
        return self._drain() if ready else []

    def finish(self) -> list[Output]:
        """The outputs of a last line without a line break; an unfinished block is dropped
        (its kernel did not finish)."""
        if self._tail and not self._tail.endswith("\n"):
            self._pending.append("\n")
        out = self._drain()
        self._buf = "\n"
        self._block_at = -1
        self._end_found = False
        self._tail = ""
        if self._accel_sim is not None and not self._build_sent:
            self._build_sent = True
            out.append(Build(self._accel_sim, None, None))
        return out

    def _drain(self) -> list[Output]:
        buf = "".join([self._buf, *self._pending])
        self._pending.clear()
        self._pending_size = 0
        out: list[Output] = []
        pos = 0  # offset of a "\n" that starts the text not yet looked at
        while True:
            if self._block_at >= 0:
                start = self._block_at
                end = _tokenizer.find(buf, _BLOCK_END, self._end_from)
                eol = buf.find("\n", end + 1) if end >= 0 else -1
                if eol < 0:
                    if len(buf) - start <= _MAX_BLOCK:
                        # Resume at the end marker, or where a cut-off one could start.
                        self._end_found = end >= 0
                        self._end_from = end if end >= 0 else max(start, len(buf) - len(_BLOCK_END) + 1)
                        keep = start
                        break
                    eol = buf.index("\n", start + 1)  # not a block: skip its first line
                else:
                    self._block(buf, start + 1, eol, out)
                pos = eol
                self._block_at = -1
                self._end_found = False
                continue
            limit = buf.rfind("\n", pos)  # lines before this "\n" are complete
            match = _EVENT.search(buf, pos, limit)
            if match is None:
                keep = limit
                break
            if match["block"] is not None:
                self._block_at = self._end_from = match.start()
                continue
            self._event(match, out)
            pos = buf.index("\n", match.end())
        self._buf = buf[keep:]
        if self._block_at >= 0:
            self._block_at -= keep
            self._end_from -= keep
        return out

    def _event(self, match: re.Match[str], out: list[Output]) -> None:
        if match["launch"] is not None:
            self._last_uid, self._last_name = int(match["uid"]), match["launch"]
            out.append(KernelLaunched(match["launch"], self._last_uid))
        elif match["cycle"] is not None:
            cycle, insn = int(match["cycle"]), int(match["insn"])
            out.append(Totals(gpu_tot_sim_cycle=cycle, gpu_tot_sim_insn=insn, gpu_tot_ipc=insn / cycle if cycle else 0.0, sim_rate_ips=int(match["rate"])))
        elif match["exit"] is not None:
            self.exit_detected = True
            out.append(ExitDetected())
        elif match["brk"] is not None:
            limit, value = reached(self._limits, self._counts)
            out.append(Stopped(limit=limit, value=value, partial=self._partial))
        elif match["limit"] is not None:
            self._limits[match["limit"]] = int(match["limit_value"])
        elif match["accel"] is not None:
            self._accel_sim = match["accel"]
        elif match["version"] is not None:
            self._build_sent = True
            out.append(Build(self._accel_sim, match["gpgpu"], match["version"]))
        else:
            message = match["error"].rstrip()
            if self.error is None:
                self.error = message
            out.append(SimError(message))

    def _block(self, buf: str, start: int, end: int, out: list[Output]) -> None:
        layout, stats = _stats_at(buf, start, end)
        uid, cycle, insn, ipc, tot_cycle, tot_insn, tot_ipc, rate = [_number(stats, at) for at in layout.summary]
        name = str(stats.at(0))
        counts = {limit: _number(stats, layout.names.index(n)) for limit, n in _LIMIT_COUNTS.items() if n in layout.names}
        # GPGPU-Sim prints the launch it stopped at a limit mid-way as a block of its own: with
        # no name when it was the first, else named like a finished one, its running count at
        # the limit either way (the break line comes after the block, too late for a reader
        # that has already taken the launch as finished).
        if not name or reached(self._limits, counts, exact=True)[0] is not None:
            self._counts = counts
            self._partial = PartialKernel(
                uid=int(uid) if uid else self._last_uid, name=self._last_name, gpu_sim_cycle=int(cycle), gpu_sim_insn=int(insn)
            )
        else:
            out.append(
                KernelBlock(
                    uid=int(uid) if layout.summary[0] >= 0 else self._last_uid,
                    name=name,
                    gpu_sim_cycle=int(cycle),
                    gpu_sim_insn=int(insn),
                    gpu_ipc=ipc,
                    stats=stats,
                )
            )
        out.append(Totals(gpu_tot_sim_cycle=int(tot_cycle), gpu_tot_sim_insn=int(tot_insn), gpu_tot_ipc=tot_ipc, sim_rate_ips=int(rate)))


def reached(limits: dict[str, int], counts: dict[str, float], exact: bool = False) -> tuple[str | None, int | None]:
    """The limit GPGPU-Sim stopped at, as an option and its value: of those set, the first
    whose running count reached it, else (not `exact`) the only one set; (None, None) when
    neither tells."""
    given = {name: value for name, value in limits.items() if value > 0}
    hit = [name for name, value in given.items() if counts.get(name, -1.0) >= value]
    if not hit and len(given) == 1 and not exact:
        hit = list(given)
    return (f"-{hit[0]}", given[hit[0]]) if hit else (None, None)


def _number(stats: Stats, position: int) -> float:
    # A missing, non-numeric or non-finite stat reads as 0 rather than failing the whole
    # run's parse (the summary fields are plain numbers).
    value = stats.at(position) if position >= 0 else None
    return value if isinstance(value, float) and math.isfinite(value) else 0.0


# --- the outcome --------------------------------------------------------------------------

_MISSING_FILE = ": No such file or directory"
_EXIT_LINE = "GPGPU-Sim: *** exit detected ***"


def outcome(
    exit_code: int | None,
    signal: int | None,
    exit_detected: bool,
    error: str | None,
    stderr_tail: Sequence[str],
) -> Outcome:
    """Succeeded only on exit code 0 with the exit line printed: the simulator exits 0 in
    several failure cases. Otherwise the error is the simulator's own (from stdout, as
    `LogParser.error`, else from stderr), with any missing-file message from stderr in
    parentheses since it names the cause (`unsupported binary version: 0` is what a
    missing kernel file looks like on stdout)."""
    if signal is not None:
        code = 128 + signal
    elif exit_code is not None:
        code = exit_code
    else:
        raise ValueError("outcome needs an exit code or a signal")
    if signal is None and code == 0 and exit_detected:
        return Outcome(True, 0, None)
    lines = [line.strip() for line in stderr_tail if line.strip()]
    missing = [line for line in lines if line.endswith(_MISSING_FILE)]
    if error is None:
        error = next((e for e in map(error_line, lines) if e is not None), None)
    if error is None and missing:
        return Outcome(False, code, "; ".join(missing))
    if error is not None:
        return Outcome(False, code, f"{error} ({'; '.join(missing)})" if missing else error)
    # stderr's last line names the cause, as a failed assertion does before its SIGABRT.
    last = f": {lines[-1]}" if lines else ""
    if signal is not None:
        return Outcome(False, code, f"killed by signal {signal} ({_signal_name(signal)}){last}")
    if code == 0:
        return Outcome(False, code, f"simulator exited 0 without printing '{_EXIT_LINE}'")
    return Outcome(False, code, f"simulator exited with code {code}{last}")


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return "unknown signal"
