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
"""

from __future__ import annotations

import ctypes
import gc

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
