"""The heap, set for a process that streams events. It lives with the process's other
draws on its host, below the runner and the projector, which both set it as they start.

Projecting and running sims allocate objects by the million, and a batch keeps tens of
thousands of them alive at once. With CPython's defaults every 700 allocations start a
collection that walks the young objects alive, and every so often one that walks the whole
heap, the modules and the app included: a tenth of replay's time (measured, bench/README.md).

Below the objects, each stats block the runner parses allocates and frees a few hundred KB
(the joined output, the map); glibc gives the top of its heap back to the kernel whenever
more than 128 KB of it are free, so every block faulted those pages in again: a sixth of the
parser's time (bench/README.md). Keeping 4 MB of slack there stops that.

What glibc gives back on its own is only that top: memory freed below something still in
use stays in the process; and Arrow's allocator (mimalloc) keeps what it freed for reuse.
After the export of a 40k-kernel run serve kept about 100 MiB it no longer used (60 of them
Arrow's), and the next such read started from there (bench/README.md, "Memory given back");
so serve hands back what is free after each (`give_back_free_memory`, a few ms).
"""

from __future__ import annotations

import ctypes
import gc

import pyarrow as pa

HEAP_SLACK = 4 << 20
_M_TOP_PAD = -2  # glibc's malloc.h


def settle_heap() -> None:
    """Move everything alive now out of the collector's reach, collect young objects every
    50,000 allocations, and keep HEAP_SLACK free at the top of the C heap. Call it once the
    process is set up; calling it again is harmless."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
    keep_heap_slack(HEAP_SLACK)


def keep_heap_slack(nbytes: int) -> bool:
    """Have glibc keep `nbytes` free at the top of its heap when it gives memory back to the
    kernel (M_TOP_PAD). False under another C library, which is left as it is."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return mallopt is not None and bool(mallopt(_M_TOP_PAD, ctypes.c_int(nbytes)))


def give_back_free_memory() -> bool:
    """Return the free pages of Arrow's allocator and of the C heap (in every arena: glibc's
    malloc_trim) to the kernel. False under another C library, whose heap is left as it is."""
    pa.default_memory_pool().release_unused()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    return trim is not None and bool(trim(ctypes.c_size_t(0)))
