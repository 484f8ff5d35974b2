"""``ItemFilter`` as an SQL condition over ``items.sqlite`` (``items_db``): the files backend's filter.

The label is a column; metadata is JSON text, read with ``json_type`` / ``json_extract`` so JSON types
are kept: numbers compare by value (3 equals 3.0), booleans and null only with themselves, a range
(``$gt`` ...) only with numbers. ``$ne`` is the negation of ``$eq`` (an item without the key passes).
Rows whose JSON SQLite cannot parse (never written by ``insert``) match no metadata test instead of
failing the whole query.
"""

from __future__ import annotations

import json
from typing import Any

from retrieval.indexing.store.shared.items.filter_conditions import Condition, Scalar
from retrieval.indexing.store.shared.items.item_filter import LABEL_KEY, ItemFilter

_RANGES = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_NUMBER = "json_type(metadata, ?) IN ('integer', 'real')"


def filter_sql(where: ItemFilter) -> tuple[str, list[Any]]:
    """(an SQL condition, its parameters): true for the items that pass every condition of ``where``."""
    clauses, params = ["1"], []
    for condition in where.conditions:
        clause, values = _label_test(condition) if condition.key == LABEL_KEY else _metadata_test(condition)
        clauses.append(clause)
        params += values
    return " AND ".join(clauses), params


def _label_test(condition: Condition) -> tuple[str, list[Any]]:
    if condition.op == "$in":
        return f"label IN ({','.join('?' * len(condition.value))})", list(condition.value)
    return ("label = ?" if condition.op == "$eq" else "label != ?"), [condition.value]


def _metadata_test(condition: Condition) -> tuple[str, list[Any]]:
    path, op = f'$."{condition.key}"', condition.op
    if op == "$exists":
        return f"(json_valid(metadata) AND json_type(metadata, ?) IS NOT NULL) = {int(condition.value)}", [path]
    if op in _RANGES:
        test = f"{_NUMBER} AND json_extract(metadata, ?) {_RANGES[op]} ?"
        return f"COALESCE(CASE WHEN json_valid(metadata) THEN {test} END, 0)", [path, path, condition.value]
    values = condition.value if op == "$in" else (condition.value,)
    tests, params = [], []
    for value in values:
        test, more = _equal_test(path, value)
        tests.append(test)
        params += more
    either = f"COALESCE(CASE WHEN json_valid(metadata) THEN ({' OR '.join(tests)}) END, 0)"
    return (f"NOT {either}" if op == "$ne" else either), params


def _equal_test(path: str, value: Scalar) -> tuple[str, list[Scalar]]:
    """True when the JSON ``metadata`` holds ``value`` at ``path``, JSON types kept."""
    if value is None or isinstance(value, bool):
        return f"COALESCE(json_type(metadata, ?) = '{json.dumps(value)}', 0)", [path]
    kinds = "'text'" if isinstance(value, str) else "'integer', 'real'"
    return f"COALESCE(json_type(metadata, ?) IN ({kinds}) AND json_extract(metadata, ?) = ?, 0)", [path, path, value]
