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
