"""The one rule for commands that race: optimistic concurrency, decided again on conflict.

A command reads what it decides on (the subject's last event, and the read model as of it),
decides, and appends its events as a chain on that subject: the first expects the subject's
last sequence to be the one it read (0: none yet), each next one the one before it. When
another writer came first, the store refuses (`ConcurrencyError`), and the command is
decided again from the start, on what is there now and with fresh ids, so no event of a try
that lost ever counts (a random run id taken: another is drawn; timing rows listed under a
lost id: never attached). The new decision goes ahead, or refuses on its own terms (the
trace was deleted meanwhile, another upload took the id). Every try that loses is another
writer's win on the same subject, so the tries end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from cascade_app.service import Cascade
from cascade_core import events as ev
from cascade_nats.store import ConcurrencyError, Stored

T = TypeVar("T")


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A command's events (none: nothing to change), the subject's last sequence they were
    decided on, and what the command answers once they are stored."""

    events: Sequence[ev.Event]
    after: int
    outcome: T


def seq_of(last: Stored | None) -> int:
    """The sequence a decision on `last` expects to be the subject's last (0: no event)."""
    return 0 if last is None else last.seq


async def last_shown(c: Cascade, subject: str) -> Stored | None:
    """The subject's last event, once the read model shows it: a decision that reads the read
    model then reads at least what it expects to follow."""
    last = await c.store.last_on(subject)
    if last is not None:
        await c.projector.wait_for(last.seq)
    return last


async def decided(c: Cascade, decide: Callable[[], Awaitable[Decision[T]]], *, wait: bool = True) -> T:
    """The outcome of `decide()` once its events are stored, decided again for as long as
    another writer comes first; with `wait`, once the read model shows them too."""
    while True:
        decision = await decide()
        try:
            await _append(c, decision, wait=wait)
        except ConcurrencyError:
            continue
        return decision.outcome


async def _append(c: Cascade, decision: Decision[T], *, wait: bool) -> None:
    seq = decision.after
    for i, event in enumerate(decision.events):
        append = c.append if wait and i == len(decision.events) - 1 else c.store.append
        seq = await append(event, expected_last_subject_seq=seq)
