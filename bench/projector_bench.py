"""The projector's own work on one sim's events, in process: what `cascade serve` spends per MB
of simulator output, without NATS, the runner or the other processes on the machine.

    .venv/bin/python bench/projector_bench.py [--size-mb 50] [--batch 16] [--repeat 3]

The combo trace's real log made --size-mb long (runner_bench's `big_log`) goes through the
runner's own report (`SimReport`, as the samples' recorded output does) into a sim's events,
encoded as stored; the projector's live path (`apply_frames`: decode, fold, write, commit)
then takes them --batch at a time, stream sequences in order, into a fresh DuckDB file, and
the process's CPU time for that is reported per MB of log, with the file's size after a
checkpoint. The other code is measured by running this from its checkout (its directory
first on sys.path).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cascade_core import events as ev  # noqa: E402
from cascade_nats import deflated, subjects  # noqa: E402
from cascade_sim import samples  # noqa: E402
from cascade_sim.sim_report import Job  # noqa: E402
from projections import stats_parts  # noqa: E402
from projections.projector import RowCache, apply_frames, connect  # noqa: E402

sys.path.insert(1, str(REPO / "bench"))
from runner_bench import LOG_NAME, big_log  # noqa: E402


def sim_events(size_mb: int, tmp: Path, rounds: int = 1) -> tuple[list[ev.Event], int]:
    """The sample combo trace and run, and one sim's events for a log of `size_mb` and at
    least `rounds` of the kernel section (`big_log`)."""
    sample = samples.recorded("combo-titanx", "combo-vec-mm-xz", LOG_NAME)
    first_claim = next(i for i, e in enumerate(sample.events) if isinstance(e, ev.SimClaimed))
    head, created = sample.events[:first_claim], sample.events[first_claim - 1]
    assert isinstance(created, ev.RunCreated)
    path = tmp / LOG_NAME
    big_log(path, size=size_mb * 1024 * 1024, rounds=rounds)
    text = path.read_text()
    clock = samples._Clock("bench", samples.SAMPLE_AT)  # noqa: SLF001 - the samples' own ids and times
    job = Job(
        run_id=created.run_id, sim_id=created.sims[0].sim_id, attempt=1, trace_id=created.trace_id, gpu_config=samples.TITANX,
        kernels_total=created.kernels_total,
    )
    return head + samples._replayed_sim(clock, job, text, {}), len(text.encode())  # noqa: SLF001 - as the samples replay a log


def project(frames: list[tuple[int, bytes, bytes]], batch: int, db: Path) -> tuple[float, int]:
    """CPU seconds to apply `frames` `batch` at a time; the read model's size afterwards (the
    file and `kernel_stats`' parts)."""
    con = connect(db)
    try:
        cache = RowCache()
        started = time.process_time()
        for i in range(0, len(frames), batch):
            _, rest = apply_frames(con, frames[i : i + batch], None, cache)
            assert rest is None
        cpu = time.process_time() - started
        con.execute("CHECKPOINT")
        parts = stats_parts.folder(db)
        return cpu, db.stat().st_size + sum(p.stat().st_size for p in (parts.iterdir() if parts and parts.is_dir() else ()))
    finally:
        con.close()


def main(size_mb: int, batch: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="cascade-projector-bench-") as tmp:
        events, log_bytes = sim_events(size_mb, Path(tmp))
        frames = [(seq, subjects.of(e).encode(), ev.encode(e)) for seq, e in enumerate(events, 1)]
        beats = [e for e in events if isinstance(e, ev.SimHeartbeat)]
        print(f"{log_bytes / 1e6:.1f} MB of log: {len(events)} events ({sum(len(f[2]) for f in frames) / 1e6:.1f} MB), "
              f"{len(beats)} heartbeats with {sum(len(deflated.log_text(b)) for b in beats) / 1e6:.1f} MB of lines")
        for turn in range(repeat):
            cpu, size = project(frames, batch, Path(tmp) / f"readmodel-{turn}.duckdb")
            print(f"  {batch} events a batch: {cpu:.2f} CPU s, {cpu * 1e3 / (log_bytes / 1e6):.1f} ms per MB of log; read model {size / 1e6:.1f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    main(**vars(parser.parse_args()))
