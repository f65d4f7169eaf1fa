"""The garbage collector, set for a process that streams events.

Projecting and running sims allocate objects by the million, and a batch keeps tens of
thousands of them alive at once. With CPython's defaults every 700 allocations start a
collection that walks the young objects alive, and every so often one that walks the whole
heap, the modules and the app included: a tenth of replay's time (measured, bench/README.md).
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Move everything alive now out of the collector's reach, and collect young objects every
    50,000 allocations. Call it once the process is set up; calling it again is harmless."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
