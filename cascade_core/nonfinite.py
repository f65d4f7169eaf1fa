"""The numbers JSON has no form for, as stats maps and SQL answers write them: the strings
"NaN", "Infinity" and "-Infinity", which JavaScript's Number(), Python's float() and DuckDB's
CAST(... AS DOUBLE) read back as the same floats."""

from __future__ import annotations

import math

VALUES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def text(value: float) -> str:
    """A float that is not finite as its string."""
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


def json_value(value: float | None) -> float | str | None:
    """A float as JSON can hold it."""
    return value if value is None or math.isfinite(value) else text(value)
