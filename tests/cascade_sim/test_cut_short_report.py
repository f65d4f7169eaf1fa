"""A sim cut short, as the runner's report reads it from the simulator's output: the limit
that stopped it, the launch it cut, the launches of its list never run (`SimReport`, pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from cascade_core import events as ev
from cascade_core.gpu_configs import GpuConfig
from cascade_core.sims import Outcome
from cascade_core.split import Chunk
from cascade_sim import sim_report
from cascade_sim.install import AccelSimOutput
from tests.support import log_text

TITANX = GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0)
CUT_LAUNCH = ev.PartialKernel(uid=1, name="_Z6vecAddIfEvPT_S1_S1_i", gpu_sim_cycle=1000, gpu_sim_insn=0)


def finished(log: str, kernels_total: int, chunk: Chunk | None = None) -> ev.SimFinished:
    """The sim.finished a report of the recorded `log` sends, for a job of `kernels_total`
    launches (or a chunk of them), the simulator having exited 0."""
    sent: list[ev.Event] = []
    job = sim_report.Job(run_id="run-1", sim_id="sim-1", attempt=1, trace_id="trace-1", gpu_config=TITANX, kernels_total=kernels_total, chunk=chunk)
    report = sim_report.SimReport(
        job=job, emit=sent.append, next_id=lambda: f"e-{len(sent)}", now=lambda: datetime(2026, 12, 1, tzinfo=UTC), reader=AccelSimOutput()
    )
    report.stdout(log_text(log))
    report.end_of_output()
    assert report.outcome(0, []) == Outcome(True, 0, None)
    event = report.finished(report.outcome(0, []))
    assert event is not None and event.outcome == "succeeded"
    return event


def test_a_sim_stopped_at_its_cycle_limit_names_the_limit_and_the_launch_it_cut() -> None:
    cut = finished("failures/max-cycle.stdout", 1).cut_short
    assert cut == ev.CutShort(limit_option="-gpgpu_max_cycle", limit_value=1000, kernels_done=0, kernels_total=1, partial=CUT_LAUNCH)


def test_launches_listed_but_never_run_cut_a_sim_short_with_no_limit_named() -> None:
    assert finished("vectoradd-100-32__SM61_TITANX.log", 3).cut_short == ev.CutShort(kernels_done=1, kernels_total=3)
    assert finished("vectoradd-100-32__SM61_TITANX.log", 1).cut_short is None, "every launch simulated"


def test_a_chunk_cut_short_counts_its_own_launches_and_names_the_cut_one_globally() -> None:
    chunk = Chunk(index=1, count=2, first=5, last=8, warmup=0)
    cut = finished("failures/max-cycle.stdout", 8, chunk).cut_short
    assert cut is not None and (cut.kernels_done, cut.kernels_total) == (0, 4)
    assert cut.partial == ev.PartialKernel(uid=5, name=CUT_LAUNCH.name, gpu_sim_cycle=1000, gpu_sim_insn=0)


def test_a_launch_cut_after_others_is_named_in_its_block_and_still_cut() -> None:
    # Real output of matrixmul-x40 with -gpgpu_max_cycle 20000: launches 1 and 2 finish, and
    # launch 3's block, named like a finished one's, comes just before the break line.
    cut = finished("matrixmul-x40__SM61_TITANX__max_cycle=20000.log", 40).cut_short
    partial = ev.PartialKernel(uid=3, name="_Z8mult_gpuIfEvPT_S1_S1_ii", gpu_sim_cycle=5046, gpu_sim_insn=4352)
    assert cut == ev.CutShort(limit_option="-gpgpu_max_cycle", limit_value=20000, kernels_done=2, kernels_total=40, partial=partial)
