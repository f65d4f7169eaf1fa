"""Request-body validation that answers exactly as FastAPI with pydantic v2 would.

The API contract promises FastAPI's 422 bodies, so this reproduces what FastAPI does with a
JSON body: parse it with `json.loads`, treat an empty or `null` body as missing, then validate
the value in pydantic's lax Python mode with `from_attributes=True` (FastAPI's
`ModelField.validate`), reporting every failing field with pydantic's error type, message,
input and context, its location prefixed by "body".

The schema is never restated here: validators are built from `msgspec.inspect.type_info`, so
the msgspec Struct stays the single definition of a body. Only the node types and constraints
that request bodies use are supported; any other raises TypeError when the validator is built,
so a schema change cannot be silently left unchecked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TypeVar, cast

from msgspec import inspect

from cascade_api.models import ValidationIssue

T = TypeVar("T")
Loc = list[str | int]
Validator = Callable[[object, Loc], object]


class RequestValidationError(Exception):
    """The body is invalid: FastAPI answers 422 with `{"detail": issues}`."""

    def __init__(self, issues: list[ValidationIssue]) -> None:
        super().__init__(issues)
        self.issues = issues


class UnparsableBody(Exception):
    """`json.loads` failed with something other than a JSONDecodeError: bytes that are not
    UTF-8/16/32, an integer literal past Python's 4300-digit limit, nesting past the recursion
    limit. FastAPI answers 400 with `{"detail": "There was an error parsing the body"}`."""


def decode_body(raw: bytes, type_: type[T]) -> T:
    """Decode a JSON request body into `type_`, a msgspec Struct, coercing as pydantic does."""
    try:
        # FastAPI does not parse an empty body; json.loads is what Starlette's Request.json uses.
        value = json.loads(raw) if raw else None
    except json.JSONDecodeError as error:
        ctx: dict[str, object] = {"error": error.msg}
        issue = ValidationIssue(type="json_invalid", loc=["body", error.pos], msg="JSON decode error", input={}, ctx=ctx)
        raise RequestValidationError([issue]) from error
    except (ValueError, RecursionError) as error:
        raise UnparsableBody(str(error)) from error
    if value is None:
        # FastAPI reports a missing body itself, before pydantic sees it, with input None.
        raise RequestValidationError(_issue("missing", ["body"], None).issues)
    try:
        return cast(T, _validator(type_)(value, ["body"]))
    except _Invalid as invalid:
        raise RequestValidationError(invalid.issues) from None


# pydantic-core's message templates (errors/types.rs), formatted with the issue's ctx.
_MESSAGES = {
    "missing": "Field required",
    "model_attributes_type": "Input should be a valid dictionary or object to extract fields from",
    "list_type": "Input should be a valid list",
    "dict_type": "Input should be a valid dictionary",
    "too_short": "List should have at least {min_length} item{s} after validation, not {actual_length}",
    "too_long": "List should have at most {max_length} item{s} after validation, not {actual_length}",
    "string_type": "Input should be a valid string",
    "string_unicode": "Input should be a valid string, unable to parse raw data as a unicode string",
    "string_too_short": "String should have at least {min_length} character{s}",
    "string_too_long": "String should have at most {max_length} character{s}",
    "bool_type": "Input should be a valid boolean",
    "bool_parsing": "Input should be a valid boolean, unable to interpret input",
    "int_type": "Input should be a valid integer",
    "int_parsing": "Input should be a valid integer, unable to parse string as an integer",
    "int_parsing_size": "Unable to parse input string as an integer, exceeded maximum size",
    "int_from_float": "Input should be a valid integer, got a number with a fractional part",
    "finite_number": "Input should be a finite number",
    "literal_error": "Input should be {expected}",
    "less_than_equal": "Input should be less than or equal to {le}",
    "less_than": "Input should be less than {lt}",
    "greater_than_equal": "Input should be greater than or equal to {ge}",
    "greater_than": "Input should be greater than {gt}",
    "extra_forbidden": "Extra inputs are not permitted",
    "string_pattern_mismatch": "String should match pattern '{pattern}'",
}


class _Invalid(Exception):
    """Carries the issues of one value up to the container that collects them."""

    def __init__(self, issues: list[ValidationIssue]) -> None:
        super().__init__(issues)
        self.issues = issues


def _issue(type_: str, loc: Loc, value: object, ctx: dict[str, object] | None = None) -> _Invalid:
    context = ctx or {}
    # pydantic pluralises a length message's noun by its limit, not by the actual length.
    plural = "" if context.get("min_length", context.get("max_length")) == 1 else "s"
    message = _MESSAGES[type_].format(**context, s=plural)
    return _Invalid([ValidationIssue(type=type_, loc=loc, msg=message, input=value, ctx=ctx)])


_validators: dict[type, Validator] = {}  # a body type's validator, built once


def _validator(type_: type) -> Validator:
    found = _validators.get(type_)
    if found is None:
        found = _validators[type_] = _build(inspect.type_info(type_))
    return found


def _build(node: inspect.Type) -> Validator:
    if isinstance(node, inspect.Metadata):
        return _build(node.type)
    if isinstance(node, inspect.StructType):
        return _struct_validator(node)
    if isinstance(node, inspect.ListType):
        return _list_validator(node)
    if isinstance(node, inspect.DictType) and node.min_length is None and node.max_length is None:
        return _dict_validator(node)
    if isinstance(node, inspect.IntType) and node.multiple_of is None:
        return _int_validator(node)
    if isinstance(node, inspect.StrType):
        return _str_validator(node)
    if isinstance(node, inspect.UnionType):
        return _union_validator(node)
    if isinstance(node, inspect.LiteralType) and all(isinstance(v, str) for v in node.values):
        return _literal_validator(node)
    if isinstance(node, inspect.BoolType):
        return _lax_bool
    raise TypeError(f"request validation does not support {node!r}")


def _struct_validator(node: inspect.StructType) -> Validator:
    if node.array_like or node.tag_field is not None:
        raise TypeError(f"request validation does not support {node.cls.__name__}'s Struct options")
    fields = [(field, _build(field.type)) for field in node.fields]
    # A body whose Struct forbids unknown fields (pydantic's `extra="forbid"`): what it does
    # not take is refused, not ignored.
    known = {field.encode_name for field in node.fields} if node.forbid_unknown_fields else None

    def validate(value: object, loc: Loc) -> object:
        # No JSON value is an object pydantic could read attributes from, hence this type.
        if not isinstance(value, dict):
            raise _issue("model_attributes_type", loc, value)
        issues: list[ValidationIssue] = []
        kwargs: dict[str, object] = {}
        for field, validate_field in fields:
            field_loc = [*loc, field.encode_name]
            try:
                if field.encode_name in value:
                    kwargs[field.name] = validate_field(value[field.encode_name], field_loc)
                elif field.required:
                    raise _issue("missing", field_loc, value)
            except _Invalid as invalid:
                issues.extend(invalid.issues)
        if known is not None:
            issues += [_issue("extra_forbidden", [*loc, name], value[name]).issues[0] for name in value if name not in known]
        if issues:
            raise _Invalid(issues)
        return node.cls(**kwargs)

    return validate


def _union_validator(node: inspect.UnionType) -> Validator:
    """An object of one Struct, one of some strings, or null (a run entry's `split`): told
    apart by the JSON value's kind, as msgspec decodes them; or one other type, or null (a
    run's `name`, a run entry's `options`)."""
    kinds = [t for t in node.types if not isinstance(t, inspect.NoneType)]
    if len(kinds) == 1 and len(node.types) == 2 and not isinstance(kinds[0], inspect.StructType | inspect.LiteralType):
        validate_kind = _build(kinds[0])
        return lambda value, loc: None if value is None else validate_kind(value, loc)
    structs = [t for t in node.types if isinstance(t, inspect.StructType)]
    values = [v for t in node.types if isinstance(t, inspect.LiteralType) for v in t.values]
    literals = [v for v in values if isinstance(v, str)]
    others = [t for t in node.types if not isinstance(t, inspect.StructType | inspect.LiteralType | inspect.NoneType)]
    if len(structs) > 1 or others or len(literals) != len(values):
        raise TypeError(f"request validation does not support {node!r}")
    validate_struct = _struct_validator(structs[0]) if structs else None
    nullable = any(isinstance(t, inspect.NoneType) for t in node.types)
    expected = _expected(literals)

    def validate(value: object, loc: Loc) -> object:
        if value is None and nullable:
            return None
        if isinstance(value, dict) and validate_struct is not None:
            return validate_struct(value, loc)
        if value in literals:
            return value
        if validate_struct is not None and not isinstance(value, str):
            raise _issue("model_attributes_type", loc, value)
        raise _issue("literal_error", loc, value, {"expected": expected})

    return validate


def _list_validator(node: inspect.ListType) -> Validator:
    validate_item = _build(node.item_type)

    def validate(value: object, loc: Loc) -> object:
        if not isinstance(value, list):
            raise _issue("list_type", loc, value)
        # pydantic stops at the first item past max_length and reports only that.
        if node.max_length is not None and len(value) > node.max_length:
            ctx = {"field_type": "List", "max_length": node.max_length, "actual_length": len(value)}
            raise _issue("too_long", loc, value, ctx)
        issues: list[ValidationIssue] = []
        items: list[object] = []
        for index, item in enumerate(value):
            try:
                items.append(validate_item(item, [*loc, index]))
            except _Invalid as invalid:
                issues.extend(invalid.issues)
        if issues:
            raise _Invalid(issues)
        # pydantic checks min_length only once every item is valid.
        if node.min_length is not None and len(items) < node.min_length:
            ctx = {"field_type": "List", "min_length": node.min_length, "actual_length": len(items)}
            raise _issue("too_short", loc, value, ctx)
        return items

    return validate


def _dict_validator(node: inspect.DictType) -> Validator:
    """A JSON object (whose keys are strings), each value validated, located by its key."""
    if not isinstance(node.key_type, inspect.StrType) or node.key_type.pattern is not None:
        raise TypeError(f"request validation does not support {node!r}")
    validate_value = _build(node.value_type)

    def validate(value: object, loc: Loc) -> object:
        if not isinstance(value, dict):
            raise _issue("dict_type", loc, value)
        issues: list[ValidationIssue] = []
        items: dict[str, object] = {}
        for key, item in value.items():
            try:
                items[key] = validate_value(item, [*loc, key])
            except _Invalid as invalid:
                issues.extend(invalid.issues)
        if issues:
            raise _Invalid(issues)
        return items

    return validate


def _str_validator(node: inspect.StrType) -> Validator:
    constrained = node.min_length is not None or node.max_length is not None or node.pattern is not None
    pattern = None if node.pattern is None else re.compile(node.pattern)

    def validate(value: object, loc: Loc) -> object:
        if not isinstance(value, str):
            raise _issue("string_type", loc, value)
        # Only a constrained str is read as Rust text, which a lone surrogate cannot be.
        if constrained and not _is_unicode(value):
            raise _issue("string_unicode", loc, value)
        if node.min_length is not None and len(value) < node.min_length:
            raise _issue("string_too_short", loc, value, {"min_length": node.min_length})
        if node.max_length is not None and len(value) > node.max_length:
            raise _issue("string_too_long", loc, value, {"max_length": node.max_length})
        if pattern is not None and not pattern.search(value):
            raise _issue("string_pattern_mismatch", loc, value, {"pattern": node.pattern})
        return value

    return validate


def _literal_validator(node: inspect.LiteralType) -> Validator:
    # pydantic names the values in the Literal's order, msgspec's `values` are sorted: the
    # two agree for a Literal declared in sorted order.
    values = [v for v in node.values if isinstance(v, str)]
    if values != sorted(values):
        raise TypeError(f"request validation needs {node!r} declared in sorted order")
    expected = _expected(values)

    def validate(value: object, loc: Loc) -> object:
        if not isinstance(value, str) or value not in values:
            raise _issue("literal_error", loc, value, {"expected": expected})
        return value

    return validate


def _expected(values: list[str]) -> str:
    """A literal_error's `expected`, as pydantic words it: 'a', 'b' or 'c'."""
    names = [repr(v) for v in values]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _int_validator(node: inspect.IntType) -> Validator:
    def validate(value: object, loc: Loc) -> object:
        number = _lax_int(value, loc)
        # In pydantic-core's order (ConstrainedIntValidator); only the first failure is reported.
        if node.le is not None and number > node.le:
            raise _issue("less_than_equal", loc, value, {"le": node.le})
        if node.lt is not None and number >= node.lt:
            raise _issue("less_than", loc, value, {"lt": node.lt})
        if node.ge is not None and number < node.ge:
            raise _issue("greater_than_equal", loc, value, {"ge": node.ge})
        if node.gt is not None and number <= node.gt:
            raise _issue("greater_than", loc, value, {"gt": node.gt})
        return number

    return validate


