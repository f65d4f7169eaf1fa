"""A kernel's stats map in the compact form its event carries (`events.KernelFinished.stats`),
from the runner to the rows of `kernel_stats` without being written out or read back as
JSON text.

A map is its names and its values. The names of maps of one config and kernel are the same
and most of a map's bytes (an SM7_QV100 map has 9,235 names, 363 KB as text), so a set of
names is one text (base64 of the xz (LZMA) of the names joined by newlines), made once per
set by the runner, known by its digest (`names_digest`). The runner sends each set once, as a
`stat_names.defined.v1` event stored before the first result that names it
(`cascade_sim/event_sender.py`), and results carry only the digest; the projector keeps the
sets it has seen (`stat_sets`). Older results hold the names' text themselves, and older
still their zlib: the first bytes tell which (an xz stream starts with its magic).

The values are float64s, compressed with zlib (74 KB, 3 KB compressed: most are small whole
numbers). A value that is text (`kernel_name`) or null is a nan there, and its text, or None,
is in `texts` by position; the text `none`, which GPGPU-Sim prints for hundreds of values of
a map, is a nan of its own (`NONE_BITS`) instead, so that it costs the floats' compression
nearly nothing where `texts` spent 13 bytes of JSON on each (older results hold it in
`texts`). A runner's map carries after its floats each one's difference from the simulator's
block before (`with_differences`), compressed with them: the two are alike (most differences
are the value itself, or zero), so together they take a fifth less than apart (older results
carry the differences apart, `KernelFinished.per_kernel`). bench/README.md has the numbers.
"""

from __future__ import annotations

import base64
import hashlib
import lzma
import math
import sys
import zlib
from array import array
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import msgspec

from cascade_core import nonfinite

StatValue = float | str  # a stats map's value: a number, or the text the simulator printed
Value = StatValue | None
Key = TypeVar("Key")
Kept = TypeVar("Kept")

# The values are packed once per map, so the fastest level: higher ones cost far more time for
# little. The names are packed once per set of names and then travel in every result, so
# tighter than zlib can: xz at its default preset (its higher ones take longer for little more),
# with no check (the store keeps an event's bytes whole): under half of zlib's best
# (bench/README.md, "Bytes per kernel").
_LEVEL = 1
_XZ_MAGIC = b"\xfd7zXZ\x00"  # how an xz stream starts; a zlib stream never does
MAX_SETS = 64  # what a cache by set of names keeps (`kept`): a few MB for SM7_QV100 maps


# The float that stands for the text `none`: a quiet nan whose payload spells "none", which
# no arithmetic and no parse of a printed number gives (those give the one nan of each sign).
NONE_BITS = 0x7FF8_0000_6E6F_6E65


class PackedStats(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, kw_only=True):
    """A stats map: `names` (base64 of the xz of the names joined by newlines; empty where the
    set's own event holds it), `names_digest` (the digest that set is known by; empty in
    older results, which all hold their names), `values` (zlib of a float64 per name,
    little-endian; `NONE_BITS` where the value is the text `none`; then, `with_differences`,
    each value's difference from the block before, a float64 per name again), and the other
    values that are no number, by position (the float there is a nan)."""

    names: str = ""
    values: bytes
    texts: dict[int, str | None] = {}
    names_digest: str = ""
    with_differences: bool = False


_texts_of_names: dict[tuple[str, ...], str] = {}
# The same, by the tuple's identity: the runner's parser gives every block of a kind the same
# tuple, and hashing thousands of names for every block would be a cost per MB of output.
_texts_of_tuples: dict[int, tuple[tuple[str, ...], str]] = {}
_names_of_texts: dict[str, tuple[str, ...]] = {}
_digests: dict[str, str] = {}


def kept(cache: dict[Key, Kept], key: Key, value: Kept) -> Kept:
    """`value`, kept under `key` in `cache`, which a new key past MAX_SETS of them empties
    first: a sim's maps come in a few sets of names, so the cache is rarely emptied, and it
    never grows past that however many sets go by."""
    if len(cache) >= MAX_SETS:
        cache.clear()
    cache[key] = value
    return value


def names_text(names: tuple[str, ...]) -> str:
    """The names as `PackedStats.names` holds them: base64 of their xz."""
    same = _texts_of_tuples.get(id(names))
    if same is not None and same[0] is names:
        return same[1]
    known = _texts_of_names.get(names)
    if known is None:
        xz = lzma.compress("\n".join(names).encode(), format=lzma.FORMAT_XZ, check=lzma.CHECK_NONE)
        packed = base64.b64encode(xz).decode("ascii")
        known = kept(_texts_of_names, names, packed)
    kept(_texts_of_tuples, id(names), (names, known))
    return known


def _digest_of(names: str) -> str:
    """The digest a set of names is known by, of its text (`names_text`): made once per set."""
    known = _digests.get(names)
    if known is None:
        known = kept(_digests, names, hashlib.blake2b(names.encode("ascii"), digest_size=16).hexdigest())
    return known


