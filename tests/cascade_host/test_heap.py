"""The heap settings of a streaming process (cascade_host/heap.py)."""

from __future__ import annotations

import platform
import subprocess
import sys

from cascade_host.heap import HEAP_SLACK, keep_heap_slack

# Allocate and free 2 MB in 100 KB pieces (under glibc's mmap threshold, so from its heap),
# 50 times, and print the page faults that took.
CHURN = """
import resource, sys
from cascade_host.heap import HEAP_SLACK, keep_heap_slack
if sys.argv[1] == "slack":
    keep_heap_slack(HEAP_SLACK)
def churn():
    pieces = [bytes(100_000) for _ in range(20)]
    del pieces
churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_freed_memory_is_kept_for_the_next_allocations_under_glibc() -> None:
    glibc = platform.libc_ver()[0] == "glibc"
    assert keep_heap_slack(HEAP_SLACK) is glibc
    if glibc:
        # Without the slack each round gives the 2 MB back and faults its ~500 pages in again.
        assert faults("default") > 5_000
        assert faults("slack") < 500


# Fill 100 MB of the C heap in 1 KB pieces, keep one piece made after them (so the heap's top
# is in use and glibc gives none of it back by itself), free the rest, and print the resident
# MiB before and after giving back what is free.
HELD_BELOW_THE_TOP = """
import sys
from cascade_host.heap import give_back_free_memory
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
pieces = [bytes(1000) for _ in range(100_000)]
top = bytes(1000)
del pieces
before = resident()
give_back_free_memory()
print(before, resident())
"""


def test_memory_freed_below_what_is_still_used_is_given_back_under_glibc() -> None:
    if platform.libc_ver()[0] != "glibc":
        return
    done = subprocess.run([sys.executable, "-c", HELD_BELOW_THE_TOP], capture_output=True, text=True, check=True)
    before, after = map(int, done.stdout.split())
    assert before - after > 80, (before, after)
