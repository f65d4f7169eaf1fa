"""decode_body must answer exactly as FastAPI with pydantic v2 would, so pydantic is the oracle.

Each case is run through both: FastAPI's body handling (restated in `fastapi_outcome` from
fastapi/routing.py and fastapi/dependencies/utils.py) over a pydantic twin of the schema, and
`decode_body` over the msgspec Struct. Outcomes are compared as JSON text, which tells 1 from
1.0 from true and keeps key order.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal, TypeVar

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from cascade_api.models import SqlQuery, ValidationErrorBody
from cascade_core.runs import RunCreate
from cascade_http.responses import ENCODER
from cascade_http.validation import RequestValidationError, UnparsableBody, decode_body

T = TypeVar("T")


class PydanticRunEntry(BaseModel):
    gpu_config: str
    count: int = Field(ge=1, le=64)


class PydanticRunCreate(BaseModel):
    trace_id: str
    entries: list[PydanticRunEntry] = Field(min_length=1)


# A schema that exercises the constraints and defaults RunCreate does not use.
class Leaf(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=2, max_length=3)]
    n: Annotated[int, msgspec.Meta(gt=-2, lt=3)]
    note: str = "-"


class Tree(msgspec.Struct):
    leaves: Annotated[list[Leaf], msgspec.Meta(min_length=2, max_length=3)]
    sizes: list[int]


class PydanticLeaf(BaseModel):
    name: str = Field(min_length=2, max_length=3)
    n: int = Field(gt=-2, lt=3)
    note: str = "-"


class PydanticTree(BaseModel):
    leaves: list[PydanticLeaf] = Field(min_length=2, max_length=3)
    sizes: list[int]


class PydanticSqlQuery(BaseModel):
    sql: str = Field(min_length=1)
    format: Literal["arrow", "csv", "json", "parquet"] = "json"


# A run entry's `reuse`: a flag, read as pydantic's lax bool reads one.
class Flag(msgspec.Struct):
    on: bool


class PydanticFlag(BaseModel):
    on: bool


ADAPTERS = {
    RunCreate: TypeAdapter(PydanticRunCreate),
    Tree: TypeAdapter(PydanticTree),
    SqlQuery: TypeAdapter(PydanticSqlQuery),
    Flag: TypeAdapter(PydanticFlag),
}


def fastapi_outcome(raw: bytes, schema: type) -> str:
    if raw:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as error:
            issue = {"type": "json_invalid", "loc": ["body", error.pos], "msg": "JSON decode error"}
            return _outcome("422", [{**issue, "input": {}, "ctx": {"error": error.msg}}])
        except Exception:
            return _outcome("400", None)
    else:
        value = None
    if value is None:
        return _outcome("422", [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}])
    try:
        model = ADAPTERS[schema].validate_python(value, from_attributes=True)
    except ValidationError as error:
        return _outcome("422", [{**e, "loc": ["body", *e["loc"]]} for e in error.errors(include_url=False)])
    return _outcome("ok", model.model_dump())


def cascade_outcome(raw: bytes, schema: type) -> str:
    try:
        result = decode_body(raw, schema)
    except RequestValidationError as error:
        return _outcome("422", msgspec.to_builtins(error.issues))
    except UnparsableBody:
        return _outcome("400", None)
    assert type(result) is schema
    return _outcome("ok", msgspec.to_builtins(result))


def _outcome(status: str, payload: object) -> str:
    return json.dumps([status, payload])


def entry(count: object) -> bytes:
    body = {"trace_id": "demo", "entries": [{"gpu_config": "SM86_RTX3070", "count": count}]}
    return json.dumps(body).encode()


COUNTS = [
    *[1, 64, 0, 65, -1, 10**30, -(10**30), True, False, None, [], {}, [1], {"a": 1}],
    *[5.0, 5.5, 1e100, -1e100, 1e19, 9.2e18, -0.0, 64.0, 65.0, 1e15 + 0.5, float("nan"), float("inf")],
    *["5", "5.0", "5.00", "5.", ".5", "5.01", "5.0.0", "1e1", "0x10", "abc", "", " ", "inf", "nan"],
    *[" 5 ", "\t5\n", "\xa05", "\u30005", "\x1c5", "5\x1f", "\u200b5", "+5", "-0", "+-5", "-+5", "--5"],
    *["++5", "- 5", "05", "005", "0", "00", "0.0", "00.0", "-05", "-0.0", "0_5", "0_", "_5", "5_", "5_0"],
    *["5__0", "1_0.0", "5.0_0", "٥", "１", "-", "+", ".", "_", "0.", "\ud800", "5\udfff", "1" * 19, "1_0" * 8],
    *[2.0**63, -(2.0**63), 2.0**63 - 1024, "6" * 4300, "6" * 4301],
    *["-" + "6" * 4299, "-" + "6" * 4300, "6" * 4301 + "x", " " + "6" * 4301, "0" * 4301 + "6", "é" * 2200],
    *[char + "5" for char in map(chr, range(0x3001)) if char.isspace()],
]

BODIES = [
    b"",
    b" ",
    b"null",
    b" null ",
    b"{",
    b'{"trace_id": "demo",}',
    b'{"trace_id": "demo"} x',
    b"\xff\xfe{",
    b"\xef\xbb\xbf{}",
    b'"\xff"',
    b"[" * 100_000,
    b"1" * 5000,
    b"[]",
    b'"x"',
    b"5",
    b"5.5",
    b"true",
    b"NaN",
    b"{}",
    b'{"trace_id": 5}',
    b'{"trace_id": "t", "entries": []}',
    b'{"trace_id": "t", "entries": {}}',
    b'{"trace_id": "t", "entries": "ab"}',
    b'{"trace_id": "t", "entries": null}',
    b'{"trace_id": true, "entries": [null, 5, "x", [], {}, {"gpu_config": 1, "count": 0}, {"count": "x"}]}',
    b'{"trace_id": "t", "entries": [{"gpu_config": "g", "count": 1}], "extra": 1}',
    b'{"trace_id": "t", "trace_id": 5, "entries": [{"gpu_config": "g", "count": 1}]}',
    b'{"trace_id": "\\ud800", "entries": [{"gpu_config": "\\udfff", "count": 1}]}',
    b'{"entries": [{"count": 2, "gpu_config": "g"}], "trace_id": "t"}',
    *[entry(count) for count in COUNTS],
]


SQL_BODIES = [
    b'{"sql": "SELECT 1"}',
    b'{"sql": "SELECT 1", "format": "parquet"}',
    b'{"sql": ""}',
    b'{"format": "csv"}',
    b'{"sql": 1, "format": "xlsx"}',
    b'{"sql": "SELECT 1", "format": "JSON"}',
    b'{"sql": "SELECT 1", "format": null}',
    b'{"sql": "SELECT 1", "format": 1}',
    b'{"sql": "SELECT 1", "format": ["json"]}',
    b'{"sql": "\\ud800"}',
]


@pytest.mark.parametrize(
    ("schema", "raw"),
    [(RunCreate, b) for b in BODIES] + [(SqlQuery, b) for b in SQL_BODIES],
    ids=lambda v: repr(v[:60]) if isinstance(v, bytes) else v.__name__,
)
def test_hand_picked_bodies_answer_as_fastapi_does(schema: type, raw: bytes) -> None:
    assert cascade_outcome(raw, schema) == fastapi_outcome(raw, schema)


TREES = [
    {"leaves": [{"name": "ab", "n": 0}, {"name": "abc", "n": "2", "note": "n"}], "sizes": [1, "2", 3.0]},
    {"leaves": [{"name": "a", "n": -2}, {"name": "abcd", "n": 3}], "sizes": []},
    {"leaves": [{"name": "ab", "n": 0}], "sizes": "x"},
    {"leaves": [{"name": "a", "n": 0}], "sizes": [1]},
    {"leaves": [{"name": "ab", "n": 0}] * 3 + [None], "sizes": [1]},
    {"leaves": [None] * 4, "sizes": [None]},
    {"leaves": [{"name": "\ud800b", "n": 0, "note": 5}, {"name": 5, "n": None}], "sizes": [1.5]},
]


@pytest.mark.parametrize("tree", TREES)
def test_string_and_length_constraints_and_defaults_answer_as_fastapi_does(tree: object) -> None:
    raw = json.dumps(tree).encode()
    assert cascade_outcome(raw, Tree) == fastapi_outcome(raw, Tree)


FLAGS = [
    *[True, False, 0, 1, 2, -1, 10**30, 2**63 - 1, 2**63, -(2**63), 0.0, -0.0, 1.0, 1.5, 2.0, 1e19, float("nan"), float("inf")],
    *["true", "True", "TRUE", "false", "yes", "YES", "no", "on", "off", "t", "f", "y", "n", "1", "0", "2", "", " yes"],
    *["1.0", "tru", "İ", "\u212a", None, [], {}, [True], {"on": True}],
]


@pytest.mark.parametrize("flag", FLAGS, ids=repr)
def test_a_flag_answers_as_fastapi_does(flag: object) -> None:
    raw = json.dumps({"on": flag}).encode()
    assert cascade_outcome(raw, Flag) == fastapi_outcome(raw, Flag)


def test_the_references_example_body() -> None:
    with pytest.raises(RequestValidationError) as raised:
        decode_body(entry(0), RunCreate)
    assert json.loads(ENCODER.encode(ValidationErrorBody(raised.value.issues))) == {
        "detail": [
            {
                "type": "greater_than_equal",
                "loc": ["body", "entries", 0, "count"],
                "msg": "Input should be greater than or equal to 1",
                "input": 0,
                "ctx": {"ge": 1},
            }
        ]
    }


def test_a_valid_body_decodes_to_the_struct_with_coerced_values() -> None:
    body = b'{"trace_id": "demo", "entries": [{"gpu_config": "SM86_RTX3070", "count": " 2.0 "}], "x": 1}'
    assert decode_body(body, RunCreate) == msgspec.convert(
        {"trace_id": "demo", "entries": [{"gpu_config": "SM86_RTX3070", "count": 2}]}, RunCreate
    )


def test_a_schema_it_cannot_validate_is_refused_when_first_used() -> None:
    class Priced(msgspec.Struct):
        price: float

    with pytest.raises(TypeError, match="does not support"):
        decode_body(b'{"price": 1}', Priced)


# Arbitrary JSON, and values near each field's coercion rules, in objects with or without
# the schema's keys.
def containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5), containers, max_leaves=8
)
INT_LIKE = st.from_regex(
    r"[ \t\xa0\x1c]?[+-]{0,2}[0_]{0,2}[0-9_]{0,4}(\.[0_1]{0,2})?[ \n\u3000]?", fullmatch=True
)


def mostly(usual: st.SearchStrategy[T], unusual: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """Draws from `unusual` one time in four, so most cases get past the outer checks."""
    return st.integers(0, 3).flatmap(lambda roll: unusual if roll == 3 else usual)


NEAR_INTS = st.integers(-5, 70) | st.integers(-5, 70).map(float) | st.floats(-5, 70) | INT_LIKE
INTS = mostly(NEAR_INTS, JSON_VALUES)
STRS = mostly(st.text(max_size=4), JSON_VALUES)


def objects(fields: dict[str, st.SearchStrategy[object]]) -> st.SearchStrategy[object]:
    extra = {"other": JSON_VALUES}
    complete = st.fixed_dictionaries(fields, optional=extra)
    return mostly(complete, st.fixed_dictionaries({}, optional=fields | extra) | JSON_VALUES)


ENTRY = objects({"gpu_config": STRS, "count": INTS})
RUN_CREATE = objects({"trace_id": STRS, "entries": st.lists(ENTRY, max_size=3) | JSON_VALUES})
LEAF = objects({"name": STRS, "n": INTS, "note": STRS})
TREE = objects({"leaves": st.lists(LEAF, max_size=4) | JSON_VALUES, "sizes": st.lists(INTS, max_size=3)})


def raw_bodies(values: st.SearchStrategy[object]) -> st.SearchStrategy[bytes]:
    encoded = st.builds(lambda value, ascii: json.dumps(value, ensure_ascii=ascii), values, st.booleans())
    truncated = st.builds(lambda text, end: text[:end], encoded, st.integers(0, 30))
    return mostly(encoded.map(str.encode), truncated.map(str.encode) | st.binary(max_size=12))


@settings(max_examples=700, deadline=None)
@given(raw_bodies(RUN_CREATE))
def test_any_run_create_body_answers_as_fastapi_does(raw: bytes) -> None:
    assert cascade_outcome(raw, RunCreate) == fastapi_outcome(raw, RunCreate)


@settings(max_examples=400, deadline=None)
@given(raw_bodies(TREE))
def test_any_tree_body_answers_as_fastapi_does(raw: bytes) -> None:
    assert cascade_outcome(raw, Tree) == fastapi_outcome(raw, Tree)
