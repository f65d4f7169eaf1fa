"""A streaming parser of Accel-Sim's stdout, and the rule that turns a finished run into
success or an error message. Pure: text in, values out, no I/O.

`LogParser.feed` takes the output in chunks split anywhere (even mid-line) and returns what
the complete lines so far say; `finish` flushes the rest. It holds back at most the
incomplete last line, or one unfinished stats block (tens to hundreds of KB), never the log.

Lines outside stats blocks are found with one regex search per chunk, anchored on line
breaks, so the option dump at the top costs next to nothing. A stats block, from
`kernel_name = ...` to `gpgpu_silicon_slowdown = ...`, is cut out with `str.find` and read
whole by `parse_stats`, which leaves the per-pair work to C (`re.split`, `map`,
`dict(zip(...))`): the names of a kind of block (same config, same lines) are worked out in
Python once and found again by the text between the values. See bench/README.md for speed.

Stats grammar (the simulator prints `k = v`, `k=v k=v ...`, `x: k = v, k = v`, tabs, units):

* Every `=` that is not next to another `=` (banners like `===== L2 cache stats =====` are
  text) separates a name from a value.
* The value is the first run of characters after it, past spaces and tabs, holding no
  (ASCII) whitespace, `,` or `=`: `10516 (inst/sec)` gives `10516`, `CL=16,` gives `16`.
* The name is the text before it back to the nearest line break, `,`, `: ` or the end of
  the previous value, stripped: `L1D_cache_core[3]: Access = 0, Miss = 0` gives `Access`
  and `Miss`, `mrqq: max=0 avg=0` gives `max` and `avg`.
* A value that starts with a finite number is that number as a float (`256053x`, `0!`,
  `6.2500%`, `0.3196 GB/Sec` all count); any other value is kept as text (`-nan%`, `nan`,
  names, and the empty value of a cut kernel's `kernel_name`). Known loss: `gpgpu_simulation_time
  = 0 days, 0 hrs, 0 min, 1 sec (1 sec)` is 0.0, its days.
* A `=` with an empty name continues the previous pair, whose value becomes the one after
  it, and `chip skew: a/b = r` reads as `chip skew = a/b = r`. So the ratio lines
  `average row locality = 26/7 = 3.714286` and `chip skew: 61/4 = 15.25` give 3.714286 and
  15.25 under their names, which keeps names the same from kernel to kernel.
* A name repeating inside one block is stored as `name`, `name#2`, `name#3`, ... in order of
  appearance (per-DRAM-channel and per-cache lines), so nothing is dropped.
* `kernel_name` is always the kernel's name as text.
"""

from __future__ import annotations

import re
import signal as signals
from collections.abc import Callable, Sequence
from itertools import compress, count, repeat
from operator import contains, itemgetter

import msgspec

__all__ = [
    "BreakMaxCycles",
    "Build",
    "ExitDetected",
    "KernelBlock",
    "KernelLaunched",
    "LogParser",
    "Outcome",
    "Output",
    "SimError",
    "Totals",
    "error_line",
    "outcome",
    "parse_stats",
]

StatValue = float | str


class Build(msgspec.Struct, frozen=True):
    """The builds the simulator names in its first lines, e.g. accel_sim
    `accelsim-commit-73f9fac_modified_0.0_26-11-29-18-45-08`, gpgpu_sim
    `gpgpu-sim_git-commit-667834cf_modified_0.0`, gpgpu_sim_version `4.2.0`."""

    accel_sim: str | None
    gpgpu_sim: str | None
    gpgpu_sim_version: str | None


class KernelLaunched(msgspec.Struct, frozen=True):
    """`launching kernel name: <name> uid: <uid> ...`: the kernel starts simulating."""

    name: str
    uid: int


class KernelBlock(msgspec.Struct, frozen=True):
    """A finished kernel's stats block; `stats` holds every pair of the block (see the module doc)."""

    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    stats: dict[str, StatValue]


class Totals(msgspec.Struct, frozen=True):
    """The latest cumulative metrics, from a stats block or a LIVENESS progress line.
    `sim_rate_ips` is the simulator's own instructions per wall-clock second."""

    gpu_tot_sim_cycle: int
    gpu_tot_sim_insn: int
    gpu_tot_ipc: float
    sim_rate_ips: int


