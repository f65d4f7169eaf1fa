"""The stats tokenizer in C (`cascade_sim/_tokenizer.c`) against its definition as one regex,
REFERENCE below (the parser's own tokenizer until the C one replaced it): the same skeleton
and the same values, bit for bit and type for type, on every stats block and every whole
file of the shared logs and on generated text; and the C side's contract with its caller."""

from __future__ import annotations

import gc
import math
import re
import struct
import tracemalloc
from collections.abc import Callable, Sequence
from functools import cache
from itertools import repeat
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_sim import _tokenizer, statnames
from cascade_sim.logparse import Layout, Stats, StatValue, parse_stats
from tests.support import LOGS, stats_blocks

# One value of a stats block (docs/stats-naming.md, "Values"), with the spaces and tabs after
# it; `re.split` by it gives the text between values and the values.
REFERENCE = re.compile(
    r"([-+.0-9ni](?<![-A-Za-z0-9_.\[].)"
    r"(?:(?<=[0-9])[0-9]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?(?![0-9.:]| ?==)"
    r"|(?<=\.)[0-9]+(?:[eE][-+]?[0-9]+)?(?![0-9.:]| ?==)"
    r"|(?<=[-+])(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?(?![0-9.:]| ?==)|(?:nan|inf)(?![A-Za-z0-9_]))"
    r"|(?<=n)(?:an|one)(?![A-Za-z0-9_])"
    r"|(?<=i)nf(?![A-Za-z0-9_])"
    r"))[ \t]*"
)


def reference_value(text: str) -> StatValue:
    try:
        return float(text)
    except ValueError:
        return text  # `none`


def reference(text: str) -> tuple[str, list[StatValue]]:
    """The skeleton and the values of the text after a block's first line, by REFERENCE."""
    parts = REFERENCE.split(text)
    skeleton = statnames.VALUE.join(map(str.rstrip, parts[::2], repeat(" \t")))
    return skeleton, [reference_value(v) for v in parts[1::2]]


def tokenized(text: str) -> tuple[str, list[StatValue]]:
    """The same by the C tokenizer, each value under a name of its position."""
    seen: list[str] = []

    def names_of(skeleton: str) -> tuple[str, ...]:
        seen.append(skeleton)
        return tuple(str(i) for i in range(skeleton.count(statnames.VALUE)))

    stats = whole(text, "k", names_of)
    assert stats.pop("kernel_name") == "k" and list(stats) == [str(i) for i in range(len(stats))]
    return seen[0], list(stats.values())


def part(text: str, start: int, end: int, kernel_name: str, names_of: Callable[[str], Sequence[str | None]]) -> dict[str, StatValue]:
    """The map of text[start:end] by the C tokenizer, the names of its values by `names_of`."""
    layout, floats, texts = _tokenizer.stats(text, start, end, kernel_name, lambda skeleton: Layout.of(names_of(skeleton)))
    return Stats(layout.names, floats, texts).as_dict()


def whole(text: str, kernel_name: str, names_of: Callable[[str], Sequence[str | None]]) -> dict[str, StatValue]:
    return part(text, 0, len(text), kernel_name, names_of)


