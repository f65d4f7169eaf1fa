"""The seam between the runner and a simulator: what a backend does, and what the runner
reads from it. The runner knows nothing else of a simulator: not its command line, its
working directory, its log's grammar or what counts as success.

A backend (`Simulator`) lists the GPU configs it can simulate, fills a sim's fresh working
directory, gives the command to start it with, and reads its output (`OutputReader`): the
stdout as it is printed, into kernel results and progress, and at the end the outcome.
Accel-Sim is one (`cascade_sim/install.py`).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from cascade_core.events import PartialKernel
from cascade_core.gpu_configs import GpuConfig
from cascade_core.packed_stats import StatValue
from cascade_core.sims import Outcome
from cascade_core.split import Launches

_FLOAT64 = struct.Struct("d")


class Stats(msgspec.Struct, frozen=True, gc=False):
    """A kernel's stats map, packed as its event carries it (`cascade_core/packed_stats.py`):
    its names (blocks printed alike share one tuple), a float64 per name in the machine's
    byte order, and by position the values that are text (a nan in the floats there). A map
    of 9,000 values is so three objects, not 9,000 floats in a dict."""

    names: tuple[str, ...]
    floats: bytes
    texts: dict[int, str]

    def at(self, position: int) -> StatValue:
        """The value of the name at `position`."""
        text = self.texts.get(position)
        return text if text is not None else float(_FLOAT64.unpack_from(self.floats, position * _FLOAT64.size)[0])

    def get(self, name: str) -> StatValue | None:
        return self.at(self.names.index(name)) if name in self.names else None

    def as_dict(self) -> dict[str, StatValue]:
        values: list[StatValue] = list(array("d", self.floats))
        for position, text in self.texts.items():
            values[position] = text
        return dict(zip(self.names, values))

    def with_value(self, name: str, value: float) -> Stats:
        """The map with `name` set to `value`, last if it is new (as `{**map, name: value}`)."""
        if name not in self.names:
            return Stats((*self.names, name), self.floats + _FLOAT64.pack(value), self.texts)
        position = self.names.index(name)
        floats = bytearray(self.floats)
        _FLOAT64.pack_into(floats, position * _FLOAT64.size, value)
        return Stats(self.names, bytes(floats), {i: t for i, t in self.texts.items() if i != position})


NO_STATS = Stats((), b"", {})


# --- what output says ---------------------------------------------------------------------


class KernelLaunched(msgspec.Struct, frozen=True):
    """A kernel starts simulating."""

    name: str
    uid: int


class KernelBlock(msgspec.Struct, frozen=True, kw_only=True):
    """A kernel's result, as its stats block gives it; `stats` holds every value of the block
    under its name (for Accel-Sim, docs/stats-naming.md)."""

    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    stats: Stats


class Totals(msgspec.Struct, frozen=True, kw_only=True):
    """The latest cumulative metrics. `sim_rate_ips` is the simulator's own instructions per
    wall-clock second."""

    gpu_tot_sim_cycle: int
    gpu_tot_sim_insn: int
    gpu_tot_ipc: float
    sim_rate_ips: int


class Versions(msgspec.Struct, frozen=True):
    """Which builds of the simulator run, as a sim's launch records them."""

    accel_sim_build: str | None
    gpgpu_sim_build: str | None


class Stopped(msgspec.Struct, frozen=True, kw_only=True):
    """The simulator stopped at a limit it was given before running all its launches: the
    option (`limit`) and its `value` when it printed them, and the launch it was running,
    whose counts cover only its part (`partial`, its uid the simulator's)."""

    limit: str | None
    value: int | None
    partial: PartialKernel | None


Output = KernelLaunched | KernelBlock | Totals | Versions | Stopped


# --- what a backend does ------------------------------------------------------------------


class Command(msgspec.Struct, frozen=True):
    argv: list[str]
    env: dict[str, str]
    cwd: Path


class OutputReader(Protocol):
    """One attempt's output, read as it comes."""

    @property
    def stats_naming(self) -> int:
        """Which naming rule made the kernel results' stats keys (`events.KernelFinished`)."""
        ...

    def feed(self, text: str) -> list[Output]:
        """What a chunk of stdout, split anywhere, completes."""
        ...

    def finish(self) -> list[Output]:
        """What the rest says once stdout is closed."""
        ...

    def outcome(self, returncode: int, stderr_tail: Sequence[str]) -> Outcome:
        """How the run ended: `returncode` as a subprocess gives it (-N when killed by signal
        N), with the last lines of its stderr."""
        ...


class Simulator(Protocol):
    @property
    def log_name(self) -> str:
        """The name a sim's stdout is stored under, gzipped."""
        ...

    def configs(self) -> list[GpuConfig]:
        """The GPU configs it can simulate, each with its digest
        (`gpu_configs.config_digest` of the files `prepare` would put there)."""
        ...

    def build(self) -> str | None:
        """Which build of the simulator this is, as far as is known before it runs (for
        Accel-Sim, the sha256 of its binary); None when it cannot be told."""
        ...

    def prepare(self, config: GpuConfig, workdir: Path, *, source: Path | None = None) -> dict[str, str]:
        """Fill a sim's fresh, empty working directory; the files put there, by name (from
        the directory), and their sha256: what makes the result reproducible, and nothing
        the sim itself wrote. `source`: a directory holding the config's files (a variant's,
        fetched), None for the simulator's own config of that name."""
        ...

    def command(
        self, config: GpuConfig, workdir: Path, trace_dir: Path, env: Mapping[str, str], *, launches: Launches | None = None
    ) -> Command:
        """How to run a sim of the trace in `trace_dir` in its prepared `workdir`, given the
        runner's environment (without Cascade's secrets): all its launches, or only those of
        `launches` (a chunk, `cascade_core/split.py`, or the launches a reusing sim simulates,
        `cascade_core/reuse.py`), whose list it may write beside the trace's."""
        ...

    def reader(self) -> OutputReader:
        """A reader for one attempt's output."""
        ...
