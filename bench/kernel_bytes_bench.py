"""Where a kernel's bytes go, and what its stats values are: the combo trace's big log
(runner_bench's `big_log`, --rounds of 3 kernels) through the runner's own report into one
sim's events, as `projector_bench.py` makes them, then through the projector's live path into
a fresh DuckDB file.

    .venv/bin/python bench/kernel_bytes_bench.py [--rounds 3384] [--batch 16] [--no-values]

Reports, per kernel result: its event's bytes as stored in JetStream (the payload, its subject
and its `Nats-Msg-Id` header; nats-server's own record framing not counted) and each field's
share of them; the read model's bytes (the file after a checkpoint, and each table's share of
its blocks); the projector's CPU per kernel; and what the values of the maps are: zeros, the
same as the previous kernel of the sim, whole numbers that fit in 8, 16 or 32 bits, and which
are neither. The other code is measured by running this from its checkout.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from array import array
from collections import Counter
from pathlib import Path

import duckdb
import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cascade_core import events as ev  # noqa: E402
from cascade_core import packed_stats  # noqa: E402
from cascade_nats import deflated, subjects  # noqa: E402

from cascade_sim import event_sender  # noqa: E402
from projections import stats_parts  # noqa: E402

sys.path.insert(1, str(REPO / "bench"))
from projector_bench import project, sim_events  # noqa: E402


def as_sent(events: list[ev.Event]) -> list[ev.Event]:
    """The events as the runner's sender stores them (`event_sender.named`): each set of
    stat names once, as its own event, and results naming it by digest."""
    out: list[ev.Event] = []
    stored: set[str] = set()
    for e in events:
        if isinstance(e, ev.KernelFinished):
            defined, e = event_sender.named(e, stored, e.at)
            if defined is not None:
                stored.add(defined.digest)
                out.append(defined)
        out.append(e)
    return out


def stored_bytes(event: ev.Event) -> int:
    """The event as JetStream keeps it: subject, `Nats-Msg-Id` header and payload."""
    header = len(f"NATS/1.0\r\nNats-Msg-Id: {event.id}\r\n\r\n")
    return len(subjects.of(event)) + header + len(ev.encode(event))


def field_bytes(results: list[ev.KernelFinished]) -> dict[str, float]:
    """Bytes per result of the stats map's parts as they travel (the names' text, the
    zlib'd values with their differences, or the differences apart, the texts), and the
    rest of the event."""
    n = len(results)
    names = sum(len(r.stats.names) + len(r.stats.names_digest) for r in results if r.stats is not None)
    values = sum(len(r.stats.values) for r in results if r.stats is not None)
    texts = sum(len(msgspec.json.encode(r.stats.texts)) for r in results if r.stats is not None)
    per_kernel = sum(len(r.per_kernel or b"") for r in results)
    total = sum(stored_bytes(r) for r in results)
    # bytes fields travel as base64 in the JSON payload
    return {
        "stored": total / n,
        "names (or their digest)": names / n,
        "values, with their differences where they are (base64)": values * 4 / 3 / n,
        "per_kernel, the differences apart (base64)": per_kernel * 4 / 3 / n,
        "texts": texts / n,
    }


def value_kinds(results: list[ev.KernelFinished], sets: dict[str, str]) -> Counter[str]:
    """How many values, over every map, are of each kind, in this order of precedence:
    text or null, zero, the same as the previous map's value of that name, a whole number in
    8/16/32 bits, other."""
    kinds: Counter[str] = Counter()
    before: dict[str, float] = {}
    for r in results:
        if r.stats is None:
            continue
        packed = deflated.floats_of(r.stats)
        floats = array("d", packed)
        names = packed_stats.names_in(r.stats.names or sets[r.stats.names_digest])
        texts = deflated.texts_of(r.stats, packed)
        now: dict[str, float] = {}
        for i, (name, v) in enumerate(zip(names, floats)):
            now[name] = v
            if i in texts:
                kinds["text or null"] += 1
            elif v == 0:
                kinds["zero"] += 1
            elif before.get(name) == v:
                kinds["same as the kernel before"] += 1
            elif math.isfinite(v) and v == int(v) and abs(v) < 2**7:
                kinds["whole, 8 bits"] += 1
            elif math.isfinite(v) and v == int(v) and abs(v) < 2**15:
                kinds["whole, 16 bits"] += 1
            elif math.isfinite(v) and v == int(v) and abs(v) < 2**31:
                kinds["whole, 32 bits"] += 1
            else:
                kinds["other"] += 1
        before = now
    return kinds


def per_kernel_kinds(results: list[ev.KernelFinished]) -> Counter[str]:
    """The same for the differences the events carry (with the values, or `per_kernel`)."""
    kinds: Counter[str] = Counter()
    for r in results:
        if r.stats is None:
            continue
        differences = deflated.floats_and_differences(r.stats, r.per_kernel)[1]
        for v in array("d", differences or b""):
            if v == 0:
                kinds["zero"] += 1
            elif math.isnan(v):
                kinds["nan (a text)"] += 1
            elif v == int(v) and abs(v) < 2**31:
                kinds["whole, 32 bits"] += 1
            else:
                kinds["other"] += 1
    return kinds


def column_bytes(con: duckdb.DuckDBPyConnection, table: str, block_size: int) -> dict[str, int]:
    """Each column's bytes in the table's blocks, from where its segments start in them: a
    segment runs to the next one's start in its block, or to the block's end."""
    segments = con.execute(
        f"SELECT column_name, block_id, block_offset FROM pragma_storage_info('{table}') WHERE block_id >= 0 ORDER BY block_id, block_offset"  # noqa: S608 - a table of the catalog
    ).fetchall()
    sizes: Counter[str] = Counter()
    for (column, block, offset), after in zip(segments, [*segments[1:], None]):
        end = after[2] if after is not None and after[1] == block else block_size
        sizes[column] += end - offset
    return dict(sizes)


def read_model(events: list[ev.Event], batch: int, db: Path) -> tuple[float, int, list[tuple[str, int]], dict[str, int]]:
    """The projector's CPU seconds over the events (`projector_bench.project`), the read
    model's size after a checkpoint (parts too), each table's blocks' bytes, and
    `kernel_stats_hot`'s by column."""
    cpu, size = project([(seq, subjects.of(e).encode(), ev.encode(e)) for seq, e in enumerate(events, 1)], batch, db)
    with duckdb.connect(str(db), read_only=True) as con:
        block = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()
        block_size = block[0] if block else 0
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()]
        blocks: list[tuple[str, int]] = []
        for table in tables:
            (count,) = con.execute(
                f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{table}') WHERE block_id >= 0"  # noqa: S608 - names from the catalog
            ).fetchone() or (0,)
            blocks.append((table, count * block_size))
        return cpu, size, sorted(blocks, key=lambda b: -b[1]), column_bytes(con, stats_parts.HOT, block_size)


