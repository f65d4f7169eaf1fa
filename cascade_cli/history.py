"""An event as one line a person can read: time, sequence, type and its key fields; and a
stored message that is no event, or was parked, as one line saying so."""

from __future__ import annotations

import msgspec

from cascade_core import events as ev
from cascade_core import packed_stats
from cascade_core.packed_stats import PackedStats
from cascade_api.models import ParkedEvent
from cascade_nats import deflated
from cascade_nats.store import Unread

_ENVELOPE = frozenset({"id", "at", "causation_id", "correlation_id"})


def _short(value: object) -> str:
    if isinstance(value, list):
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}"
    if isinstance(value, PackedStats):  # a kernel's stats map: a float a key, whether it holds its names or not
        return f"{{{len(deflated.floats_of(value)) // 8} keys}}"
    if isinstance(value, bytes):
        return f"[{len(value):,} bytes]"
    if isinstance(value, msgspec.Struct):
        return "{" + ", ".join(f"{k}={_short(v)}" for k, v in msgspec.structs.asdict(value).items() if v is not None) + "}"
    text = str(value)
    if "\n" in text:
        return f"[{text.count(chr(10)) + 1} lines]"
    return text if len(text) <= 60 else text[:57] + "..."


def describe(seq: int, event: ev.Event) -> str:
    shown = msgspec.structs.asdict(event)
    if isinstance(event, ev.SimHeartbeat):  # its log lines as lines, however they travelled
        shown.pop("log_deflated")
        shown["log"] = ev.log_text(event)
    if isinstance(event, ev.StatNamesDefined):
        shown["names"] = f"[{len(packed_stats.names_in(event.names))} names]"
    fields = " ".join(
        f"{name}={_short(value)}"
        for name, value in shown.items()
        if name not in _ENVELOPE and value is not None and value not in ([], {}, "")
    )
    at = event.at.isoformat().replace("+00:00", "Z")
    return f"{at}  #{seq:<8} {ev.event_type(event):<28} {fields}"


def describe_unread(item: Unread) -> str:
    return f"{'?':<27}  #{item.seq:<8} {item.event_type or '?':<28} the event at seq {item.seq} could not be decoded: {item.error}"


def describe_parked(event: ParkedEvent) -> str:
    return f"#{event.seq:<8} {event.subject}  {event.event_type or '?'}  {event.error}"
