"""Rows as the API's Structs, field by field name."""

from __future__ import annotations

from typing import TypeVar

import msgspec

S = TypeVar("S", bound=msgspec.Struct)


def from_row(api_type: type[S], row: object, **given: object) -> S:
    """An `api_type` whose fields are the row's attributes of the same names, but those
    `given`. Built, not validated: the read model holds what its events said, and an API
    limit tightened since must not hide it."""
    fields = {name: getattr(row, name) for name in api_type.__struct_fields__ if name not in given}
    return api_type(**fields, **given)
