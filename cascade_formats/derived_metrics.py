"""Metrics derived from a kernel's stats and its config's options: L1D and L2 hit rates, DRAM
bytes, bandwidth and utilisation, achieved occupancy and IPC per SM. Pure: numbers in,
numbers out.

Each metric is a ratio, `numerator / denominator`, of a kernel's own values (a running total
less the launch before's, as `kernel_stats.value` holds it: docs/stats-naming.md, Kinds) and
of the config's options. So a kernel's metric is its ratio, and a config's over several
kernels is the ratio of the sums (total bytes over total time, not a mean of rates): the
same formula, read over the kernels together.

The options read are GPGPU-Sim's (gpgpusim.config). GPGPU-Sim moves `dram_atom_size = BL *
busW * gpu_n_mem_per_ctrlr` bytes per DRAM read or write command (gpu-sim.h), counted per
channel as `n_rd` and `n_write`; its DRAM clock (the fourth `-gpgpu_clock_domains` value) is
the command clock, data moving `-dram_data_command_freq_ratio` times per command cycle, so a
channel's peak is busW * gpu_n_mem_per_ctrlr * ratio bytes per DRAM cycle. Its printed
`bw_util` is the same utilisation per channel since the simulation started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import msgspec

from cascade_api.models import DerivedMetric

# The stats a metric reads, by the name it is read as; a name with `[*]` is summed over units.
STATS: dict[str, str] = {
    "cycles": "gpu_sim_cycle",
    "instructions": "gpu_sim_insn",
    "occupancy_pct": "gpu_occupancy",
    "l1d_accesses": "L1D_total_cache_accesses",
    "l1d_misses": "L1D_total_cache_misses",
    "l2_accesses": "L2_total_cache_accesses",
    "l2_misses": "L2_total_cache_misses",
    "dram_reads": "Memory Partition [*].n_rd",
    "dram_writes": "Memory Partition [*].n_write",
}

# The options a metric reads (gpgpusim.config's names).
CORE_CLOCK = "-gpgpu_clock_domains"  # <core>:<icnt>:<l2>:<dram> MHz
CHANNELS = "-gpgpu_n_mem"
CHIPS_PER_CHANNEL = "-gpgpu_n_mem_per_ctrlr"
BUS_WIDTH = "-gpgpu_dram_buswidth"
BURST_LENGTH = "-gpgpu_dram_burst_length"
DATA_RATE = "-dram_data_command_freq_ratio"
CLUSTERS = "-gpgpu_n_clusters"
CORES_PER_CLUSTER = "-gpgpu_n_cores_per_cluster"
OPTIONS = (CORE_CLOCK, CHANNELS, CHIPS_PER_CHANNEL, BUS_WIDTH, BURST_LENGTH, DATA_RATE, CLUSTERS, CORES_PER_CLUSTER)


class ConfigFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a config's options say that the metrics need; None where an option is not set."""

    core_mhz: float | None
    dram_mhz: float | None
    atom_bytes: float | None  # BL * busW * chips per channel: bytes per DRAM read or write command
    peak_bytes_per_s: float | None  # channels * chips * busW * data rate * DRAM clock
    sms: float | None  # clusters * cores per cluster


def _number(options: Mapping[str, str], name: str, at: int = 0) -> float | None:
    try:
        return float(options[name].split(":")[at])
    except (KeyError, IndexError, ValueError):
        return None


def _product(*factors: float | None) -> float | None:
    out = 1.0
    for factor in factors:
        if factor is None:
            return None
        out *= factor
    return out


def config_facts(options: Mapping[str, str]) -> ConfigFacts:
    """The facts a config's options (`gpgpusim_options.read_config`) give."""
    dram_mhz = _number(options, CORE_CLOCK, 3)
    chips = _number(options, CHIPS_PER_CHANNEL)
    bus = _number(options, BUS_WIDTH)
    return ConfigFacts(
        core_mhz=_number(options, CORE_CLOCK, 0),
        dram_mhz=dram_mhz,
        atom_bytes=_product(_number(options, BURST_LENGTH), bus, chips),
        peak_bytes_per_s=_product(_number(options, CHANNELS), chips, bus, _number(options, DATA_RATE), dram_mhz, 1e6),
        sms=_product(_number(options, CLUSTERS), _number(options, CORES_PER_CLUSTER)),
    )


