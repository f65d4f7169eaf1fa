"""The seam between the runner and a simulator: what a backend does, and what the runner
reads from it. The runner knows nothing else of a simulator: not its command line, its
working directory, its log's grammar or what counts as success.

A backend (`Simulator`) lists the GPU configs it can simulate, fills a sim's fresh working
directory, gives the command to start it with, and reads its output (`OutputReader`): the
stdout as it is printed, into kernel results and progress, and at the end the outcome.
Accel-Sim is one (`cascade_sim/install.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from cascade_core.models import GpuConfig
from cascade_core.sims import Outcome
from cascade_core.split import Launches

StatValue = float | str


class NonFinite(float):
    """A value the simulator printed as `nan`, `-nan` or `inf`: a float like any other here,
    which stats maps in JSON write as the string "NaN", "Infinity" or "-Infinity" (JSON has
    no such numbers; see `cascade_core/nonfinite.py`)."""

    __slots__ = ()


# --- what output says ---------------------------------------------------------------------


class KernelLaunched(msgspec.Struct, frozen=True):
    """A kernel starts simulating."""

    name: str
    uid: int


class KernelBlock(msgspec.Struct, frozen=True):
    """A kernel's result, as its stats block gives it; `stats` holds every value of the block
    under its name (for Accel-Sim, docs/stats-naming.md)."""

    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    gpu_ipc: float
    stats: dict[str, StatValue]


class Totals(msgspec.Struct, frozen=True):
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


Output = KernelLaunched | KernelBlock | Totals | Versions


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

    def prepare(self, config: GpuConfig, workdir: Path) -> dict[str, str]:
        """Fill a sim's fresh, empty working directory; the files put there, by name (from
        the directory), and their sha256: what makes the result reproducible, and nothing
        the sim itself wrote."""
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
