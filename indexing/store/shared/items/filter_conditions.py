"""The operators of the filter language: one key's JSON value in a filter -> ``Condition``s.

A key's value is a scalar (equality, the form filters always had) or an object of operators, all of
which must hold: ``$eq`` / ``$ne`` (a scalar; ``$ne`` also matches items without the key), ``$in``
(a non-empty array of at most ``MAX_IN`` scalars), ``$gt`` / ``$gte`` / ``$lt`` / ``$lte`` (a
number; only number values match, never a boolean) and ``$exists`` (true or false). The reserved
key ``label`` takes ``$eq``, ``$ne`` and ``$in`` of strings. Anything else (an unknown operator, an
array where a scalar is needed, an empty object) is a one-sentence ``DataError``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.unicode_text import shown

Scalar = str | int | float | bool | None
Operator = Literal["$eq", "$ne", "$in", "$gt", "$gte", "$lt", "$lte", "$exists"]
RANGE_OPERATORS: tuple[Operator, ...] = ("$gt", "$gte", "$lt", "$lte")
OPERATORS: tuple[Operator, ...] = ("$eq", "$ne", "$in", *RANGE_OPERATORS, "$exists")
LABEL_OPERATORS: tuple[Operator, ...] = ("$eq", "$ne", "$in")
MAX_IN = 100
"""Values of one ``$in``."""


@dataclass(frozen=True)
class Condition:
    """One test of one key: ``value`` is a scalar, a tuple of scalars (``$in``) or a bool (``$exists``)."""

    key: str
    op: Operator
    value: Any

    def to_json(self) -> Any:
        return list(self.value) if self.op == "$in" else self.value


def is_scalar(value: object) -> bool:
    """JSON scalars SQLite can compare: finite floats, 64-bit integers, strings, booleans, null."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**63
    return value is None or isinstance(value, str | bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and is_scalar(value)


def conditions_of(key: str, value: Any, what: str, *, is_label: bool) -> list[Condition]:
    """The conditions one key of a filter states (see the module docstring)."""
    if isinstance(value, dict):
        if not value:
            raise DataError(
                f"{what}: the value of '{key}' is an empty object; give operators such as {{\"$in\": [...]}}"
            )
        return [_condition(key, op, given, what, is_label) for op, given in value.items()]
    if isinstance(value, list):
        raise DataError(
            f'{what}: \'{key}\' has an array; to match any of several values write {{"{key}": {{"$in": [...]}}}}'
        )
    return [_condition(key, "$eq", value, what, is_label)]


def _condition(key: str, op: str, value: Any, what: str, is_label: bool) -> Condition:
    if op not in OPERATORS:
        raise DataError(
            f"{what}: '{_shown(op)}' under '{key}' is not an operator; known: {', '.join(OPERATORS)}"
            if op.startswith("$")
            else f"{what}: '{key}' holds an object; metadata values are scalars, and an object here takes "
            f"operators ({', '.join(OPERATORS)})"
        )
    if is_label and op not in LABEL_OPERATORS:
        raise DataError(f"{what}: '{key}' (the item's label) takes {', '.join(LABEL_OPERATORS)} only, not {op}")
    if op == "$in":
        return Condition(key, op, _in_values(key, value, what, is_label))
    if op == "$exists":
        if not isinstance(value, bool):
            raise DataError(f"{what}: '{key}': $exists takes true or false, got {_json(value)}")
        return Condition(key, op, value)
    if op in RANGE_OPERATORS and not is_number(value):
        raise DataError(f"{what}: '{key}': {op} takes a number, got {_json(value)}")
    return Condition(key, op, _scalar(key, op, value, what, is_label))


def _in_values(key: str, value: Any, what: str, is_label: bool) -> tuple[Scalar, ...]:
    if not isinstance(value, list) or not value:
        raise DataError(f"{what}: '{key}': $in takes a non-empty array of values, got {_json(value)}")
    if len(value) > MAX_IN:
        raise DataError(f"{what}: '{key}': $in has {len(value)} values; at most {MAX_IN} are allowed")
    return tuple(_scalar(key, "$in", item, what, is_label) for item in value)


def _scalar(key: str, op: str, value: Any, what: str, is_label: bool) -> Scalar:
    if is_label and not isinstance(value, str):
        raise DataError(f"{what}: '{key}' must be a string (the exact label), got {_json(value)}")
    if not is_scalar(value):
        raise DataError(f"{what}: '{key}': {op} takes a string, number, true, false or null, got {_json(value)}")
    return value


def _json(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(text: str) -> str:
    return shown(text if len(text) <= 40 else text[:37] + "...")