Parts = Mapping[str, float]  # a kernel's own values of `STATS`, by the name they are read as
Ratio = tuple[float | None, float | None]


def _seconds(p: Parts, f: ConfigFacts) -> float | None:
    cycles = p.get("cycles")
    return None if cycles is None or f.core_mhz is None else cycles / (f.core_mhz * 1e6)


def _bytes(p: Parts, f: ConfigFacts, *counts: str) -> float | None:
    if f.atom_bytes is None or any(c not in p for c in counts):
        return None
    return sum(p[c] for c in counts) * f.atom_bytes


def _hits(accesses: str, misses: str) -> Callable[[Parts, ConfigFacts], Ratio]:
    def ratio(p: Parts, f: ConfigFacts) -> Ratio:
        if accesses not in p or misses not in p:
            return None, None
        return p[accesses] - p[misses], p[accesses]

    return ratio


def _dram_bytes(*counts: str) -> Callable[[Parts, ConfigFacts], Ratio]:
    return lambda p, f: (_bytes(p, f, *counts), 1.0)


def _dram_gbps(*counts: str) -> Callable[[Parts, ConfigFacts], Ratio]:
    def ratio(p: Parts, f: ConfigFacts) -> Ratio:
        moved = _bytes(p, f, *counts)
        return None if moved is None else moved / 1e9, _seconds(p, f)

    return ratio


def _dram_utilisation(p: Parts, f: ConfigFacts) -> Ratio:
    seconds = _seconds(p, f)
    return _bytes(p, f, "dram_reads", "dram_writes"), None if seconds is None or f.peak_bytes_per_s is None else seconds * f.peak_bytes_per_s


def _occupancy(p: Parts, f: ConfigFacts) -> Ratio:
    if "occupancy_pct" not in p or "cycles" not in p:
        return None, None
    return p["occupancy_pct"] / 100 * p["cycles"], p["cycles"]


def _ipc_per_sm(p: Parts, f: ConfigFacts) -> Ratio:
    if "instructions" not in p or "cycles" not in p or f.sms is None:
        return None, None
    return p["instructions"], p["cycles"] * f.sms


_SECONDS = f"gpu_sim_cycle / (core clock MHz × 10⁶), the core clock the first value of {CORE_CLOCK}"
_ATOM = f"({BURST_LENGTH} × {BUS_WIDTH} × {CHIPS_PER_CHANNEL}) bytes per command"
_PEAK = f"{CHANNELS} × {CHIPS_PER_CHANNEL} × {BUS_WIDTH} × {DATA_RATE} × DRAM clock (the fourth value of {CORE_CLOCK}, MHz × 10⁶) bytes/s"
_SUMS = "the same ratio of the kernels' sums"

# Units of an amount rather than a ratio: over several kernels, summed.
AMOUNTS = frozenset({"bytes"})

Definition = tuple[DerivedMetric, Callable[[Parts, ConfigFacts], Ratio]]


def _dram_moved(direction: str, count: str, part: str) -> tuple[Definition, Definition]:
    """The bytes DRAM `direction` (read, write) moved, counted per channel by `count`, and their rate."""
    stat = f"Memory Partition [*].{count}"
    atom = [BURST_LENGTH, BUS_WIDTH, CHIPS_PER_CHANNEL]
    moved = DerivedMetric(
        name=f"dram_{direction}_bytes", label=f"DRAM {direction} bytes", unit="bytes",
        formula=f"Σ {stat} × {_ATOM}", over_kernels="the kernels' sum", stats=[stat], options=atom,
    )
    rate = DerivedMetric(
        name=f"dram_{direction}_gbps", label=f"DRAM {direction} bandwidth", unit="GB/s",
        formula=f"DRAM {direction} bytes / 10⁹ / seconds, seconds = {_SECONDS}",
        over_kernels=f"{_SUMS}: total bytes over total time", stats=[stat, "gpu_sim_cycle"], options=[*atom, CORE_CLOCK],
    )
    return (moved, _dram_bytes(part)), (rate, _dram_gbps(part))


