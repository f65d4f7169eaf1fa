"""The names of a stats block's values: the rule of docs/stats-naming.md, applied to a block's
skeleton. Pure: text in, names out.

A block is cut into values and the text between them (`logparse.parse_stats` does that with
one regex); the skeleton is that text with each value replaced by `VALUE` and the spaces and
tabs before each value dropped, so it holds no number the simulator computed, only the
words, indices and layout it printed. Names depend on the skeleton alone, which is why a
block's names can be worked out once and found again for every block printed the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["VALUE", "names"]

VALUE = "\0"

# A title or banner ending in a number opens a unit: `Memory Partition 3:`, `Class 0:`,
# `====== Traffic class 0 ======`.
_UNIT = re.compile(r" [0-9]+$")
# A word right after a value: `0a`, `9762i`, `16 bks`, `1 samples)`, `0.3196 GB/Sec`, `-nan%`.
_WORD = re.compile(r"[A-Za-z%!][^ \t,(){}=:]*(?![^ \t,(){}])")
# Titles whose row holds the indices of the next row (`warp_id:` above `distro:`): not data.
_INDEX_ROWS = frozenset({"warp_id", "dynamic_warp_id"})


def names(skeleton: str) -> list[str | None]:
    """The name of each value of the skeleton, in order; None for a value that is not a stat
    (the index rows). Names are unique: a name the rule gives twice gets `#2`, `#3`, ..."""
    lines = skeleton.split("\n")
    out: list[str | None] = []
    unit: str | None = None  # the repeated unit the lines are in (a memory partition, ...)
    section: str | None = None  # the titled table or group they are in
    owner: str | None = None  # the stat that tab-indented lines refine (`\tminimum = 5`)
    label: str | None = None  # a title naming the next line only
    for i, line in enumerate(lines):
        if VALUE in line:
            indented = line.startswith("\t")
            items = _line(line.split(VALUE), label)
            prefix = [p for p in (unit, section, owner if indented else None) if p]
            if label in _INDEX_ROWS:
                out.extend([None] * len(items))
            else:
                out.extend(".".join([*prefix, item]) if prefix else item for item in items)
            if not indented:
                owner = items[0]
            label = None
            continue
        text = line.strip()
        owner = label = None
        if not text:
            section = None
        elif text[:2] in ("==", "--"):
            banner = text.strip("=- ")
            if banner:
                unit = banner if _UNIT.search(banner) else None
                section = None
        elif text.endswith(":"):
            title = text[:-1].rstrip()
            section = None
            if _UNIT.search(title):
                unit = title
            elif i + 1 < len(lines) and VALUE in lines[i + 1]:
                if _unlabeled(lines[i + 1]):
                    label = title
                elif " " in title:
                    section = title
    return _unique(out)


def _unlabeled(line: str) -> bool:
    """A line with no name of its own for the title above to take: a row of bare values
    (`26, 26, 9, `), or `key:value` pairs only (`Stall:47 W0_Idle:599 ...`)."""
    segs = line.split(VALUE)
    if not segs[0].strip():
        return True
    if "=" in line or ": " in line:
        return False
    leads = [segs[0], *(_tail(s)[2] for s in segs[1:-1])]
    return all(lead.strip().endswith(":") for lead in leads)


def _tail(seg: str) -> tuple[str | None, str | None, str]:
    """What follows a value: the word naming or qualifying it, a unit in parentheses such as
    `(inst/sec)`, and the rest (the lead of the next value)."""
    word = None
    match = _WORD.match(seg)
    if match:
        word = match[0]
        seg = seg[match.end() :]
    rest = seg.lstrip(" \t")
    if rest.startswith("(") and ")" in rest and "(" not in rest[1 : rest.index(")")]:
        end = rest.index(")") + 1
        return word, rest[:end], rest[end:]
    return word, None, seg


def _line(segs: Sequence[str], title: str | None) -> list[str]:
    """The names of one line's values within the line (docs/stats-naming.md, "Names within a
    line", whose numbers the comments give), `segs` being the text around the values and
    `title` the title above naming this line, if it does."""
    count = len(segs) - 1
    tails = [_tail(s) for s in segs[1:]]
    leads = [segs[0], *(t[2] for t in tails[:-1])]
    items: list[str] = []
    line_label = title  # `L1D_cache_core[3]: ...`, `mrqq: ...`, or the title above
    key_label: str | None = None  # the last `key:` (`DRAM[0]: 16 bks, busW=4`: busW's)
    ctx: str | None = None  # the last stat named by a key, for words, ratios, (...) and {...}
    paren: str | None = None  # the owner of an open "(", or None
    brace: str | None = None  # the owner of an open "{", or None
    run: list[int] = []  # a list being read: `dram[2]: 0 0 5335 ...`
    run_base: str | None = None
    bare_row = False

    def flush() -> None:
        nonlocal run, run_base
        if run and (len(run) > 1 or bare_row):
            for n, j in enumerate(run):
                items[j] = f"{run_base}[{n}]"
        run, run_base = [], None

    for j in range(count):
        word, paren_unit, _ = tails[j]
        text = leads[j]
        if paren is not None and ")" in text:
            paren, text = None, text[text.index(")") + 1 :]
        if brace is not None and "}" in text:
            brace, text = None, text[text.index("}") + 1 :]
        if "{" in text:
            brace, text = ctx or "", text[text.rindex("{") + 1 :]
        if "(" in text:
            cut = text.rindex("(")
            paren, text = ctx or _clean(text[:cut]), text[cut + 1 :]
        if brace is None and paren is None and ": " in text:  # 2
            cut = text.rindex(": ")
            line_label, key_label, text = _clean(text[:cut]), None, text[cut + 2 :]
        key = text.strip().rsplit(",", 1)[-1].strip()
        continuation = False
        if brace is not None:  # 8
            name = f"{brace}{{{key.rstrip(':').strip()}}}"
        elif paren is not None:  # 7
            name = f"{paren} ({key.rstrip('=:').strip() or word or ''})"
        elif key == "/" and j and ctx:  # 6
            items[j - 1] = f"{ctx}.numerator"
            name = f"{ctx}.denominator"
        elif key == "=":
            name = ctx or ""
        elif key.endswith("="):  # 1, 2
            name = ctx = _join(line_label, key_label, key[:-1].strip())
        elif key.endswith(":"):  # 3
            key_label = ctx = _join(line_label, key[:-1].strip())
            name = f"{key_label}.{word}" if word else key_label
        elif key:  # 4
            name = ctx = _join(line_label, key_label, key)
        else:  # 5
            base = key_label or ctx or line_label or ""
            if word:
                name = f"{base}.{word}"
                # `= 0 days, 0 hrs, ...`: the first value is a part too, named by its word.
                if j and items[j - 1] == ctx and tails[j - 1][0]:
                    items[j - 1] = f"{ctx}.{tails[j - 1][0]}"
            else:
                continuation = True
                name = base
                if run_base != base:
                    flush()
                    run_base = base
                    bare_row = j == 0
                    run = [j - 1] if j and items[j - 1] == base and not bare_row else []
                run.append(j)
        if not continuation:
            flush()
        if paren_unit:  # 1: `(inst/sec)`
            name = f"{name} {paren_unit}"
        items.append(name)
    flush()
    return items


def _clean(text: str) -> str:
    return text.strip().rsplit(",", 1)[-1].strip()


def _join(*parts: str | None) -> str:
    return ".".join(p for p in parts if p)


def _unique(names: list[str | None]) -> list[str | None]:
    seen: dict[str, int] = {}
    out: list[str | None] = []
    for name in names:
        if name is None:
            out.append(None)
            continue
        n = seen[name] = seen.get(name, 0) + 1
        out.append(name if n == 1 else f"{name}#{n}")
    return out
