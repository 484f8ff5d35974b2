"""``ItemFilter`` as a Milvus filter expression, with the files backend's matching rules.

Milvus's expression strings cannot escape every character (no ``\\n`` or ``\\uXXXX`` in milvus-lite
2.5) and have no test for a JSON null, so filters do not compare raw values: every item stores a
JSON object ``filter_keys`` of hashed key -> hashed value (its label under the reserved key
``label``), and a filter becomes ``filter_keys["<hash of key>"] == "<hash of value>" and ...``:
hex strings only, never an escaping problem. A value's hash covers its JSON type the way
``items_db`` compares: numbers by value (3 equals 3.0), a boolean never equals a number, null only
equals null.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.indexing.store.shared.item_filter import LABEL_KEY, ItemFilter, Scalar


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


def filter_keys(label: str, metadata: Mapping[str, Any]) -> dict[str, str]:
    """What an item stores for filters: its metadata's scalar pairs and its label, hashed."""
    pairs = {text_key(key): value_key(value) for key, value in metadata.items() if _is_scalar(value)}
    pairs[text_key(LABEL_KEY)] = value_key(label)
    return pairs


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def filter_expression(where: ItemFilter) -> str:
    """The Milvus expression matching exactly the items that pass ``where``."""
    pairs: list[tuple[str, Scalar]] = [(LABEL_KEY, where.label)] if where.label is not None else []
    pairs += list(where.metadata)
    if not pairs:
        return ""
    return " and ".join(f'filter_keys["{text_key(key)}"] == "{value_key(value)}"' for key, value in pairs)


def in_expression(field: str, values: Sequence[int | str]) -> str:
    """``field in [...]`` for ids or hex keys (values that need no escaping)."""
    return f"{field} in {json.dumps(list(values))}"