METRICS: tuple[Definition, ...] = (
    (
        DerivedMetric(
            name="l1d_hit_rate", label="L1D hit rate", unit="ratio",
            formula="(L1D_total_cache_accesses − L1D_total_cache_misses) / L1D_total_cache_accesses: hits and pending hits over accesses",
            over_kernels=_SUMS, stats=["L1D_total_cache_accesses", "L1D_total_cache_misses"], options=[],
        ),
        _hits("l1d_accesses", "l1d_misses"),
    ),
    (
        DerivedMetric(
            name="l2_hit_rate", label="L2 hit rate", unit="ratio",
            formula="(L2_total_cache_accesses − L2_total_cache_misses) / L2_total_cache_accesses: hits and pending hits over accesses",
            over_kernels=_SUMS, stats=["L2_total_cache_accesses", "L2_total_cache_misses"], options=[],
        ),
        _hits("l2_accesses", "l2_misses"),
    ),
    *_dram_moved("read", "n_rd", "dram_reads"),
    *_dram_moved("write", "n_write", "dram_writes"),
    (
        DerivedMetric(
            name="dram_utilisation", label="DRAM utilisation", unit="ratio",
            formula=f"(DRAM read bytes + DRAM write bytes) / seconds / peak, peak = {_PEAK}",
            over_kernels=f"{_SUMS}: total bytes over total time and peak",
            stats=["Memory Partition [*].n_rd", "Memory Partition [*].n_write", "gpu_sim_cycle"],
            options=[BURST_LENGTH, BUS_WIDTH, CHIPS_PER_CHANNEL, CHANNELS, DATA_RATE, CORE_CLOCK],
        ),
        _dram_utilisation,
    ),
    (
        DerivedMetric(
            name="achieved_occupancy", label="Achieved occupancy", unit="ratio",
            formula="gpu_occupancy / 100: GPGPU-Sim's warp slots filled over warp slots available (none where it prints -nan)",
            over_kernels="the kernels' mean weighted by gpu_sim_cycle", stats=["gpu_occupancy", "gpu_sim_cycle"], options=[],
        ),
        _occupancy,
    ),
    (
        DerivedMetric(
            name="ipc_per_sm", label="IPC per SM", unit="inst/cycle",
            formula=f"gpu_sim_insn / gpu_sim_cycle / SMs, SMs = {CLUSTERS} × {CORES_PER_CLUSTER}",
            over_kernels=f"{_SUMS}: total instructions over total cycles", stats=["gpu_sim_insn", "gpu_sim_cycle"], options=[CLUSTERS, CORES_PER_CLUSTER],
        ),
        _ipc_per_sm,
    ),
)


def _quotient(ratio: Ratio) -> float | None:
    top, bottom = ratio
    return None if top is None or bottom is None or bottom == 0 else top / bottom


def kernel_metrics(parts: Parts, facts: ConfigFacts) -> dict[str, float | None]:
    """A kernel's metrics, by name, from its own values; None where a part is missing, not a
    number or a denominator is 0 (an L1D no access reached)."""
    return {metric.name: _quotient(ratio(parts, facts)) for metric, ratio in METRICS}


def over_kernels(kernels: Sequence[Parts], facts: ConfigFacts) -> dict[str, float | None]:
    """The metrics of several kernels together, over the kernels that have both parts: an
    amount (bytes, each over 1) the sum, any other the ratio of its parts' sums."""
    out: dict[str, float | None] = {}
    for metric, ratio in METRICS:
        both = [(top, bottom) for top, bottom in (ratio(p, facts) for p in kernels) if top is not None and bottom is not None]
        bottom = 1.0 if metric.unit in AMOUNTS else sum(b for _, b in both)
        out[metric.name] = _quotient((sum(t for t, _ in both), bottom)) if both else None
    return out
