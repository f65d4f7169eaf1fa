"""Decoding an uploaded JSON file however deeply it nests.

msgspec decodes nested arrays and objects by recursion (skipping an unknown field too), and
stops at Python's recursion limit with a RecursionError rather than a DecodeError, so a small
file of nested brackets would escape a parser's own errors and leave its upload half-made.
Here that is a `TooDeep`, which each parser words as its own error. The decoder checks the
limit at each level in C, so this costs nothing; a scan for depth in Python before decoding
would cost seconds on the largest files a trace may carry.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

T = TypeVar("T")


class TooDeep(ValueError):
    def __init__(self) -> None:
        super().__init__("it nests arrays or objects inside one another too deeply to be read; flatten it")


def decode(raw: bytes, type_: type[T]) -> T:
    """`raw` decoded into `type_` by msgspec (`object`: any JSON value); TooDeep if it nests too deeply to decode."""
    try:
        return msgspec.json.decode(raw, type=type_)
    except RecursionError:
        raise TooDeep() from None