# pydantic-core's lax bool (input_python.rs validate_bool, input/shared.rs str_as_bool), for JSON's values.
_BOOL_WORDS = {"0": False, "off": False, "f": False, "false": False, "n": False, "no": False,
               "1": True, "on": True, "t": True, "true": True, "y": True, "yes": True}  # fmt: skip
_I64 = range(-(2**63), 2**63)


def _lax_bool(value: object, loc: Loc) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = _BOOL_WORDS.get(value.lower())
        if word is None:
            raise _issue("bool_parsing", loc, value)
        return word
    number = value if isinstance(value, int) else int(value) if isinstance(value, float) and value.is_integer() else None
    if number is None or number not in _I64:  # a fraction, or past an i64: not a number it reads
        raise _issue("bool_type", loc, value)
    if number not in (0, 1):
        raise _issue("bool_parsing", loc, value)
    return number == 1


def _is_unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


# pydantic-core's lax int (input_python.rs validate_int, input/shared.rs), for JSON's values.

# jiter's integer grammar, JSON's: no "+", no leading zero, ASCII digits only.
_JSON_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_JSON_INT_PREFIX = re.compile(r"-?([1-9][0-9]*)")
# jiter refuses an integer of more digits than Python's int-from-str limit.
_MAX_INT_DIGITS = 4300
# Rust's str::trim strips Unicode White_Space; Python's str.strip() would also strip \x1c-\x1f.
_RUST_WHITESPACE = "".join(
    [*"\t\n\x0b\x0c\r \x85\xa0\u1680", *map(chr, range(0x2000, 0x200B)), *"\u2028\u2029\u202f\u205f\u3000"]
)