def main(rounds: int, batch: int, values: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="cascade-kernel-bytes-") as tmp:
        events = as_sent(sim_events(0, Path(tmp), rounds=rounds)[0])
        results = [e for e in events if isinstance(e, ev.KernelFinished)]
        n = len(results)
        print(f"{n} kernel results, {len(events)} events")
        fields = field_bytes(results)
        print(f"stream: {fields['stored']:.0f} B per kernel result as stored; of it " + ", ".join(f"{k} {v:.0f} B" for k, v in fields.items() if k != "stored"))
        everything = sum(stored_bytes(e) for e in events)
        print(f"stream, every event of the sim: {everything / n:.0f} B per kernel")
        if not values:
            return read_model_lines(events, batch, Path(tmp), n)
        kinds = value_kinds(results, {e.digest: e.names for e in events if isinstance(e, ev.StatNamesDefined)})
        total = sum(kinds.values())
        print(f"map values: {total / n:.0f} per kernel; " + ", ".join(f"{k} {v / total:.1%}" for k, v in kinds.most_common()))
        own = per_kernel_kinds(results)
        total_own = sum(own.values())
        if total_own:
            print("per-kernel differences: " + ", ".join(f"{k} {v / total_own:.1%}" for k, v in own.most_common()))
        read_model_lines(events, batch, Path(tmp), n)


def read_model_lines(events: list[ev.Event], batch: int, tmp: Path, kernels: int) -> None:
    cpu, size, blocks, columns = read_model(events, batch, tmp / "readmodel.duckdb")
    print(f"read model: {size / kernels:.0f} B per kernel ({size / 1e6:.1f} MB); projector {cpu * 1e3 / kernels:.3f} ms CPU per kernel ({batch} events a batch)")
    print("  " + ", ".join(f"{t} {b / kernels:.0f} B" for t, b in blocks if b))
    print(f"  {stats_parts.HOT} by column: " + ", ".join(f"{c} {b / kernels:.0f} B" for c, b in sorted(columns.items(), key=lambda c: -c[1])))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3384)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--values", action=argparse.BooleanOptionalAction, default=True, help="what the values are (a minute or two)")
    main(**vars(parser.parse_args()))
