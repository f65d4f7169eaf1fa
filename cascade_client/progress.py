"""A run's progress for a notebook or a terminal: one text line redrawn in place with a
carriage return (which both honour), `run-… [######..............] 12/40 kernels  1 running, 1 succeeded`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from cascade_api.models import Sim
from cascade_cli.run_watch import Screen
from cascade_cli.runs_text import bar, counts


class Bar(Screen):
    """The lines `watch` shows, on one line of `out`; nothing at all when not `visible`."""

    def __init__(self, out: TextIO, visible: bool = True) -> None:
        super().__init__(out)
        self.visible = visible

    def show(self, lines: list[str]) -> None:
        if not self.visible or lines == self.shown:
            return
        line = "  ".join(lines)
        width = len("  ".join(self.shown))
        self.out.write(f"\r{line:<{width}}")  # padded over a longer line before it
        self.out.flush()
        self.shown = lines

    def end(self) -> None:
        if self.visible and self.shown:
            self.out.write("\n")
            self.out.flush()


def run_line(run_id: str) -> Callable[[list[Sim]], list[str]]:
    """The run's line, from its sims' latest states."""

    def line(sims: list[Sim]) -> list[str]:
        done = sum(s.kernels_done for s in sims)
        total = sum(s.kernels_total for s in sims)
        states: dict[str, int] = {}
        for sim in sims:
            states[sim.state] = states.get(sim.state, 0) + 1
        return [f"{run_id} {bar(done, total)} {done}/{total} kernels  {counts(states)}"]

    return line
