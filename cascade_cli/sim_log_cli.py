"""`cascade sim log SIM [--follow]`: a sim's simulator log on stdout, as it grows.

Without --follow, the log as it is now. With it, the lines past those printed, asked for
again every `FOLLOW_S` until the sim has finished (its answer's `X-Sim-State`; a finished
sim's log is whole), then the exit status says how it ended: 0 succeeded, 1 otherwise. A
retry starts a new attempt with a log of its own: the follower says so on stderr and prints
that one from its first line.
"""

from __future__ import annotations

import argparse
import sys
import time

import msgspec

from cascade_cli.client import READ_SIZE, ApiClient, guarded
from cascade_cli.locate import api_client
from cascade_cli.runs_cli import quoted_id
from cascade_core.sims import FINISHED

FOLLOW_S = 1.0


class Printed(msgspec.Struct, frozen=True):
    """What one answer of the log route said: the sim's state and attempt, and how many
    lines of it were printed."""

    state: str
    attempt: str
    lines: int


def _print_log(client: ApiClient, sim_id: str, after_line: int = 0, attempt: str | None = None) -> Printed:
    """The sim's log past `after_line` printed, unless the sim is on another attempt than
    `attempt` by now (its lines past `after_line` would be another log's: nothing printed)."""
    path = f"/api/sims/{quoted_id(sim_id)}/log" + (f"?after_line={after_line}" if after_line else "")
    lines = 0
    with client.open("GET", path) as response:
        state, now = response.headers.get("X-Sim-State", ""), response.headers.get("X-Sim-Attempt", "")
        if attempt is not None and now != attempt:
            return Printed(state, now, 0)
        while piece := guarded(f"GET {path}", lambda: response.read(READ_SIZE)):
            sys.stdout.buffer.write(piece)
            lines += piece.count(b"\n")
    sys.stdout.buffer.flush()
    return Printed(state, now, lines)


def log(args: argparse.Namespace) -> int:
    client = api_client(args)
    printed = _print_log(client, args.sim_id)
    if not args.follow:
        return 0
    lines = printed.lines
    while printed.state not in FINISHED:
        time.sleep(FOLLOW_S)
        attempt = printed.attempt
        printed = _print_log(client, args.sim_id, lines, attempt)
        if printed.attempt != attempt:
            print(f"cascade: sim {args.sim_id} is on attempt {printed.attempt} now; its log from the start:", file=sys.stderr, flush=True)
            printed = _print_log(client, args.sim_id)
            lines = 0
        lines += printed.lines
    return 0 if printed.state == "succeeded" else 1