def identical(a: StatValue, b: StatValue) -> bool:
    """The same type and the same bits (nan's sign and -0.0 included)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)  # type: ignore[arg-type]
    return a == b


def assert_same(text: str) -> None:
    want_skeleton, want = reference(text)
    got_skeleton, got = tokenized(text)
    assert got_skeleton == want_skeleton
    assert len(got) == len(want)
    wrong = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if not identical(g, w)]
    assert not wrong, wrong[:10]


@cache
def shared_logs() -> dict[str, str]:
    return {str(p.relative_to(LOGS)): p.read_text() for p in sorted(LOGS.rglob("*")) if p.suffix in (".log", ".stdout")}


@pytest.mark.parametrize("name", sorted(shared_logs()))
def test_every_block_and_every_whole_log_tokenize_as_the_reference_does(name: str) -> None:
    log = shared_logs()[name]
    for block in stats_blocks(log):
        assert_same(block.partition("\n")[2])
    assert_same(log)  # the option dump, launch lines and all: text the blocks do not show


# Pieces of stats text, and the edges of the rule: signs, exponents given back, `==`
# after a number, words glued before and after, nan and inf spelled out, numbers too long
# or too large for a double's exact path.
PIECES = [
    "0", "1", "7", "42", "1023", "1024", "9762", "-", "+", ".", "e", "E", "e-", "e+", "5", "00", "1.", ".5",
    "1.000", "0.0002049", "-0", "-0.0", "1e-05", "2.5E+3", "1e999", "-1e999", "1e-999", "123456789012345678901",
    "0.1234567890123456789", "9007199254740993", "1e22", "1e23", "4.35e-22", "nan", "-nan", "+nan", "inf", "-inf",
    "+inf", "none", "nonex", "nanx", "infinity", "i", "n", "no", "na", " ", "  ", "\t", "\n", "=", " = ", "==", " ==",
    ":", ": ", "[", "]", "_", "x", "a", "Z", "(", ")", "{", "}", ",", "%", "/", "!", "é", "€",
]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_generated_text_tokenizes_as_the_reference_does(text: str) -> None:
    assert_same(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789.-+eEnaiof x_[:=\t\n", max_size=60))
def test_generated_characters_tokenize_as_the_reference_does(text: str) -> None:
    assert_same(text)


def test_numbers_read_as_float_reads_them() -> None:
    # The exact path (at most 15 digits, powers of ten to 1e22) and float()'s own for the rest.
    for text in ["0.1", "0.3", "1.9003", "0.00532678", "3.714286", "8.000000", "123456789012345", "1234567890123456",
                 "0.000000000000000000001", "1e22", "1e-22", "9.999999999999999e22", "2.2250738585072014e-308",
                 "4.9e-324", "1.7976931348623157e308"]:
        (value,) = tokenized(text)[1]
        assert identical(value, float(text)), text
    assert math.copysign(1, tokenized("-0")[1][0]) == -1  # type: ignore[arg-type]


def test_nan_and_inf_keep_their_signs_and_none_is_a_text() -> None:
    _, values = tokenized("a -nan b nan c inf d -inf e 1e999 f -0 g none")
    bits = [struct.pack("<d", v) for v in values[:6]]  # type: ignore[arg-type]
    assert bits == [struct.pack("<d", float(t)) for t in ("-nan", "nan", "inf", "-inf", "inf", "-0")]
    assert math.copysign(1, values[0]) == -1 and values[6] == "none"  # type: ignore[arg-type]


def test_values_named_none_are_left_out() -> None:
    stats = whole("a 1 b 2 c 3", "k", lambda _: ("a", None, "c"))
    assert stats == {"kernel_name": "k", "a": 1.0, "c": 3.0}


def test_a_value_named_kernel_name_takes_its_place_as_in_a_dict() -> None:
    assert whole("kernel_name 5 a 1", "k", lambda _: ("kernel_name", "a")) == {"kernel_name": 5.0, "a": 1.0}
    assert whole("a 1 kernel_name none", "k", lambda _: ("a", "kernel_name")) == {"kernel_name": "none", "a": 1.0}


def test_a_layout_must_place_each_value_among_its_names() -> None:
    def stats(text: str, layout: object) -> object:
        return _tokenizer.stats(text, 0, len(text), "k", lambda _: layout)

    with pytest.raises(ValueError, match="an int32 for each of 2 values"):
        whole("a 1 b 2", "k", lambda _: ("a",))
    with pytest.raises(ValueError, match="names \\(a tuple\\)"):
        stats("a 1", SimpleNamespace(names=["kernel_name", "a"], slots=struct.pack("=i", 1)))
    with pytest.raises(ValueError, match="past its 2 names"):
        stats("a 1", SimpleNamespace(names=("kernel_name", "a"), slots=struct.pack("=i", 2)))
    with pytest.raises(ValueError, match="start with kernel_name"):
        stats("a 1", SimpleNamespace(names=(), slots=struct.pack("=i", -1)))
    with pytest.raises(AttributeError):
        stats("a 1", object())
    with pytest.raises(TypeError):
        _tokenizer.stats(b"a 1", 0, 3, "k", lambda _: Layout.of(("a",)))  # type: ignore[arg-type]


def test_an_error_in_names_of_is_raised_and_a_call_from_it_works() -> None:
    def failing(_: str) -> tuple[str, ...]:
        raise KeyError("names")

    with pytest.raises(KeyError, match="names"):
        whole("a 1 b 2", "k", failing)

    def nested(skeleton: str) -> tuple[str, ...]:
        # Another call while the first one's values are held: it has room of its own.
        assert whole("x 5 y 6 z 7", "n", lambda _: ("x", "y", "z")) == {
            "kernel_name": "n", "x": 5.0, "y": 6.0, "z": 7.0}
        return ("a", "b")

    assert whole("a 1 b 2", "k", nested) == {"kernel_name": "k", "a": 1.0, "b": 2.0}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.integers(0, 200), st.integers(0, 200))
def test_a_part_of_a_text_tokenizes_as_that_part_alone(text: str, start: int, length: int) -> None:
    start = min(start, len(text))
    end = min(start + length, len(text))
    seen: list[str] = []

    def names_of(skeleton: str) -> tuple[str, ...]:
        seen.append(skeleton)
        return tuple(str(i) for i in range(skeleton.count(statnames.VALUE)))

    cut = part(text, start, end, "k", names_of)
    alone = whole(text[start:end], "k", names_of)
    assert seen[0] == seen[1] and list(cut) == list(alone)
    assert all(identical(a, b) for a, b in zip(cut.values(), alone.values()))


def test_a_part_must_be_within_the_text() -> None:
    for start, end in [(-1, 2), (2, 1), (0, 4)]:
        with pytest.raises(IndexError):
            part("a 1", start, end, "k", lambda _: ("a",))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab\n= é€", max_size=80), st.text(alphabet="ab\n= é€", max_size=4), st.integers(-100, 100))
def test_find_is_str_find(text: str, sub: str, start: int) -> None:
    assert _tokenizer.find(text, sub, start) == text.find(sub, start)


def test_nothing_is_kept_from_a_call() -> None:
    block = stats_blocks(shared_logs()["vectoradd-100-32__SM7_QV100.log"])[0]
    failing = block.partition("\n")[2]
    parse_stats(block)
    tracemalloc.start()
    try:
        for _ in range(3):
            parse_stats(block)
            with pytest.raises(ValueError):
                whole(failing, "k", lambda _: ())
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            parse_stats(block)
            with pytest.raises(ValueError):
                whole(failing, "k", lambda _: ())
        gc.collect()
        assert tracemalloc.get_traced_memory()[0] - before < 10_000
    finally:
        tracemalloc.stop()


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab\n\r é€", max_size=100))
def test_lines_is_str_count_of_line_breaks(text: str) -> None:
    assert _tokenizer.lines(text) == text.count("\n")
