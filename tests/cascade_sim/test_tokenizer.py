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
from collections.abc import Callable
from functools import cache
from itertools import repeat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_sim import _tokenizer, statnames
from cascade_sim.logparse import NonFinite, StatValue, parse_stats
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
        number = float(text)
    except ValueError:
        return text  # `none`
    return number if number - number == 0 else NonFinite(number)


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


def whole(text: str, kernel_name: str, names_of: Callable[[str], tuple[str | None, ...]]) -> dict[str, StatValue]:
    return _tokenizer.stats(text, 0, len(text), kernel_name, names_of, NonFinite)


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


def test_values_a_block_repeats_are_shared_and_nonfinite_ones_are_nonfinite() -> None:
    _, values = tokenized("a 0 b 0 c -nan d -nan e nan f inf g -inf h 1e999 i none")
    assert values[0] is values[1]
    assert values[2] is values[3] and isinstance(values[2], NonFinite) and math.isnan(values[2])
    assert [type(v) for v in values[4:8]] == [NonFinite] * 4
    assert values[5] == math.inf and values[6] == -math.inf and values[7] is values[5] and values[8] == "none"


def test_values_named_none_are_left_out() -> None:
    stats = whole("a 1 b 2 c 3", "k", lambda _: ("a", None, "c"))
    assert stats == {"kernel_name": "k", "a": 1.0, "c": 3.0}


def test_names_of_must_give_a_name_per_value() -> None:
    with pytest.raises(ValueError, match="a tuple of 2 names"):
        whole("a 1 b 2", "k", lambda _: ("a",))
    with pytest.raises(ValueError, match="a tuple of 2 names"):
        whole("a 1 b 2", "k", lambda _: ["a", "b"])  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError):
        _tokenizer.stats(b"a 1", 0, 3, "k", lambda _: ("a",), NonFinite)  # type: ignore[arg-type]


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

    part = _tokenizer.stats(text, start, end, "k", names_of, NonFinite)
    alone = whole(text[start:end], "k", names_of)
    assert seen[0] == seen[1] and list(part) == list(alone)
    assert all(identical(a, b) for a, b in zip(part.values(), alone.values()))


def test_a_part_must_be_within_the_text() -> None:
    for start, end in [(-1, 2), (2, 1), (0, 4)]:
        with pytest.raises(IndexError):
            _tokenizer.stats("a 1", start, end, "k", lambda _: ("a",), NonFinite)


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


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.floats() | st.text(max_size=5) | st.none(), max_size=30))
def test_pack_gives_each_float_as_it_is_and_the_rest_by_position(stats: dict[str, float | str | None]) -> None:
    floats, texts = _tokenizer.pack(stats)  # type: ignore[arg-type]  # the C side takes None too, which the runner's maps never hold
    unpacked = struct.unpack(f"={len(stats)}d", floats)
    for i, value in enumerate(stats.values()):
        if isinstance(value, float):
            assert identical(unpacked[i], value) and i not in texts
        else:
            assert math.isnan(unpacked[i]) and texts[i] == value
    assert len(texts) == sum(not isinstance(v, float) for v in stats.values())


def test_pack_refuses_what_is_no_value() -> None:
    with pytest.raises(TypeError, match="not int"):
        _tokenizer.pack({"a": 1.0, "b": 1})
    with pytest.raises(TypeError):
        _tokenizer.pack([1.0])  # type: ignore[arg-type]  # a map it must be
