"""Stats maps as `sim.kernel_finished.v1` carried them, a JSON object per kernel, read into
the packed form (`packed_stats`) as fast as the read model read them before: the log is never
rewritten, and a replay of an old log reads every one of them.

Maps of one config and kernel have the same names, so each set of names met becomes a
`Layout`: a msgspec Struct with a field per name, which decodes such a map without making a
string of any name. A map no known layout fits is decoded as a dict, once, and gives a new
layout.
"""

from __future__ import annotations

import math
from array import array
from typing import cast

import msgspec

from cascade_core import nonfinite, packed_stats
from cascade_core.packed_stats import PackedStats, Value

MAX_LAYOUTS = 64  # about 9,000 names each for SM7_QV100 maps: a few MB in all
MAX_KERNELS = 10_000

_any_map = msgspec.json.Decoder(dict[str, object])


class Layout:
    """A set of stat names, in the order of the first map that had them, and which of them
    have held text; `decode` reads a map with exactly these names, or raises."""

    def __init__(self, names: tuple[str, ...], texts: frozenset[int]) -> None:
        self.names = names
        self.names_text = packed_stats.names_text(names) if names else ""
        self.texts = texts
        fields = [(f"f{i}", str | float if i in texts else float) for i in range(len(names))]
        struct = msgspec.defstruct(
            "StatsMap", fields, rename={f"f{i}": name for i, name in enumerate(names)}, forbid_unknown_fields=True, gc=False
        )
        # Not strict: a number field takes "NaN", "Infinity" and "-Infinity" as the floats.
        self._decoder = msgspec.json.Decoder(struct, strict=False)
        self.maybe_text = sorted(texts)

    def decode(self, raw: bytes) -> list[Value]:
        values: list[Value] = list(msgspec.structs.astuple(self._decoder.decode(raw)))
        # A field that may hold text reads "NaN" as that text: it is the number.
        for i in self.maybe_text:
            value = values[i]
            if isinstance(value, str):
                values[i] = nonfinite.VALUES.get(value, value)
        return values


_recent: list[Layout] = []  # most recently used first
_by_names: dict[tuple[str, ...], Layout] = {}
_by_kernel: dict[str, list[Layout]] = {}  # the layouts kernels of a name had, most recent first
_EMPTY = Layout((), frozenset())


def packed(raw: bytes, kernel: str) -> PackedStats | None:
    """The map, read as the read model has always stored it (`packed_stats.from_mapping`);
    None for `{}`, a result without a map, and for what is no JSON object (stored then as a
    kernel without rows). `kernel` is the kernel's name: its maps' layouts are tried first."""
    layout, values = decode(raw, kernel)
    if not layout.names:
        return None
    texts = {i: v for i in layout.maybe_text if not isinstance(v := values[i], float)}
    for i in texts:
        values[i] = math.nan
    try:
        floats = array("d", cast(list[float], values))  # floats now, unless a null is left
    except TypeError:  # a null, which only a map no layout read has
        texts.update((i, v) for i, v in enumerate(values) if not isinstance(v, float))
        floats = array("d", [v if isinstance(v, float) else math.nan for v in values])
    # Packed on its way from the log to the read model, never sent or stored: compressing it
    # would cost the replay of an old log for nothing.
    return packed_stats.packed(layout.names_text, floats.tobytes(), texts, compress=packed_stats.stored)


def decode(raw: bytes, kernel: str) -> tuple[Layout, list[Value]]:
    """The map's layout and its values in the layout's order, each a float (nan and
    infinities as floats), a text, or None (a JSON null). Trying a layout that does not fit
    can cost as much as one that does, so the layouts kernels of the same name had are tried
    first: they print the same lines, but for a few that depend on what ran before."""
    mine = _by_kernel.setdefault(kernel, [])
    for layout in [*mine, *(other for other in _recent if other not in mine)]:
        try:
            values = layout.decode(raw)
        except msgspec.ValidationError:
            continue
        _first(_recent, layout)
        _first(mine, layout)
        return layout, values
    try:
        stats = _any_map.decode(raw)
    except msgspec.DecodeError:
        return _EMPTY, []  # not a JSON object: nothing to store
    values = [packed_stats.json_value(v) for v in stats.values()]
    names = tuple(stats)
    texts = frozenset(i for i, v in enumerate(values) if isinstance(v, str))
    known = _by_names.pop(names, None)
    if known is not None:  # these names again, now with text where there was none
        texts |= known.texts
        for layouts in (_recent, *_by_kernel.values()):
            if known in layouts:
                layouts.remove(known)
    layout = _by_names[names] = Layout(names, texts)
    _first(_recent, layout)
    for old in _recent[MAX_LAYOUTS:]:
        del _by_names[old.names]
    del _recent[MAX_LAYOUTS:]
    if len(_by_kernel) > MAX_KERNELS:
        _by_kernel.clear()
    _first(_by_kernel.setdefault(kernel, []), layout)
    return layout, values


def _first(layouts: list[Layout], layout: Layout, keep: int = MAX_LAYOUTS) -> None:
    """`layout` first in `layouts`, and no more than `keep` of them."""
    if layouts and layouts[0] is layout:
        return
    if layout in layouts:
        layouts.remove(layout)
    layouts.insert(0, layout)
    del layouts[keep:]
