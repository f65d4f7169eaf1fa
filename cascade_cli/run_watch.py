"""Following a run from a terminal: its event stream folded into each sim's latest state and
shown as one progress line per sim, until the run ends.

The stream is `GET /api/runs/{id}/events`. Its event ids are opaque strings: the last one
seen goes back as `Last-Event-ID` when the connection is lost, and the server sends what came
after it. A stream ends after the run's final event; one that ends otherwise (a dropped
connection, a restarted server) is resumed the same way. Whether the run has ended is read
from `GET /api/runs/{id}` whenever a stream ends, and that answer is the run as it ended.

Whether a sim may never finish unless someone acts (no runner takes it, its runner is lost)
is judged when the run is read, and a stream never says it; it matters when the stream is
quiet, so each of the server's keep-alives, which come only then, is a cue to read the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TextIO
from urllib.parse import quote

import msgspec

from cascade_cli.client import COMMENT, ApiClient, Disconnected, ServerEvent
from cascade_cli.runs_text import progress
from cascade_api.models import RunDetail, Sim

RETRY_S = 0.5
MAX_RETRY_S = 5.0

_snapshot = msgspec.json.Decoder(RunDetail)
_sim = msgspec.json.Decoder(Sim)

Board = dict[str, Sim]  # each sim's latest state, in the run's order


def board_of(detail: RunDetail) -> Board:
    return {sim.id: sim for sim in detail.sims}


def apply(board: Board, event: ServerEvent) -> Board:
    """The board after one event: a snapshot replaces it, a `sim` event replaces its sim;
    kernels, files and the run's own event change no progress line."""
    if event.event == "snapshot":
        return board_of(_snapshot.decode(event.data))
    if event.event == "sim":
        sim = _sim.decode(event.data)
        return {**board, sim.id: sim}
    return board


class Screen:
    """Lines shown on a terminal and redrawn in place there (each cut to the terminal's
    width, so none wraps); anywhere else, each line printed again whenever it changes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.shown: list[str] = []

    def show(self, lines: list[str]) -> None:
        if self.tty:
            lines = [line[: self._width() - 1] for line in lines]
        if lines == self.shown:
            return
        if self.tty:
            up = f"\r\x1b[{len(self.shown)}A" if self.shown else ""
            self.out.write(up + "\x1b[J" + "".join(f"{line}\n" for line in lines))
        else:
            changed = [line for i, line in enumerate(lines) if i >= len(self.shown) or self.shown[i] != line]
            self.out.write("".join(f"{line}\n" for line in changed))
        self.out.flush()
        self.shown = lines

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self.out.fileno()).columns
        except (OSError, ValueError):
            columns = 0
        return columns or 80  # a terminal that does not say its size


def get_run(client: ApiClient, run_id: str) -> RunDetail:
    return _snapshot.decode(client.get(f"/api/runs/{quote(run_id, safe='')}"))


def watch(client: ApiClient, created: RunDetail, screen: Screen, lines: Callable[[list[Sim]], list[str]] = progress) -> RunDetail:
    """Show the run's progress on `screen`, as `lines` tells it, until it ends; the run as it ended."""
    path = f"/api/runs/{quote(created.id, safe='')}/events"
    board, last_id, retry_s = board_of(created), "", RETRY_S
    while True:
        try:
            for event in client.events(path, last_id, comments=True):
                if event.event == COMMENT:
                    board = board_of(get_run(client, created.id))
                board, last_id, retry_s = apply(board, event), event.id, RETRY_S
                screen.show(lines(list(board.values())))
            ended = get_run(client, created.id)
            if ended.state != "active":
                screen.show(lines(ended.sims))
                return ended
            note = "the event stream ended early; resuming"
        except Disconnected as lost:
            note = f"{lost}; resuming in {retry_s:g} s"
        screen.show([*lines(list(board.values())), note])
        time.sleep(retry_s)
        retry_s = min(2 * retry_s, MAX_RETRY_S)
