"""Ids as NATS subject tokens.

Trace ids are chosen by users, so they may hold characters that mean something in a subject
(`.` splits tokens, `*` and `>` are wildcards). Every id goes through `subject_token`, a
reversible escape that only ever yields `[A-Za-z0-9_-]`, so no id can split or forge a token.
"""

from __future__ import annotations

import functools
import re

_PLAIN = re.compile(r"[A-Za-z0-9-]")
_ALL_PLAIN = re.compile(r"[A-Za-z0-9-]+")


@functools.lru_cache(maxsize=4096)  # every event of a sim names the same run and sim
def subject_token(value: str) -> str:
    """Escape `value` into one safe subject token: `_` and anything outside [A-Za-z0-9-]
    become `_` followed by the character's UTF-8 bytes in hex, two digits each."""
    if not value:
        raise ValueError("an empty id has no subject token")
    if _ALL_PLAIN.fullmatch(value):
        return value
    return "".join(ch if _PLAIN.fullmatch(ch) else "".join(f"_{b:02X}" for b in ch.encode()) for ch in value)


def from_subject_token(token: str) -> str:
    out = bytearray()
    i = 0
    while i < len(token):
        if token[i] == "_":
            out.append(int(token[i + 1 : i + 3], 16))
            i += 3
        else:
            out += token[i].encode()
            i += 1
    return out.decode()