class ExitDetected(msgspec.Struct, frozen=True):
    """`GPGPU-Sim: *** exit detected ***`: the simulator ran to its normal end."""


class BreakMaxCycles(msgspec.Struct, frozen=True):
    """`GPGPU-Sim: ** break due to reaching the maximum cycles (or instructions) **`: the
    simulation was cut; the kernel running then gets no `KernelBlock`."""


class SimError(msgspec.Struct, frozen=True):
    """A line in which the simulator reports an error, in its own words."""

    message: str


Output = Build | KernelLaunched | KernelBlock | Totals | ExitDetected | BreakMaxCycles | SimError


class Outcome(msgspec.Struct, frozen=True):
    """How a run ended: `exit_code` is shell-style (128 + N when killed by signal N)."""

    succeeded: bool
    exit_code: int
    error: str | None


# --- stats blocks -------------------------------------------------------------------------

# One match per "=" that separates a pair, its value in group 1, and the rest of the value's
# line when that holds no other "=": so `split` leaves between values mostly just the next
# name. Starting on the literal "=" lets the regex engine skip everything else at C speed;
# the spelled-out class and "(...|)" instead of "\s" and "(...)?" run about 15% faster.
_PAIR = re.compile(r"=(?<!==)(?!=)[ \t]*([^ \t\n\r\f\v,=]*)(?:[^=\n]*\n|)")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")

# How to turn one block's value list into its names: the names in order, and which values
# they take when continuation pairs fold (None: all of them, in order).
_Layout = tuple[tuple[str, ...], Callable[[list[StatValue]], Sequence[StatValue]] | None]

# Blocks of one config and kernel look alike, so their layout is worked out once and found
# again by the text of the names between their values. Bounded: a layout is a few KB.
_layouts: dict[str, _Layout] = {}
_MAX_LAYOUTS = 64


def parse_stats(block: str) -> dict[str, StatValue]:
    """Every pair of one stats block, by the grammar in the module doc. `block` runs from
    `kernel_name` to the `gpgpu_silicon_slowdown` line."""
    # The one ratio line printed with ":"; its numbers must not end up in a name.
    parts = _PAIR.split(block.replace("chip skew: ", "chip skew = "))
    values = parts[1::2]
    del parts[1::2]
    gaps = parts  # gaps[i] leads up to values[i]; the last one trails the block
    # Lines without "=" sit in a gap before the next name; only that name's line counts.
    for i in compress(count(), map(contains, gaps, repeat("\n"))):
        gap = gaps[i]
        gaps[i] = gap[gap.rfind("\n") + 1 :]
    fingerprint = "\n".join(gaps)  # gaps hold no "\n" now, so this is unambiguous
    layout = _layouts.get(fingerprint)
    if layout is None:
        if len(_layouts) >= _MAX_LAYOUTS:
            _layouts.clear()
        layout = _layouts[fingerprint] = _layout(gaps[:-1])
    names, pick = layout
    # Converting each distinct value once: most are "0", "-nan", "0.000000" and the like.
    converted = {v: _value(v) for v in set(values)}
    vals: Sequence[StatValue] = list(map(converted.__getitem__, values))
    if pick is not None:
        vals = pick(vals)
    return dict(zip(names, vals))


def _layout(gaps: list[str]) -> _Layout:
    names: list[str] = []
    taken: list[int] = []
    seen: dict[str, int] = {}
    for i, gap in enumerate(gaps):
        name = gap.rpartition(",")[2].rpartition(": ")[2].strip()
        if not name:
            if taken:
                taken[-1] = i
            continue
        n = seen[name] = seen.get(name, 0) + 1
        names.append(name if n == 1 else f"{name}#{n}")
        taken.append(i)
    if taken == list(range(len(gaps))):
        return tuple(names), None
    if len(taken) > 1:
        return tuple(names), itemgetter(*taken)
    # itemgetter of one index returns the item, not a sequence.
    return tuple(names), lambda vals: [vals[i] for i in taken]


