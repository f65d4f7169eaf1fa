"""A measured step timeline consistent with the API reference's step-timelines example.

The reference prints only part of its example; step-timeline.md ("Building a test fixture
consistent with the reference's example") says what the printed numbers pin down. Everything
it pins down is reproduced here exactly; the rest (the names, launch dimensions, durations
and offsets of the 681 kernels the reference does not print, the split of the covered
kernels' 20128 ns, the split of steps 2 and 3's GPU busy time) is synthetic but plausible
for facebook/opt-125m served by vLLM, and deterministic.

Run as a script to rewrite cascade_sim/sample_data/opt125m_h100_step_timeline.json.
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

import msgspec

from cascade_formats.kernel_stats import HEADER
from cascade_formats.timeline import Kernel, Request, Step, StepTimeline

CLOCK_MHZ = 1132.0  # SM86_RTX3070's core clock
TRACE_KERNEL_COUNT = 20  # the reference's trace `demo` has 20 kernels
SAMPLE_PATH = (
    Path(__file__).resolve().parents[2] / "cascade_sim" / "sample_data" / "opt125m_h100_step_timeline.json"
)

REFERENCE_PROVENANCE = (
    "Actual nsys kernel names/dimensions/durations and simulator cycles; synthetic phase "
    "assignment, baseline/profiled walls, queue/API values and rescaled gaps. Not a real "
    "corrected_timeline capture. Synthetic consistent absolute step/request timestamps and "
    "baseline inter-step gaps added for gap-aware replay."
)
# The reference's sentence describes the capture its example came from. This rebuild only has
# what the reference prints, so the sample file says plainly what is copied and what is made up.
SAMPLE_PROVENANCE = (
    "Rebuilt by Cascade from the worked example in the runs API reference "
    "(GET /api/runs/{run_id}/step-timelines), whose own provenance reads: "
    f'"{REFERENCE_PROVENANCE}" '
    "Copied from or implied by that example: the meta fields, the warmup step and request, the "
    "step kinds, walls, GPU busy totals (steps 2 and 3 split arbitrarily), inter-step gaps and "
    "timestamps, the request's timings, the covered kernels' measured totals (20128 ns in step 0, "
    "4768 ns in step 1) and the two kernels it prints (seq 536 and 537). Synthetic: the names, "
    "launch dimensions, durations and start offsets of the other 681 kernels, which of them "
    "carry trace_kernel_uid 1-6 and how the covered time splits among them; they are chosen "
    "only to add up to the published totals."
)


def reference_meta(provenance: str = REFERENCE_PROVENANCE) -> dict[str, object]:
    return {
        "run_name": "offline-h100-derived-fixture",
        "model": "facebook/opt-125m",
        "prompt": "Hello, my name is",
        "max_tokens": 4,
        "repeats": 1,
        "exec_mode": "eager",
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "sm_clock_mhz_median": 1980,
        "mem_clock_mhz": 3106,
        "vllm_version": "fixture-unknown",
        "layerwise_nvtx": False,
        "fixture_provenance": provenance,
    }


SPLIT_K = (
    "_ZN8cublasLt19splitKreduce_kernelILi32ELi16Eif6__halffS1_Lb0EfS1_S1_Lb1ELb1ELb0ELb0EEEvNS_18"
    "cublasSplitKParamsIT4_EEPKT2_PKT8_PT7_PT3_PKS3_SG_PKT9_S7_PSH_PvlPS3_PiSM_SM_SG_SG_SG_SG_SG_"
)
ADD = (
    "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c104HalfEEESt5array"
    "IPcLm3EEEEviT0_T1_"
)
LAYER_NORM = (
    "_ZN2at6native53_GLOBAL__N__layer_norm_kernel_cu_vectorized_layer_norm_kernelIN3c104HalfEfEE"
    "viT0_PKT_S8_S8_PS5_S9_PS6_"
)
NVJET = "nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_bias_TNT"
RESHAPE = (
    "_ZN4vllm30reshape_and_cache_flash_kernelIttLNS_18Fp8KVCacheDataTypeE0EEEvPKT_S4_PT0_S6_PKll"
    "lllliiiPKfSA_i"
)
FLASH = (
    "_ZN7cutlass13device_kernelIN5flash20enable_sm90_or_laterINS1_16FlashAttnFwdSm90INS1_25Colle"
    "ctiveMainloopFwdSm90ILi2EN4cute5tupleIJNS5_1CILi1EEES8_S8_EEENS6_IJNS7_ILi64EEENS7_ILi192EEES"
    "A_EEELi64ENS_6half_tEfNS_4arch4Sm90ELb1ELb0ELb0ELb1ELb1ELb0ELb0ELb1ELb1ELb1ELb0ELb0ENS_10bflo"
    "at16_tELi1EEENS1_21CollectiveEpilogueFwdINS6_IJSA_SA_SB_EEES9_SD_SF_Li128ELb1ELb1ELb0ELb0ELi1"
    "EEENS1_36VarlenDynamicPersistentTileSchedulerILi64ELi192ELi128ELi128ELb0ELb1ELb1ELb1ELb0ELb1E"
    "EEEEEEEEvNT_6ParamsE"
)
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_"
RELU = (
    "_ZN2at6native29vectorized_elementwise_kernelILi8EZZZNS0_17launch_clamp_scalarERNS_18TensorIt"
    "eratorBaseEN3c106ScalarES6_NS0_6detail11ClampLimitsEENKUlvE_clEvENKUlvE5_clEvEUlNS4_4HalfEE_"
    "St5arrayIPcLm2EEEEviT0_T1_"
)

# One OPT decoder layer's kernels as (name, grid, block, typical ns); step 0 begins at the
# split-K reduce and residual add the reference prints (seq 536 and 537).
LAYER = [
    (SPLIT_K, "24x1x1", "32x16x1", 2016),
    (ADD, "5x1x1", "128x1x1", 1376),
    (LAYER_NORM, "6x1x1", "128x1x1", 2400),
    (NVJET, "36x1x1", "128x1x1", 5200),
    (RESHAPE, "6x1x1", "128x1x1", 1900),
    (FLASH, "12x1x1", "384x1x1", 7000),
    (NVJET, "12x1x1", "128x1x1", 4800),
    (SPLIT_K, "24x1x1", "32x16x1", 2000),
    (ADD, "5x1x1", "128x1x1", 1400),
    (LAYER_NORM, "6x1x1", "128x1x1", 2400),
    (NVJET, "48x1x1", "128x1x1", 6400),
    (RELU, "24x1x1", "128x1x1", 1500),
    (NVJET, "12x1x1", "128x1x1", 6100),
]

# Covered kernels: step index -> {kernel index: (trace_kernel_uid, name, grid, block, ns)}.
# Step 0's measured durations sum to 20128 ns and step 1's to 4768 ns, as the spec says.
COVERED = {
    0: {
        3: (1, NVJET, "36x1x1", "128x1x1", 5120),
        4: (2, RESHAPE, "6x1x1", "128x1x1", 1888),
        5: (3, FLASH, "12x1x1", "384x1x1", 6976),
        9: (4, FILL, "1x1x1", "128x1x1", 1248),
        10: (5, NVJET, "48x1x1", "128x1x1", 4896),
    },
    1: {3: (6, NVJET, "36x1x1", "128x1x1", 4768)},
}

# Simulated cycles per trace kernel on SM86_RTX3070: uids 1-3 as the reference's kernel
# list prints them, 4 and 5 an arbitrary split of their 12691, and 6 what step 1's delta needs.
SIM_CYCLES = {1: 6174, 2: 5923, 3: 6216, 4: 5345, 5: 7346, 6: 45709}

# (kind, scheduled tokens, kernels, measured wall, GPU busy, gap before) per non-warmup step.
STEPS = [
    ("prefill", 6, 152, 6_500_000, 536_835, None),
    ("decode", 1, 177, 4_790_000, 564_801, 800_000),
    ("decode", 1, 177, 4_650_000, 561_234, 1_000_000),
    ("decode", 1, 177, 4_900_000, 565_553, 1_200_000),
]
FIRST_SEQ = 536
ARRIVAL_NS = 1_000_000_000
PRE_FIRST_STEP_NS = 200_000
# Step 0's first two kernels, as the reference prints them (they precede every covered
# kernel, so simulation leaves their offsets as measured).
STEP0_OFFSETS = (108088.07402640952, 150410.8374180178)

WARMUP_STEP = Step(
    step=-1,
    repeat=-1,
    warmup=True,
    kind="prefill",
    num_reqs=1,
    num_scheduled_tokens=6,
    baseline_wall_ns=9_000_000,
    profiled_wall_ns=None,
    gpu_busy_ns=None,
    cuda_api_ns=None,
    host_ns=None,
    kernels=[],
    baseline_wall_start_ns=100_000_000,
    baseline_wall_end_ns=109_000_000,
    baseline_gap_before_ns=None,
    profiled_wall_start_ns=None,
    profiled_wall_end_ns=None,
    profiled_gap_before_ns=None,
)
WARMUP_REQUEST = Request(
    repeat=-1,
    warmup=True,
    queued_ms=0,
    ttft_ms=9,
    itl_ms_mean=None,
    itl_ms_p50=None,
    e2e_ms=9,
    num_output_tokens=1,
)


def sim_cycles_csv() -> str:
    """A kernel-stats.csv for the six simulated trace kernels, as Cascade writes it."""
    names = {kernel[0]: kernel[1] for covered in COVERED.values() for kernel in covered.values()}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for uid, cycles in SIM_CYCLES.items():
        insn = cycles * 2
        writer.writerow([uid, names[uid], cycles, insn, insn / cycles])
    return out.getvalue()


def _durations(index: int, count: int, gpu_busy: int) -> list[int]:
    """Kernel durations for a step: covered ones as fixed, the rest scaled to the busy total."""
    fixed = {i: kernel[4] for i, kernel in COVERED.get(index, {}).items()}
    if index == 0:
        fixed |= {0: LAYER[0][3], 1: LAYER[1][3]}
    rng = random.Random(index)
    free = [i for i in range(count) if i not in fixed]
    raw = {i: LAYER[i % len(LAYER)][3] * rng.uniform(0.8, 1.2) for i in free}
    target = gpu_busy - sum(fixed.values())
    scale = target / sum(raw.values())
    durations = fixed | {i: int(raw[i] * scale) for i in free}
    durations[free[-1]] += gpu_busy - sum(durations.values())  # absorb the rounding
    return [durations[i] for i in range(count)]


def _offsets(index: int, durations: list[int], wall: int) -> list[float]:
    """Start offsets: kernels back to back with launch gaps, none overlapping, all in the wall."""
    rng = random.Random(1000 + index)
    fixed = list(STEP0_OFFSETS) if index == 0 else [rng.uniform(60_000.0, 120_000.0)]
    offsets = fixed[:]
    end = offsets[-1] + durations[len(offsets) - 1]
    idle = (wall - end - sum(durations[len(offsets):])) * 0.9  # leave a tail after the last kernel
    weights = [rng.uniform(0.5, 1.5) for _ in durations[len(offsets):]]
    total = sum(weights)
    for duration, weight in zip(durations[len(offsets):], weights, strict=True):
        offsets.append(end + idle * weight / total)
        end = offsets[-1] + duration
    return offsets


def _kernels(index: int, first_seq: int, count: int, gpu_busy: int, wall: int) -> list[Kernel]:
    durations = _durations(index, count, gpu_busy)
    offsets = _offsets(index, durations, wall)
    covered = COVERED.get(index, {})
    kernels = []
    for i in range(count):
        name, grid, block, _ = LAYER[i % len(LAYER)]
        kernel = Kernel(
            seq=first_seq + i,
            name=name,
            grid=grid,
            block=block,
            duration_ns=durations[i],
            start_offset_ns=offsets[i],
        )
        if i in covered:
            uid, name, grid, block, _ = covered[i]
            kernel = msgspec.structs.replace(kernel, trace_kernel_uid=uid, name=name, grid=grid, block=block)
        kernels.append(kernel)
    return kernels


def build_timeline(provenance: str = REFERENCE_PROVENANCE) -> StepTimeline:
    steps = [WARMUP_STEP]
    start, seq = ARRIVAL_NS + PRE_FIRST_STEP_NS, FIRST_SEQ
    for index, (kind, tokens, count, wall, busy, gap) in enumerate(STEPS):
        start += gap or 0
        steps.append(
            Step(
                step=index,
                repeat=0,
                warmup=False,
                kind=kind,
                num_reqs=1,
                num_scheduled_tokens=tokens,
                baseline_wall_ns=wall,
                profiled_wall_ns=wall,
                gpu_busy_ns=busy,
                cuda_api_ns=None,
                host_ns=wall - busy,
                kernels=_kernels(index, seq, count, busy, wall),
                baseline_wall_start_ns=start,
                baseline_wall_end_ns=start + wall,
                baseline_gap_before_ns=gap,
                profiled_wall_start_ns=start,
                profiled_wall_end_ns=start + wall,
                profiled_gap_before_ns=gap,
            )
        )
        start += wall
        seq += count
    first_token = steps[1].baseline_wall_end_ns
    last_token = steps[-1].baseline_wall_end_ns
    request = Request(
        repeat=0,
        warmup=False,
        queued_ms=0.2,
        ttft_ms=6.7,
        itl_ms_mean=5.78,
        itl_ms_p50=5.65,
        e2e_ms=24.04,
        num_output_tokens=4,
        arrival_ns=ARRIVAL_NS,
        pre_first_step_ns=PRE_FIRST_STEP_NS,
        post_last_step_ns=0,
        first_step_start_ns=ARRIVAL_NS + PRE_FIRST_STEP_NS,
        last_step_end_ns=last_token,
        first_token_ns=first_token,
        last_token_ns=last_token,
    )
    return StepTimeline(meta=reference_meta(provenance), steps=steps, requests=[WARMUP_REQUEST, request])


def sample_json() -> bytes:
    """The sample file's bytes: the fixture with the honest provenance, pretty-printed."""
    encoded = msgspec.json.encode(build_timeline(SAMPLE_PROVENANCE))
    return msgspec.json.format(encoded, indent=2) + b"\n"


if __name__ == "__main__":
    SAMPLE_PATH.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_PATH.write_bytes(sample_json())
    print(f"wrote {SAMPLE_PATH}")
