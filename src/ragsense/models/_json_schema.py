"""The JSON-schema subset of structured output: parsing, checking and validating a schema.

Supported schemas (anything else raises :class:`UnsupportedSchemaError` naming the construct): a
top-level ``{"type": "object", "properties": {...}, "required": [...], "additionalProperties": ...}``
whose properties are each one of

* ``{"type": "string"}``, optionally with ``maxLength``;
* ``{"enum": [...]}`` or ``{"const": ...}`` of JSON scalars (optionally with a matching ``type``);
* ``{"type": "boolean"}``;
* ``{"type": "integer"}`` with optional ``minimum``, ``maximum``, ``exclusiveMinimum``,
  ``exclusiveMaximum``;
* ``{"type": "array", "items": <a string or enum schema>}`` with optional ``minItems``, ``maxItems``
  (at most 16 items when ``maxItems`` is not given);
* a nullable string, enum or boolean: ``{"anyOf": [<schema>, {"type": "null"}]}`` (or ``oneOf``, either
  order) or ``{"type": ["string", "null"]}``.

``title``, ``description``, ``default``, ``examples`` and ``$comment`` are allowed anywhere and ignored.
Every property is emitted, in the schema's ``properties`` order, as compact JSON
(``{"reason": "...", "label": "relevant"}``).

>>> parse_schema('{"type": "object", "properties": {"ok": {"type": "boolean"}}}').names
('ok',)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ragsense.errors import CapabilityError

# Items of an array without maxItems; integer ranges enumerated (scored) rather than generated.
DEFAULT_MAX_ITEMS = 16
MAX_ENUMERATED_INTEGERS = 20
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
_JSON_SCALAR = (str, int, float, bool, type(None))


class UnsupportedSchemaError(CapabilityError):
    """The JSON schema uses a construct the local structured decoder does not support."""


# -- parsed schema ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Choice:
    """One of a fixed set of JSON values (enum, const, boolean, small integer range, with null)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class _String:
    max_length: int | None = None
    nullable: bool = False


@dataclass(frozen=True)
class _Integer:
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True)
class _Array:
    items: _Choice | _String
    min_items: int = 0
    max_items: int = DEFAULT_MAX_ITEMS


_Field = _Choice | _String | _Integer | _Array


@dataclass(frozen=True)
class StructuredSchema:
    """A schema the decoder supports: an object's properties, in order."""

    fields: tuple[tuple[str, _Field], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)