def _lax_int(value: object, loc: Loc) -> int:
    if isinstance(value, int):  # bool too: lax mode takes True as 1
        return int(value)
    if isinstance(value, float):
        return _float_as_int(value, loc)
    if isinstance(value, str):
        return _str_as_int(value, loc)
    raise _issue("int_type", loc, value)


def _float_as_int(value: float, loc: Loc) -> int:
    if not math.isfinite(value):
        raise _issue("finite_number", loc, value)
    if not value.is_integer():
        raise _issue("int_from_float", loc, value)
    # The bounds of an i64, compared in f64 as Rust does.
    if not -(2.0**63) < value < 2.0**63:
        raise _issue("int_parsing_size", loc, value)
    return int(value)


def _str_as_int(value: str, loc: Loc) -> int:
    if not _is_unicode(value):
        raise _issue("string_unicode", loc, value)
    number = _json_int(value)
    if number is not None:
        return number
    # jiter gives up on a long run of digits before looking at what follows it.
    prefix = _JSON_INT_PREFIX.match(value)
    if prefix and len(prefix.group(1)) > _MAX_INT_DIGITS:
        raise _issue("int_parsing_size", loc, value)
    cleaned = _clean_int_str(value)
    number = None if cleaned is None else _json_int(cleaned)
    if number is None:
        raise _issue("int_parsing", loc, value)
    return number


