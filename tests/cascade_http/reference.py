"""The Runs API reference's examples, read from the contract itself, and a comparison that
holds a response to what an example shows.

An example prints some lists and maps only in part (`/* 17 more items trimmed */`); such a
tail becomes a marker here, and a response matches when it has the shown items first and
exactly as many more.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from cascade_formats.kernel_names import short_name
from tests.support import SHARED

SPEC = SHARED / "spec" / "runs-api-reference.txt"
MORE_ITEMS = "__more_items__"
MORE_KEYS = "__more_keys__"

_SUBHEADINGS = {"Returns#", "Errors#", "Example#", "Path parameters#", "Request body#"}
_LABEL = re.compile(r"^(?P<label>[^·]+?) · (?P<status>\d{3}) [^·]+ · (?P<media>\S+)$")
_TRIMMED_ITEMS = re.compile(r"\s*/\* (\d+) more items trimmed \*/")
_TRIMMED_KEYS = re.compile(r"\s*/\* (\d+) more keys trimmed \*/")


@cache
def _sections() -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in SPEC.read_text().splitlines():
        if line.endswith("#") and line not in _SUBHEADINGS:
            lines = sections.setdefault(line[:-1], [])
        else:
            lines.append(line)
    return sections


def _block(section: str, label: str) -> tuple[str, list[str]]:
    """The media type and lines of the example labelled `label` in `section`."""
    lines = _sections()[section]
    for i, line in enumerate(lines):
        match = _LABEL.match(line)
        if match and match["label"] == label:
            body: list[str] = []
            for text in lines[i + 1 :]:
                if _LABEL.match(text):
                    break
                body.append(text)
                if text in ("}", "]"):
                    break
            return match["media"], body
    raise KeyError(f"no example {label!r} in section {section!r}")


def example(section: str, label: str = "Response") -> Any:
    """An example's JSON, trimmed tails kept as markers."""
    _, lines = _block(section, label)
    text = "\n".join(lines)
    text = _TRIMMED_ITEMS.sub(rf', {{"{MORE_ITEMS}": \1}}', text)
    text = _TRIMMED_KEYS.sub(rf', "{MORE_KEYS}": \1', text)
    return json.loads(text)


def text_example(section: str) -> tuple[str, list[str], int]:
    """A plain-text example: its media type, the lines shown, and how many more it trims."""
    media, lines = _block(section, "Response")
    while lines and not lines[-1]:
        lines = lines[:-1]
    more = re.fullmatch(r"/\* (\d+) more lines trimmed \*/", lines[-1])
    if more is None:
        return media, lines, 0
    return media, lines[:-1], int(more[1])


def substitute(value: Any, mapping: dict[Any, Any]) -> Any:
    """`value` with every scalar found in `mapping` replaced: for values a test cannot
    reproduce, such as fresh ids and times."""
    if isinstance(value, dict):
        return {k: substitute(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, mapping) for v in value]
    try:
        return mapping.get(value, value)
    except TypeError:
        return value


# The fields Cascade adds to the reference's objects that name a kernel: its short name for
# display, after the reference's fields (`models.SHORT_NAME`), by the field of the name.
SHORT_NAMES = {"kernel_short_name": "kernel_name", "current_kernel_short_name": "current_kernel"}


def without_short_names(actual: dict[str, Any], path: str = "$") -> dict[str, Any]:
    """`actual` without the short names the reference does not show, each checked against
    the name it shortens."""
    for field, named in SHORT_NAMES.items():
        if field in actual:
            assert actual[field] == short_name(actual[named]), f"{path}.{field}: {actual[field]!r} for {actual[named]!r}"
    return {k: v for k, v in actual.items() if k not in SHORT_NAMES}


def assert_shows(actual: Any, expected: Any, path: str = "$") -> None:
    """`actual` is what `expected` shows: same keys in the same order, same values to the
    bit with ints and floats as printed, and trimmed lists and maps of the stated size. The
    short names of kernels are checked, and left out where the reference has none."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r} is not an object"
        actual = without_short_names(actual, path) if not SHORT_NAMES.keys() & expected.keys() else actual
        keys = [k for k in expected if k != MORE_KEYS]
        assert list(actual)[: len(keys)] == keys, f"{path}: keys {list(actual)} != {keys}"
        assert len(actual) == len(keys) + expected.get(MORE_KEYS, 0), f"{path}: {len(actual)} keys"
        for key in keys:
            assert_shows(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: {actual!r} is not a list"
        shown, more = expected, 0
        if expected and isinstance(expected[-1], dict) and MORE_ITEMS in expected[-1]:
            shown, more = expected[:-1], expected[-1][MORE_ITEMS]
        assert len(actual) == len(shown) + more, f"{path}: {len(actual)} items, expected {len(shown)} + {more}"
        for i, item in enumerate(shown):
            assert_shows(actual[i], item, f"{path}[{i}]")
    else:
        # json.dumps tells 1 from 1.0 and prints floats exactly.
        assert json.dumps(actual) == json.dumps(expected), f"{path}: {actual!r} != {expected!r}"