def names_of(stats: PackedStats) -> tuple[str, ...]:
    """The map's names, in its order, from the text it holds (`with_names` gives one that
    holds only its set's digest the text)."""
    if not stats.names and stats.names_digest:
        raise ValueError(f"the map names its set of names by digest {stats.names_digest}: give it the text of that set first")
    return names_in(stats.names)


def decompressed(packed: bytes, inflate: Callable[[bytes], bytes] = zlib.decompress) -> bytes:
    """`packed` as xz or zlib packed it, told apart by xz's magic; `inflate` undoes zlib (the
    standard library's by default, ISA-L's where the caller has it)."""
    return lzma.decompress(packed, format=lzma.FORMAT_XZ) if packed.startswith(_XZ_MAGIC) else inflate(packed)


def names_in(names: str) -> tuple[str, ...]:
    """The names of the text `names_text` made."""
    known = _names_of_texts.get(names)
    if known is None:
        packed = base64.b64decode(names)
        text = decompressed(packed).decode()
        known = kept(_names_of_texts, names, tuple(text.split("\n")) if text else ())
    return known


def with_names(stats: PackedStats, names: str) -> PackedStats:
    """The map holding the text of its set of names, where it held only the set's digest."""
    return msgspec.structs.replace(stats, names=names)


def without_names(stats: PackedStats) -> PackedStats:
    """The map as a result carries it once its set's event is stored: the set's digest alone."""
    return msgspec.structs.replace(stats, names="") if stats.names_digest else stats


Texts = dict[int, str | None] | dict[int, str]
Compress = Callable[[bytes], bytes]


def compressed(floats: bytes) -> bytes:
    """The floats in zlib's format, at its fastest level."""
    return zlib.compress(floats, _LEVEL)


def stored(floats: bytes) -> bytes:
    """The floats in zlib's format as they are, for a map that is never sent or stored."""
    return zlib.compress(floats, 0)


def pack(
    names: tuple[str, ...], floats: bytes, texts: Texts, *, compress: Compress = compressed, differences: bytes | None = None
) -> PackedStats:
    """A map of `names` whose values are `floats` (a float64 each, in the machine's byte
    order) but where `texts` says: holding its names and their digest, and the texts `none`
    as `NONE_BITS`; and, given them, each value's `differences` from the block before (as
    `floats` are), compressed with the values."""
    nones = [i for i, text in texts.items() if text == "none"]
    if nones:
        marked = array("d", floats)
        bits = memoryview(marked).cast("B").cast("Q")  # the nan's bits as they are, not as a float
        for i in nones:
            bits[i] = NONE_BITS
        floats = marked.tobytes()
        texts = {i: text for i, text in texts.items() if text != "none"}
    text = names_text(names)
    both = floats if differences is None else floats + differences
    return packed(text, both, texts, compress=compress, names_digest=_digest_of(text), with_differences=differences is not None)


def packed(
    names: str, floats: bytes, texts: Texts, *, compress: Compress = compressed, names_digest: str = "", with_differences: bool = False
) -> PackedStats:
    """`pack`, with the names as `names_text` made them (and their digest, where the map is
    to be sent by it), and the floats (and their differences after them, `with_differences`)
    compressed by `compress`, into zlib's format (whatever compresses them:
    `cascade_nats.deflated` reads any)."""
    # A map of texts is one of texts or None: the event never changes it.
    return PackedStats(
        names=names,
        names_digest=names_digest,
        values=packed_floats(floats, compress=compress),
        texts=cast(dict[int, str | None], texts),
        with_differences=with_differences,
    )


def packed_floats(floats: bytes, *, compress: Compress = compressed) -> bytes:
    """Float64s in the machine's byte order as a map's `values` holds them: little-endian,
    compressed by `compress`."""
    if sys.byteorder == "big":
        swapped = array("d", floats)
        swapped.byteswap()
        floats = swapped.tobytes()
    return compress(floats)


def from_mapping(stats: Mapping[str, Any]) -> PackedStats | None:
    """A map of the values JSON has, as the read model has always stored them: numbers as
    floats, "NaN", "Infinity" and "-Infinity" as those floats, texts, null, and anything else
    as its JSON text. None for an empty map: a kernel result without one."""
    if not stats:
        return None
    values = [json_value(v) for v in stats.values()]
    texts = {i: v for i, v in enumerate(values) if not isinstance(v, float)}
    floats = array("d", [v if isinstance(v, float) else math.nan for v in values])
    return pack(tuple(stats), floats.tobytes(), texts)


_json = msgspec.json.Encoder()


def json_value(value: Any) -> Value:
    """A value of a JSON map as the read model stores it (`from_mapping`)."""
    if isinstance(value, str):
        return nonfinite.VALUES.get(value, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None if value is None else _json.encode(value).decode()
