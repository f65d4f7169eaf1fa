"""`cascade trace list|delete|upload`: traces from a terminal, through the public API.

    cascade trace list                  every trace, newest first: state, kernels, arch, size
    cascade trace delete TRACE          delete a trace (an upload that failed, a trace not needed)
    cascade trace upload DIR|FILE.tar[.gz|.xz]   stream a trace to the server (`uploads_cli`)
    cascade trace add --path DIR [--id ID]      add a trace where it lies, on a path the server shares
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

from cascade_api.models import SharedTraceAdd, Trace
from cascade_cli import runs_text
from cascade_cli.locate import api_client
from cascade_cli.runs_cli import _answer, deleted, print_json, quoted_id
from cascade_cli.uploads_cli import send, size_text


def list_traces(args: argparse.Namespace) -> int:
    return _answer(args, api_client(args).get("/api/traces"), list[Trace], traces_table)


def traces_table(traces: Sequence[Trace]) -> list[str]:
    if not traces:
        return ["no traces"]
    rows = [
        [t.id, t.state + (" (sample)" if t.sample else ""), str(t.kernel_count), t.trace_gpu_arch or runs_text.NONE,
         t.suggested_sim_config or runs_text.NONE, size_text(t.bytes), runs_text.local_time(t.created_at)]
        for t in traces
    ]
    return runs_text.table(["trace", "state", "kernels", "arch", "suggested config", "size", "created"], rows, right=frozenset({2, 5}))


def delete(args: argparse.Namespace) -> int:
    """Delete the trace; with --json, print it as it was just before."""
    client, path = api_client(args), f"/api/traces/{quoted_id(args.trace_id)}"
    return deleted(args, client, path, client.get(path) if args.json else b"", f"trace {args.trace_id}")


def upload(args: argparse.Namespace) -> int:
    """Upload a trace directory or an archive of one, wait for the trace's final state, and
    print it; 0 if ready."""
    trace = send(api_client(args), Path(args.source), args.id)
    if args.json:
        print_json(msgspec.json.encode(trace))
        return 1 if trace.state == "failed" else 0
    if trace.state == "failed":
        print(f"trace {trace.id}: failed: {trace.error} (delete it with: cascade trace delete {trace.id})", file=sys.stderr)
        return 1
    print(f"trace {trace.id}: ready: {trace.kernel_count} kernels, {trace.trace_gpu_arch}, {trace.bytes} bytes")
    return 0


def add(args: argparse.Namespace) -> int:
    """Add the trace in the folder `--path` where it lies (a relative path is taken from here:
    the server and its runners must see the folder at the path printed), and print it."""
    body = SharedTraceAdd(path=os.path.abspath(args.path), id=args.id, copy=args.copy)
    raw = api_client(args).post("/api/traces/shared", msgspec.json.encode(body), {"Content-Type": "application/json"})
    if args.json:
        print_json(raw)
        return 0
    trace = msgspec.json.decode(raw, type=Trace)
    print(f"trace {trace.id}: ready: {trace.kernel_count} kernels, {trace.trace_gpu_arch}, {trace.bytes} bytes, read in place at {body.path}" + (", a copy stored for runners that cannot see it" if body.copy else ""))
    return 0
