"""``ItemFilter`` as a Milvus filter expression, with the files backend's matching rules.

Milvus's expression strings cannot escape every character (no ``\\n`` or ``\\uXXXX`` in milvus-lite
2.5) and have no test for a JSON null, so filters do not compare raw values: every item stores a
JSON object ``filter_keys`` of hashed key -> hashed value (its label under the reserved key
``label``), and a filter becomes ``filter_keys["<hash of key>"] == "<hash of value>" and ...``:
hex strings only, never an escaping problem. A value's hash covers its JSON type the way
``items_db`` compares: numbers by value (3 equals 3.0), a boolean never equals a number, null only
equals null. A number is also stored as itself under the key's hash + ``_n`` (``$gt`` ... compare
it; a boolean is never stored there), and every key has a presence mark, its hash + ``_p`` = 1
(``$exists``: milvus-lite has no ``exists`` and no ``not``). ``!=`` on a JSON key is true where the
key is missing, so ``$ne`` and ``$exists: false`` match items without the key, as in SQLite. A
collection with items written before the ``_n`` and ``_p`` marks existed refuses range and ``$exists``
filters with a sentence asking for a rebuild (``retrieval index build --backend milvus``: a new collection;
``retrieval index rebuild`` is the files backend's).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.indexing.store.shared.items.filter_conditions import Condition, Scalar, is_number
from retrieval.indexing.store.shared.items.item_filter import LABEL_KEY, ItemFilter

_PRESENT, _NUMBER = "_p", "_n"  # suffixes of a hashed key: its presence mark, its number
_RANGES = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
MARKED_OPERATORS = frozenset({*_RANGES, "$exists"})
"""The operators that read the marks."""


def text_key(text: str) -> str:
    """A short hex digest of a string (a path, a key): 128 bits, so no collisions in practice."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def value_key(value: Scalar) -> str:
    """The digest of a metadata value, tagged with its JSON type (numbers in one canonical form)."""
    if value is None or isinstance(value, bool):
        return text_key(f"v:{json.dumps(value)}")
    if isinstance(value, int | float):
        return text_key(f"n:{_number(value)}")
    return text_key(f"s:{value}")


def _number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def filter_keys(label: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What an item stores for filters: for each scalar metadata pair and its label, the hashed key ->
    the hashed value, the key's presence mark (``$exists``) and, for a number, the number (ranges)."""
    pairs: dict[str, Any] = {}
    for key, value in [*metadata.items(), (LABEL_KEY, label)]:
        if _is_scalar(value):
            hashed = text_key(key)
            pairs[hashed], pairs[hashed + _PRESENT] = value_key(value), 1
            if is_number(value):
                pairs[hashed + _NUMBER] = value
    return pairs


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def filter_expression(where: ItemFilter) -> str:
    """The Milvus expression matching exactly the items that pass ``where``."""
    return " and ".join(_condition(condition) for condition in where.conditions)


def _condition(condition: Condition) -> str:
    hashed, op = text_key(condition.key), condition.op
    field = f'filter_keys["{hashed}"]'
    if op == "$exists":
        return presence_expression(condition.key).replace("==", "==" if condition.value else "!=")
    if op in _RANGES:
        return f'filter_keys["{hashed}{_NUMBER}"] {_RANGES[op]} {_number_literal(condition.value)}'
    if op == "$in":
        return f"{field} in {json.dumps([value_key(value) for value in condition.value])}"
    return f'{field} {"==" if op == "$eq" else "!="} "{value_key(condition.value)}"'


def presence_expression(key: str) -> str:
    """True for the items that have the metadata ``key`` (its presence mark)."""
    return f'filter_keys["{text_key(key)}{_PRESENT}"] == 1'


def unmarked_expression() -> str:
    """True for the items written before the number and presence marks (their label has no mark)."""
    return presence_expression(LABEL_KEY).replace("==", "!=")


def _number_literal(value: int | float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def in_expression(field: str, values: Sequence[int | str]) -> str:
    """``field in [...]`` for ids or hex keys (values that need no escaping)."""
    return f"{field} in {json.dumps(list(values))}"
