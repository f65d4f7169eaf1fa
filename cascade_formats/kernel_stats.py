"""`kernel-stats.csv`, the summary every sim stores beside its log: one row per finished
kernel, `uid,name,gpu_sim_cycle,gpu_sim_insn,ipc`. The runner writes it; `cascade timeline`
reads it back to rebuild a serving step timeline offline.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Protocol

HEADER = ["uid", "name", "gpu_sim_cycle", "gpu_sim_insn", "ipc"]


class KernelSummary(Protocol):
    @property
    def uid(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def gpu_sim_cycle(self) -> int: ...
    @property
    def gpu_sim_insn(self) -> int: ...


def kernel_stats_csv(kernels: Iterable[KernelSummary]) -> bytes:
    """The file for these kernels, ipc at full precision (insn / cycle)."""
    rows = [",".join(HEADER)]
    for k in kernels:
        ipc = k.gpu_sim_insn / k.gpu_sim_cycle if k.gpu_sim_cycle else 0.0
        rows.append(f"{k.uid},{k.name},{k.gpu_sim_cycle},{k.gpu_sim_insn},{ipc!r}")
    return ("\n".join(rows) + "\n").encode()


def kernel_times_from_csv(text: str, clock_mhz: float) -> dict[int, float]:
    """uid -> simulated ns (gpu_sim_cycle / clock_mhz * 1000) from a kernel-stats.csv."""
    if not clock_mhz > 0:
        raise ValueError(f"clock_mhz must be > 0, got {clock_mhz}")
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header != HEADER:
        raise ValueError(
            f"kernel-stats.csv: header must be {','.join(HEADER)}, got "
            f"{'nothing' if header is None else ','.join(header)}"
        )
    times: dict[int, float] = {}
    for row in rows:
        where = f"kernel-stats.csv line {rows.line_num}"
        if not row:
            continue  # a blank line, such as a trailing one
        if len(row) != len(HEADER):
            raise ValueError(f"{where}: expected {len(HEADER)} columns, got {len(row)}")
        uid = _csv_int(row[0], "uid", where, minimum=1)
        cycles = _csv_int(row[2], "gpu_sim_cycle", where, minimum=0)
        if uid in times:
            raise ValueError(f"{where}: uid {uid} appears twice")
        times[uid] = cycles / clock_mhz * 1000
    return times


def _csv_int(text: str, column: str, where: str, *, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{where}: {column} must be an integer, got {text!r}") from None
    if value < minimum:
        raise ValueError(f"{where}: {column} must be >= {minimum}, got {value}")
    return value
