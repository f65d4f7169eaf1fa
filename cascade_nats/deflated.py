"""What events carry deflated, inflated: a heartbeat's log lines (`SimHeartbeat.log_deflated`,
xz or, in older heartbeats, zlib) and a kernel result's stats values (`PackedStats.values`,
zlib).

The core defines those fields and never inflates them; every reader of the log does it here,
with ISA-L: a heartbeat inflates in a quarter of zlib's time and a map's floats in half
(bench/README.md), and the projector inflates every one of each, the log download every
heartbeat of a sim.
"""

from __future__ import annotations

import sys
from array import array

import pyarrow as pa
import pyarrow.compute as pc
from isal import isal_zlib

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_core.packed_stats import PackedStats, Value


def log_text(beat: ev.SimHeartbeat) -> str:
    """The heartbeat's lines, joined by newlines (read it once: each read inflates)."""
    return ev.log_text(beat, isal_zlib.decompress)


def log_utf8(beat: ev.SimHeartbeat) -> bytes:
    """`log_text` encoded, a compressed one without being decoded first (the log download)."""
    return ev.log_utf8(beat, isal_zlib.decompress)


def floats_of(stats: PackedStats) -> bytes:
    """The map's values as float64s, little-endian, a nan where `texts` has the value."""
    return floats_and_differences(stats, None)[0]


def floats_and_differences(stats: PackedStats, per_kernel: bytes | None) -> tuple[bytes, bytes | None]:
    """The map's values (`floats_of`) and each one's difference from the block before, the
    same way, of a kernel result whose differences are `per_kernel` (its field), or with the
    values (`PackedStats.with_differences`): None where it has neither (older events)."""
    floats = inflated(stats.values)
    if stats.with_differences:
        half = len(floats) // 2
        return floats[:half], floats[half:]
    return floats, None if per_kernel is None else inflated(per_kernel)


def inflated(floats: bytes) -> bytes:
    """Float64s packed as a map's values are (`packed_stats.packed_floats`), little-endian."""
    return isal_zlib.decompress(floats)


def texts_of(stats: PackedStats, floats: bytes) -> dict[int, str | None]:
    """The map's values that are no number, by position: its `texts`, and the text `none`
    where its float (of `floats_of`) is `packed_stats.NONE_BITS` (in older results, `texts`
    holds those too)."""
    bits = pa.Array.from_buffers(pa.uint64(), len(floats) // 8, [None, pa.py_buffer(floats)])
    nones = pc.indices_nonzero(pc.equal(bits, pa.scalar(packed_stats.NONE_BITS, pa.uint64())))
    if not len(nones):
        return stats.texts
    return dict(sorted({**dict.fromkeys(nones.to_pylist(), "none"), **stats.texts}.items()))


def stats_map(stats: PackedStats) -> dict[str, Value]:
    """The map as names to floats, texts or None (it must hold its names' text:
    `packed_stats.names_of`)."""
    packed = floats_of(stats)
    floats = array("d", packed)
    if sys.byteorder == "big":
        floats.byteswap()
    values: list[Value] = list(floats)
    for i, text in texts_of(stats, packed).items():
        values[i] = text
    return dict(zip(packed_stats.names_of(stats), values))