def _value(text: str) -> StatValue:
    # float() takes most values as they are; "_" is the one thing it reads that is not a
    # number here (1_000), and it also reads nan and inf, which stay text.
    if "_" not in text:
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return number if number - number == 0 else text
    match = _NUMBER.match(text)
    if match is None:
        return text
    number = float(match[0])
    return number if number - number == 0 else text


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
    """Feed the simulator's stdout in chunks of any size; each call returns the outputs of
    the lines it completed, in order. `exit_detected` and `error` (the first error line,
    as later ones tend to be its consequences) summarize what was seen, for `outcome`."""

    def __init__(self) -> None:
        self._buf = "\n"  # text not fully read yet, always from a "\n" on
        self._pending: list[str] = []  # chunks fed since, which complete nothing yet
        self._pending_size = 0
        self._tail = ""  # the last characters fed, to see a block's end marker span chunks
        self._block_at = -1  # offset in _buf of the "\n" before an unfinished block
        self._end_from = 0  # where to resume looking for that block's end marker
        self._end_found = False  # the marker is at _end_from, its line not complete yet
        self._accel_sim: str | None = None
        self._build_sent = False
        self._last_uid = 0
        self.exit_detected = False
        self.error: str | None = None

    def feed(self, text: str) -> list[Output]:
        tail = self._tail + text
        self._tail = tail[1 - len(_BLOCK_END) :]
        self._pending.append(text)
        self._pending_size += len(text)
        # Joining the buffer only when the new text can complete a line or a block keeps
        # feeding linear in the text, however small the chunks.
        if self._block_at < 0 or self._end_found:
            ready = "\n" in text
        else:
            ready = _BLOCK_END in tail or len(self._buf) - self._block_at + self._pending_size > _MAX_BLOCK
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
                end = buf.find(_BLOCK_END, self._end_from)
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
                    self._block(buf[start + 1 : eol], out)
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
            self._last_uid = int(match["uid"])
            out.append(KernelLaunched(match["launch"], self._last_uid))
        elif match["cycle"] is not None:
            cycle, insn = int(match["cycle"]), int(match["insn"])
            out.append(Totals(cycle, insn, insn / cycle if cycle else 0.0, int(match["rate"])))
        elif match["exit"] is not None:
            self.exit_detected = True
            out.append(ExitDetected())
        elif match["brk"] is not None:
            out.append(BreakMaxCycles())
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

    def _block(self, block: str, out: list[Output]) -> None:
        stats = parse_stats(block)
        name = block[len(_BLOCK_START) : block.find("\n")].strip()
        if name:
            stats["kernel_name"] = name
            uid = stats.get("kernel_launch_uid")
            out.append(
                KernelBlock(
                    uid=int(uid) if isinstance(uid, float) else self._last_uid,
                    name=name,
                    gpu_sim_cycle=int(_number(stats, "gpu_sim_cycle")),
                    gpu_sim_insn=int(_number(stats, "gpu_sim_insn")),
                    gpu_ipc=_number(stats, "gpu_ipc"),
                    stats=stats,
                )
            )
        out.append(
            Totals(
                gpu_tot_sim_cycle=int(_number(stats, "gpu_tot_sim_cycle")),
                gpu_tot_sim_insn=int(_number(stats, "gpu_tot_sim_insn")),
                gpu_tot_ipc=_number(stats, "gpu_tot_ipc"),
                sim_rate_ips=int(_number(stats, "gpgpu_simulation_rate")),
            )
        )


def _number(stats: dict[str, StatValue], key: str) -> float:
    # A missing or non-numeric stat reads as 0 rather than failing the whole run's parse.
    value = stats.get(key)
    return value if isinstance(value, float) else 0.0


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
    if signal is not None:
        return Outcome(False, code, f"killed by signal {signal} ({_signal_name(signal)})")
    if code == 0:
        return Outcome(False, code, f"simulator exited 0 without printing '{_EXIT_LINE}'")
    last = f": {lines[-1]}" if lines else ""
    return Outcome(False, code, f"simulator exited with code {code}{last}")


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return "unknown signal"
