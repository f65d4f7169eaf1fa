"""`cascade trace timing TRACE FILE`: real kernel timing attached to a ready trace, through
`PUT /api/traces/{id}/real-timing`. The file is sent as it is, in any layout the server
reads (Cascade's CSV, `ncu --csv`, `nsys stats --report cuda_gpu_trace --format csv`),
streamed with its size first so the server can refuse one too big before it goes out."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import quote

import msgspec

from cascade_app.config import ConfigError
from cascade_cli.locate import api_client
from cascade_cli.runs_cli import print_json
from cascade_cli.uploads_cli import file_pieces
from cascade_core.traces import RealTimingAttached


def attach(args: argparse.Namespace) -> int:
    source = Path(args.file)
    try:
        size = source.stat().st_size
    except OSError as err:
        raise ConfigError(f"{source}: {err.strerror}") from err
    if not source.is_file():
        raise ConfigError(f"{source}: not a regular file")
    path = f"/api/traces/{quote(args.trace_id, safe='')}/real-timing" + ("?replace=true" if args.replace else "")
    raw = api_client(args).send_stream("PUT", path, file_pieces(source, size), size, {"Content-Type": "text/csv"})
    if args.json:
        print_json(raw)
        return 0
    print(attached_text(msgspec.json.decode(raw, type=RealTimingAttached)))
    return 0


def attached_text(timing: RealTimingAttached) -> str:
    """`trace combo: real timing timing-3f2a attached (ncu: 3 kernels, 2 repeats, duration_ns
    and cycles), in place of upload`."""
    repeats = f", {timing.repeats} repeats" if timing.repeats > 1 else ""
    replaced = f", in place of {timing.replaced}" if timing.replaced else ""
    measures = " and ".join(timing.measures)
    if timing.counters:
        measures += f", and {len(timing.counters)} hardware counter{'s' if len(timing.counters) > 1 else ''}"
    return f"trace {timing.trace_id}: real timing {timing.timing_id} attached ({timing.format}: {timing.kernels} kernels{repeats}, {measures}){replaced}"