def _fail(where: str, what: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(
        f"unsupported JSON schema construct at {where}: {what} (structured output supports an object of "
        "string, enum, boolean, integer, array-of-string and nullable-string properties)"
    )


def _extra_keys(node: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in node:
        if key not in allowed and key not in _ANNOTATIONS:
            raise _fail(where, f"keyword {key!r}")


def _int_keyword(node: Mapping[str, Any], key: str, where: str) -> int | None:
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        raise _fail(where, f"{key!r} must be an integer, got {value!r}")
    return int(value)


def _parse_field(node: Any, where: str, *, in_array: bool = False) -> _Field:
    if not isinstance(node, Mapping):
        raise _fail(where, f"a schema must be an object, got {type(node).__name__}")
    for key in ("anyOf", "oneOf"):
        if key in node:
            return _parse_nullable(node, key, where, in_array)
    if "enum" in node or "const" in node:  # before a type list: null is allowed only when listed
        return _parse_choice(node, where)
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = set(kind)
        if len(kind) != 2 or "null" not in kinds or not all(isinstance(k, str) for k in kind):
            raise _fail(where, f"'type': {kind!r} (only a type plus 'null' is supported)")
        inner = _parse_field({**node, "type": next(k for k in kind if k != "null")}, where)
        return _with_null(inner, where, in_array)
    if kind == "string":
        _extra_keys(node, {"type", "maxLength"}, where)
        max_length = _int_keyword(node, "maxLength", where)
        if max_length is not None and max_length < 0:
            raise _fail(where, "a negative 'maxLength'")
        return _String(max_length)
    if kind == "boolean":
        _extra_keys(node, {"type"}, where)
        return _Choice((True, False))
    if kind == "integer":
        keys = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
        _extra_keys(node, keys, where)
        low, high = _int_keyword(node, "minimum", where), _int_keyword(node, "maximum", where)
        ex_low, ex_high = (_int_keyword(node, k, where) for k in ("exclusiveMinimum", "exclusiveMaximum"))
        if ex_low is not None:
            low = ex_low + 1 if low is None else max(low, ex_low + 1)
        if ex_high is not None:
            high = ex_high - 1 if high is None else min(high, ex_high - 1)
        if low is not None and high is not None:
            if low > high:
                raise _fail(where, f"an empty integer range [{low}, {high}]")
            if high - low < MAX_ENUMERATED_INTEGERS:
                return _Choice(tuple(range(low, high + 1)))
        return _Integer(low, high)
    if kind == "array":
        if in_array:
            raise _fail(where, "nested arrays")
        _extra_keys(node, {"type", "items", "minItems", "maxItems"}, where)
        items = _parse_field(node.get("items", {"type": "string"}), f"{where}.items", in_array=True)
        if not isinstance(items, _Choice | _String) or not _all_strings(items):
            raise _fail(f"{where}.items", "array items other than strings")
        low = _int_keyword(node, "minItems", where) or 0
        high = _int_keyword(node, "maxItems", where)
        high = DEFAULT_MAX_ITEMS if high is None else high
        if low < 0 or high < low:
            raise _fail(where, f"minItems {low} / maxItems {high}")
        return _Array(items, low, high)
    if kind == "object":
        raise _fail(where, "a nested object")
    if kind is None:
        _extra_keys(node, set(), where)  # names $ref, allOf, ... when one is there
        raise _fail(where, "a schema without 'type'")
    raise _fail(where, f"'type': {kind!r}")


def _all_strings(field: _Choice | _String) -> bool:
    if isinstance(field, _String):
        return not field.nullable
    return all(isinstance(v, str) for v in field.values)


def _parse_choice(node: Mapping[str, Any], where: str) -> _Choice:
    _extra_keys(node, {"type", "enum", "const"}, where)
    if "const" in node:
        values: list[Any] = [node["const"]]
        if "enum" in node:
            raise _fail(where, "both 'enum' and 'const'")
    else:
        raw = node["enum"]
        if not isinstance(raw, list) or not raw:
            raise _fail(where, "'enum' must be a non-empty list")
        values = list(raw)
    for v in values:
        if not isinstance(v, _JSON_SCALAR) or (isinstance(v, float) and not math.isfinite(v)):
            raise _fail(where, f"the enum value {v!r} (only strings, numbers, booleans and null)")
    kind = node.get("type")
    if kind is not None:
        kinds = set(kind) if isinstance(kind, list) else {kind}
        for v in values:
            if _json_type(v) not in kinds and not (_json_type(v) == "integer" and "number" in kinds):
                raise _fail(where, f"the enum value {v!r} does not match 'type': {kind!r}")
    unique: dict[str, Any] = {}
    for v in values:
        unique.setdefault(json.dumps(v), v)  # 1 and 1.0 differ in JSON text; both stay
    return _Choice(tuple(unique.values()))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def _parse_nullable(node: Mapping[str, Any], key: str, where: str, in_array: bool) -> _Field:
    _extra_keys(node, {key}, where)
    options = node[key]
    if not isinstance(options, list) or len(options) != 2:
        raise _fail(where, f"{key!r} other than [<schema>, {{'type': 'null'}}]")
    nulls = [o for o in options if isinstance(o, Mapping) and o.get("type") == "null"]
    if len(nulls) != 1:
        raise _fail(where, f"{key!r} other than [<schema>, {{'type': 'null'}}]")
    _extra_keys(nulls[0], {"type"}, f"{where}.{key}")
    other = next(o for o in options if o is not nulls[0])
    return _with_null(_parse_field(other, f"{where}.{key}"), where, in_array)


def _with_null(inner: _Field, where: str, in_array: bool) -> _Field:
    if in_array:
        raise _fail(where, "nullable array items")
    if isinstance(inner, _String):
        return replace(inner, nullable=True)
    if isinstance(inner, _Choice):
        return inner if None in inner.values else _Choice((*inner.values, None))
    raise _fail(where, "a nullable integer or array (only strings, enums and booleans can be null)")


def parse_schema(schema: str | Mapping[str, Any] | StructuredSchema) -> StructuredSchema:
    """Check that ``schema`` (JSON text or a parsed dict) is in the supported subset; raises
    :class:`UnsupportedSchemaError` naming the first unsupported construct."""
    if isinstance(schema, StructuredSchema):
        return schema
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise UnsupportedSchemaError(f"the JSON schema is not valid JSON: {exc}") from None
    if not isinstance(schema, Mapping):
        raise _fail("the top level", f"a schema must be an object, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise _fail("the top level", f"'type': {schema.get('type')!r} (the top level must be an object)")
    _extra_keys(
        schema, {"type", "properties", "required", "additionalProperties", "$schema"}, "the top level"
    )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise _fail("the top level", "'properties' must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise _fail("the top level", f"'required' names a property not in 'properties': {required!r}")
    if not isinstance(schema.get("additionalProperties", False), bool):
        raise _fail("the top level", "an 'additionalProperties' schema")
    fields = tuple((str(name), _parse_field(node, f"properties.{name}")) for name, node in properties.items())
    return StructuredSchema(fields)


# -- validation --------------------------------------------------------------------------------------
def validate_instance(schema: str | Mapping[str, Any] | StructuredSchema, value: Any) -> None:
    """Raise :class:`ValueError` unless ``value`` (parsed JSON) is valid under ``schema`` with every
    property present, as the decoder writes it. Useful to check a remote server's structured reply."""
    parsed = parse_schema(schema)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    for name, field in parsed.fields:
        if name not in value:
            raise ValueError(f"the property {name!r} is missing")
        _check(field, value[name], name)


def _check(field: _Field, value: Any, where: str) -> None:
    if isinstance(field, _Choice):
        if not any(json.dumps(value) == json.dumps(v) for v in field.values):
            raise ValueError(f"{where}: {value!r} is not one of {list(field.values)!r}")
    elif isinstance(field, _String):
        if value is None and field.nullable:
            return
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        if field.max_length is not None and len(value) > field.max_length:
            raise ValueError(f"{where}: longer than maxLength {field.max_length}")
    elif isinstance(field, _Integer):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        if (field.minimum is not None and value < field.minimum) or (
            field.maximum is not None and value > field.maximum
        ):
            raise ValueError(f"{where}: {value} is outside [{field.minimum}, {field.maximum}]")
    else:
        if not isinstance(value, list) or not field.min_items <= len(value) <= field.max_items:
            raise ValueError(f"{where}: expected {field.min_items}-{field.max_items} items, got {value!r}")
        for i, item in enumerate(value):
            _check(field.items, item, f"{where}[{i}]")
