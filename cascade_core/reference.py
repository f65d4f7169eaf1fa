"""A fast sim measured against its reference, pure: per kernel and in total, the split or
reusing sim's cycles and instructions against those of the same trace and config simulated
whole and in sequence, and the wall time each took.

Kernels are matched by launch uid, which a split sim's chunks and a reusing sim's reused
launches keep (`split.Chunk.global_uid`, `reuse.Reuse.global_uid`), so kernel i of one is
kernel i of the other whatever order they finished in. An error is signed, (fast -
reference) / reference * 100: +1.37 % is a fast sim 1.37 % slower than the sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any

import msgspec

# Kernel names are mangled C++ symbols, often kilobytes of template arguments: answers that
# hold one carry its short name too, for display (`kernel_names.short_name`).
SHORT_NAME = (
    "The kernel_name's innermost function name, without scope, template arguments or parameters "
    "(`_Z6vecAddIfEvPT_S1_S1_i` is `vecAdd`); the kernel_name itself when it is no mangled name this can read."
)


class ReferenceNumbers(msgspec.Struct, frozen=True, kw_only=True):
    """The fast sim's cycles and instructions against the reference's, and their errors."""

    gpu_sim_cycle: Annotated[int | None, msgspec.Meta(description="The fast sim's; null until it has the kernel.")]
    reference_gpu_sim_cycle: Annotated[int | None, msgspec.Meta(description="The reference's; null until it has the kernel.")]
    cycle_error_pct: float | None
    gpu_sim_insn: int | None
    reference_gpu_sim_insn: int | None
    insn_error_pct: float | None


class ReferenceKernel(ReferenceNumbers, frozen=True, kw_only=True, omit_defaults=True):
    kernel_launch_uid: int
    kernel_name: str
    reused_from: Annotated[int | None, msgspec.Meta(description="As in KernelStat: the launch whose result the fast sim took.")] = None
    kernel_short_name: Annotated[str | None, msgspec.Meta(description=SHORT_NAME)] = None


class ReferenceTotals(ReferenceNumbers, frozen=True, kw_only=True):
    """Sums over the kernels both sims have (null while they have none in common)."""

    kernels: Annotated[int, msgspec.Meta(description="The kernels both sims have, which the totals sum.")]
    exact: Annotated[int, msgspec.Meta(description="Kernels whose cycles are the reference's exactly.")]
    worst_cycle_error_pct: Annotated[float | None, msgspec.Meta(description="The per-kernel cycle error furthest from 0.")]
    worst_kernel_launch_uid: int | None


class KernelResult(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What a sim's kernel says that a comparison reads."""

    uid: int
    name: str
    gpu_sim_cycle: int
    gpu_sim_insn: int
    reused_from: int | None = None


def error_pct(fast: float | None, reference: float | None) -> float | None:
    """(fast - reference) / reference in percent; None when either is unknown or the reference is 0."""
    if fast is None or reference is None or reference == 0:
        return None
    return (fast - reference) / reference * 100


def speedup(fast_wall_s: float | None, reference_wall_s: float | None) -> float | None:
    if fast_wall_s is None or reference_wall_s is None or fast_wall_s <= 0:
        return None
    return reference_wall_s / fast_wall_s


def _numbers(cycles: int | None, reference_cycles: int | None, insn: int | None, reference_insn: int | None) -> dict[str, Any]:
    """The fields of a `ReferenceNumbers`, its errors computed."""
    return {
        "gpu_sim_cycle": cycles,
        "reference_gpu_sim_cycle": reference_cycles,
        "cycle_error_pct": error_pct(cycles, reference_cycles),
        "gpu_sim_insn": insn,
        "reference_gpu_sim_insn": reference_insn,
        "insn_error_pct": error_pct(insn, reference_insn),
    }


def kernels(fast: Iterable[KernelResult], reference: Iterable[KernelResult], short_name: Callable[[str], str]) -> list[ReferenceKernel]:
    """Every launch either sim has, by uid, each with the other's where it has it; `short_name`
    gives a kernel's display name (the demangler is a file format's, outside the core)."""
    by_uid = {k.uid: k for k in reference}
    mine = {k.uid: k for k in fast}
    rows = []
    for uid in sorted(mine.keys() | by_uid.keys()):
        f, r = mine.get(uid), by_uid.get(uid)
        named = f if f is not None else r
        assert named is not None
        cycles, insn = (None, None) if f is None else (f.gpu_sim_cycle, f.gpu_sim_insn)
        reference_cycles, reference_insn = (None, None) if r is None else (r.gpu_sim_cycle, r.gpu_sim_insn)
        rows.append(
            ReferenceKernel(
                kernel_launch_uid=uid,
                kernel_name=named.name,
                kernel_short_name=short_name(named.name),
                reused_from=None if f is None else f.reused_from,
                **_numbers(cycles, reference_cycles, insn, reference_insn),
            )
        )
    return rows


def totals(rows: Iterable[ReferenceKernel]) -> ReferenceTotals:
    """The sums over the kernels both sims have, their errors, and the worst kernel's."""
    both = [r for r in rows if r.gpu_sim_cycle is not None and r.reference_gpu_sim_cycle is not None]
    sums = [sum(getattr(r, field) or 0 for r in both) if both else None for field in _SUMMED]
    cycles, reference_cycles, insn, reference_insn = sums
    scored = [r for r in both if r.cycle_error_pct is not None]
    worst = max(scored, key=lambda r: (abs(r.cycle_error_pct or 0.0), -r.kernel_launch_uid), default=None)
    return ReferenceTotals(
        kernels=len(both),
        **_numbers(cycles, reference_cycles, insn, reference_insn),
        exact=sum(r.gpu_sim_cycle == r.reference_gpu_sim_cycle for r in both),
        worst_cycle_error_pct=None if worst is None else worst.cycle_error_pct,
        worst_kernel_launch_uid=None if worst is None else worst.kernel_launch_uid,
    )


_SUMMED = ("gpu_sim_cycle", "reference_gpu_sim_cycle", "gpu_sim_insn", "reference_gpu_sim_insn")
