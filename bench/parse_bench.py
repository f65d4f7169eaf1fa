"""How fast `cascade_sim.logparse` reads Accel-Sim stdout, against `grep -c ' = '`.

Builds a log of about --size-mb MB in a temp file: the top of a real log (banner and option
dump), then the kernel sections of every shared success log (header lines, launch line,
LIVENESS lines where there are any, stats block) repeated in turn, then the exit lines.
It parses the file in --chunk-size pieces of text as the runner would (with the runner's
heap settings, `settle_heap`), checks that every kernel came out with all its stats, and
prints MB/s and CPU seconds per MB, then times `grep -c ' = '` over the same file.

    .venv/bin/python bench/parse_bench.py [--size-mb 200] [--chunk-size 65536] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cascade_host.heap import settle_heap
from cascade_sim.logparse import KernelBlock, LogParser, parse_stats

LOGS = Path("/work/shared/accelsim/logs")
SECTION_START = "Processing kernel "
BLOCK_END = "\ngpgpu_silicon_slowdown = "
EXIT_LINES = "GPGPU-Sim: *** simulation thread exiting ***\nGPGPU-Sim: *** exit detected ***\n"


def kernel_sections(log: str) -> list[str]:
    """Each kernel's part of a log: from `Processing kernel` through its stats block."""
    sections = []
    start = log.find(SECTION_START)
    while start >= 0:
        end = log.index("\n", log.index(BLOCK_END, start) + 1) + 1
        sections.append(log[start:end])
        start = log.find(SECTION_START, end)
    return sections


def build_log(path: Path, size: int) -> tuple[int, int]:
    """Write the benchmark log; returns (kernels, stat pairs) written."""
    logs = [p.read_text() for p in sorted(LOGS.glob("*.log"))]
    sections = [s for log in logs for s in kernel_sections(log)]
    pairs = [len(parse_stats(s[s.index("kernel_name = ") : s.index("\n", s.index(BLOCK_END) + 1)])) for s in sections]
    top = logs[0][: logs[0].index(SECTION_START)]
    kernels = stats = written = 0
    with path.open("w") as f:
        written += f.write(top)
        while written < size:
            for section, n in zip(sections, pairs):
                written += f.write(section)
                kernels += 1
                stats += n
        f.write(EXIT_LINES)
    return kernels, stats


def parse_file(path: Path, chunk_size: int) -> tuple[float, float, int, int]:
    """Wall and CPU seconds to read and parse the file, kernels and stats seen."""
    parser = LogParser()
    kernels = stats = 0
    wall, cpu = time.perf_counter(), time.process_time()
    with path.open() as f:
        while chunk := f.read(chunk_size):
            for out in parser.feed(chunk):
                if isinstance(out, KernelBlock):
                    kernels += 1
                    stats += len(out.stats.names)
        parser.finish()
    return time.perf_counter() - wall, time.process_time() - cpu, kernels, stats


def read_file(path: Path, chunk_size: int) -> tuple[float, float]:
    """Wall and CPU seconds just to read and decode the file in chunks."""
    wall, cpu = time.perf_counter(), time.process_time()
    with path.open() as f:
        while f.read(chunk_size):
            pass
    return time.perf_counter() - wall, time.process_time() - cpu


def grep_file(path: Path) -> tuple[float, int]:
    wall = time.perf_counter()
    done = subprocess.run(["grep", "-c", " = ", str(path)], capture_output=True, text=True, check=True)
    return time.perf_counter() - wall, int(done.stdout)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--size-mb", type=float, default=200)
    args.add_argument("--chunk-size", type=int, default=64 * 1024)
    args.add_argument("--repeat", type=int, default=3, help="runs of each timing; the best is kept")
    opts = args.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.log"
        kernels, stats = build_log(path, int(opts.size_mb * 1e6))
        settle_heap()  # as a runner does when it starts
        mb = path.stat().st_size / 1e6
        print(f"log: {mb:.1f} MB, {kernels} kernels, {stats} stats; python {sys.version.split()[0]}, {os.cpu_count()} cpus")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        best_wall = best_cpu = float("inf")
        for _ in range(opts.repeat):
            wall, cpu, seen_kernels, seen_stats = parse_file(path, opts.chunk_size)
            if (seen_kernels, seen_stats) != (kernels, stats):
                raise SystemExit(f"parsed {seen_kernels} kernels, {seen_stats} stats; wrote {kernels}, {stats}")
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        read_wall, read_cpu = min(read_file(path, opts.chunk_size) for _ in range(opts.repeat))
        grep_wall, grep_count = min(grep_file(path) for _ in range(opts.repeat))
        print(f"parse (read + decode + parse, {opts.chunk_size} B chunks): {mb / best_wall:6.1f} MB/s wall, "
              f"{mb / best_cpu:6.1f} MB/s CPU, {best_cpu / mb * 1000:.2f} ms CPU per MB")
        print(f"  of which read + decode alone:  {mb / read_wall:6.1f} MB/s wall, {read_cpu / mb * 1000:.2f} ms CPU per MB")
        print(f"grep -c ' = ':                    {mb / grep_wall:6.1f} MB/s wall ({grep_count} lines)")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
