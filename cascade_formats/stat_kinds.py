"""What kind of number each stat of a kernel's stats block is (docs/stats-naming.md, Kinds).

GPGPU-Sim clears only a few counters when a kernel ends (`gpgpu_sim::update_stats`, called
by Accel-Sim's main loop after each kernel's stats); `gpgpu_sim::init` and every other
constructor run once, when the simulation starts. So most of a block is counted since the
simulation started, and a kernel's own value is the difference from the launch before:

- `per_kernel`: cleared at each kernel's start, or a property of the kernel itself;
- `running_total`: accumulated since the simulation started; difference it;
- `snapshot`: a rate, an average, a maximum or minimum so far, a setting, a state: it can be
  neither differenced nor summed;
- `ratio_of_totals`: a ratio of two running totals printed in the same map
  (`ratio_parts`), recomputed per kernel from the differenced parts;
- `undecided`: a name no rule matches, never guessed: lines no shared log prints (the power
  model's, the instruction classification's) and the names of naming 1, which do not say
  which unit they belong to.

`RULES` is the one table, kept as data in `stat_kinds.toml` beside this module: a name's kind
is the kind of the one rule whose pattern matches it whole. In a pattern `*` stands for one
index, unit number or word of a name (no `.`, brackets, braces or parentheses).
`tests/cascade_formats/test_stat_kinds.py` checks every rule against the shared logs and that
docs/stats-naming.md lists the same table.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Literal

import msgspec

StatKind = Literal["per_kernel", "running_total", "snapshot", "ratio_of_totals", "undecided"]

KINDS: tuple[StatKind, ...] = ("per_kernel", "running_total", "snapshot", "ratio_of_totals", "undecided")


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    """Names matching `pattern` are of `kind`, because of `why` (the printing code's own
    words: where the counter is cleared or accumulated). A `ratio_of_totals` rule names its
    parts by `numerator` and `denominator`, patterns whose `*` take the name's own."""

    pattern: str
    kind: StatKind
    why: str
    numerator: str = ""
    denominator: str = ""


RULES: tuple[Rule, ...] = msgspec.convert(
    tomllib.loads(Path(__file__).with_name("stat_kinds.toml").read_text())["rules"], tuple[Rule, ...]
)

_WILDCARD = r"([^.\[\]{}()]+)"


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(_WILDCARD.join(re.escape(part) for part in pattern.split("*")))


_REGEX = {rule: _regex(rule.pattern) for rule in RULES}

# Names that differ only in their numbers (`Memory Partition 3.bk10.a`, `... 4.bk11.a`) nearly
# always have the same rule: a name's rule is looked for among the rules once per shape, its
# numbers all 0 (in the patterns too), and checked on the name itself.
_NUMBERS = re.compile(r"\d+")
_SHAPED = {rule: _regex(_NUMBERS.sub("0", rule.pattern)) for rule in RULES}


def matches(rule: Rule, name: str) -> bool:
    return _REGEX[rule].fullmatch(name) is not None


@cache
def rule_of(name: str) -> Rule | None:
    """The rule that decides `name` (a key of a kernel's stats map, naming 2), or None.
    The rules' patterns never match the same name (the test checks every shared log's)."""
    rule = _rule_of_shape(_NUMBERS.sub("0", name))
    if rule is not None and matches(rule, name):
        return rule
    return next((rule for rule in RULES if matches(rule, name)), None)


@cache
def _rule_of_shape(shape: str) -> Rule | None:
    return next((rule for rule in RULES if _SHAPED[rule].fullmatch(shape)), None)


def kind_of(name: str) -> StatKind:
    """What kind of number the stat `name` is; `undecided` for a name no rule decides."""
    rule = rule_of(name)
    return "undecided" if rule is None else rule.kind


def _fill(template: str, words: tuple[str, ...]) -> str:
    parts = template.split("*")
    return "".join(part + word for part, word in zip(parts, words, strict=False)) + parts[-1]


@cache
def ratio_parts(name: str) -> tuple[str, str] | None:
    """For a `ratio_of_totals` name, its (numerator, denominator) names: running totals of
    the same map, so the kernel's own ratio is diff(numerator) / diff(denominator). None
    for any other name."""
    rule = rule_of(name)
    if rule is None or rule.kind != "ratio_of_totals":
        return None
    match = _REGEX[rule].fullmatch(name)
    assert match is not None  # rule_of found it so
    return _fill(rule.numerator, match.groups()), _fill(rule.denominator, match.groups())