def _json_int(text: str) -> int | None:
    match = _JSON_INT.fullmatch(text)
    return int(text) if match and len(match.group(1)) <= _MAX_INT_DIGITS else None


def _clean_int_str(text: str) -> str | None:
    """pydantic-core's clean_int_str: drops surrounding whitespace, one "+" or "-" (kept), leading
    zeros, a ".000" tail and single underscores between digits; None if nothing was dropped."""
    original_length = len(text)
    text = text.strip(_RUST_WHITESPACE)
    if text.startswith("+"):
        if text.startswith("+-"):
            return None
        text = text[1:]
    sign = ""
    if text.startswith("-"):
        if text.startswith(("--", "-+")):
            return None
        sign, text = "-", text[1:]
    stripped = _strip_leading_zeros(text)
    if stripped is None:
        return None
    text = stripped
    point = text.find(".")
    if point >= 0 and text[point + 1 :] and not text[point + 1 :].strip("0"):
        text = text[:point]
    if "_" in text and not text.startswith("_") and not text.endswith("_") and "__" not in text:
        return sign + text.replace("_", "")
    if len(text) == original_length:
        return None
    return sign + text


def _strip_leading_zeros(text: str) -> str | None:
    """pydantic-core's strip_leading_zeros: keeps the zero before a "." and the last of all zeros;
    None if the text does not start like a number."""
    if not text or text[0] not in "0123456789-":
        return None
    if text[0] != "0":
        return text
    for index in range(1, len(text)):
        char = text[index]
        if char in "0_":
            continue
        if char in "123456789-":
            return text[index:]
        if char == ".":
            return text[index - 1 :]
        return None
    return text[-1]
