"""The runner's own CPU per MB of simulator output, in one process and without NATS: what
`bench/runner_bench.py` measures of the worker, less the pipe, the socket and asyncio.

runner_bench's log (`big_log`, --size-mb) is read in the runner's pieces of bytes
(`attempt.READ_SIZE`), and each piece goes where `attempt.Attempt` sends it: the gzipped
log file, the UTF-8 decoder, and `SimReport.stdout` (the log lines heartbeats carry, the
parser, kernel results with their stats maps packed). Every event is encoded and framed as
the event store sends it (`store._payload` into a `pipeline.Batch`'s frames, not written
anywhere). The heartbeats are those the output makes (one per kernel and per 192 KB of log
lines); a real sim's one every 2 s is too few to count. It prints CPU ms per MB for the
whole, and for its parts each timed alone; the best of --repeat.

    .venv/bin/python bench/runner_cpu_bench.py [--size-mb 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import codecs
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.runner_bench import LOG_NAME, big_log  # noqa: E402
from cascade_core import events as ev  # noqa: E402
from cascade_host.heap import settle_heap  # noqa: E402
from cascade_core.gpu_configs import GpuConfig  # noqa: E402
from cascade_nats import subjects  # noqa: E402
from cascade_nats.store import _payload  # noqa: E402
from cascade_sim.attempt import READ_SIZE, log_compressor  # noqa: E402
from cascade_sim.install import AccelSimOutput  # noqa: E402
from cascade_sim.sim_report import Job, SimReport  # noqa: E402

JOB = Job(run_id="run", sim_id="sim", attempt=1, trace_id="trace", gpu_config=GpuConfig(name="SM61_TITANX", arch="sm_61", core_clock_mhz=1417.0), kernels_total=0)


class Frames:
    """Events framed as `pipeline.Batch.add` frames them, the frames dropped once 1 MB is
    gathered (as if written to the socket)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.events = self.bytes = 0
        self.count = 0

    def emit(self, event: ev.Event) -> None:
        payload = _payload(event)
        header = f"NATS/1.0\r\nNats-Msg-Id: {event.id}\r\n\r\n".encode()
        self.out += f"HPUB {subjects.of(event)} _INBOX.x.y.{self.events} {len(header)} {len(header) + len(payload)}\r\n".encode()
        self.out += header
        self.out += payload
        self.out += b"\r\n"
        self.events += 1
        self.bytes += len(payload)
        if len(self.out) >= 1 << 20:
            self.out = bytearray()

    def next_id(self) -> str:
        self.count += 1
        return f"sim.1.{self.count}"


def now() -> datetime:
    return datetime.now(UTC)


def pieces(path: Path) -> list[bytes]:
    with path.open("rb") as f:
        return list(iter(lambda: f.read(READ_SIZE), b""))


def runner_work(chunks: list[bytes], tmp: Path, *, gz: bool = True, report: bool = True) -> Frames:
    """What the runner does with the output, or a part of it."""
    frames = Frames()
    sim = SimReport(job=JOB, emit=frames.emit, next_id=frames.next_id, now=now, reader=AccelSimOutput())
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    compressor = log_compressor()
    with (tmp / "log.gz").open("wb") as log:
        for chunk in chunks:
            if gz:
                log.write(compressor.compress(chunk))
            text = decoder.decode(chunk)
            if report:
                sim.stdout(text)
        log.write(compressor.flush())
        if report:
            sim.end_of_output()
            sim.heartbeat()
    return frames


def best_cpu(repeat: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--size-mb", type=int, default=50)
    args.add_argument("--repeat", type=int, default=3)
    opts = args.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        kernels = big_log(tmp / LOG_NAME, size=opts.size_mb * 1024 * 1024)
        chunks = pieces(tmp / LOG_NAME)
        mb = sum(map(len, chunks)) / 1e6
        settle_heap()  # as a runner does when it starts
        print(f"output: {mb:.1f} MB, {kernels} kernels; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        frames = runner_work(chunks, tmp)
        print(f"events: {frames.events}, {frames.bytes / 1e6:.1f} MB")
        whole = best_cpu(opts.repeat, lambda: runner_work(chunks, tmp))
        print(f"runner's work, all of it:        {whole * 1e3 / mb:6.2f} ms CPU per MB")
        parts = {
            "decoding alone": lambda: runner_work(chunks, tmp, gz=False, report=False),
            "gzip of the log and decoding": lambda: runner_work(chunks, tmp, report=False),
            "decoding, events, no gzip": lambda: runner_work(chunks, tmp, gz=False),
        }
        for label, work in parts.items():
            print(f"  {label + ':':30} {best_cpu(opts.repeat, work) * 1e3 / mb:6.2f} ms CPU per MB")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
