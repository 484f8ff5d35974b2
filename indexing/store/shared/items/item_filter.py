"""Per-item metadata and the search filter over it: the rules ``POST /items``, ``retrieval index add
--metadata`` and the ``filter`` of ``/search`` and ``/items/{id}/similar`` share.

Metadata is a JSON object of string keys to scalars (string, number, boolean or null): at most
``MAX_KEYS`` keys of at most ``MAX_KEY_CHARS`` characters, ``MAX_JSON_BYTES`` of JSON in all, no
key or string holding a lone surrogate or NUL (``unicode_text.text_problem``: no store can encode or
match it), and JSON text nested at most ``MAX_JSON_DEPTH`` levels (checked before parsing: 2,000 brackets would exhaust the parser's recursion).
The key ``label`` is reserved: in a filter it matches the item's label, every other key a metadata
value, and all keys must match. A key's value is a scalar (equality: numbers by value, so 3 equals
3.0; a boolean never equals a number) or an object of operators (``filter_conditions``: ``$in``,
``$ne``, ``$gt`` ..., ``$exists``). ``items_db.ItemsDb.matching_ids`` turns a filter into the ids
that pass it, ``milvus_filter`` into a Milvus expression.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.unicode_text import shown, text_problem
from retrieval.indexing.store.shared.items.filter_conditions import Condition, Scalar, conditions_of, is_scalar

MAX_KEYS = 32
MAX_KEY_CHARS = 64
MAX_JSON_BYTES = 4096
MAX_JSON_DEPTH = 3
"""Brackets open at once: an array of objects of scalars needs 2, one level more is allowed so that a
nested value gets the sentence about scalars."""
LABEL_KEY = "label"
_KEY_FORBIDDEN = '"\\'  # a key is quoted into an SQLite JSON path ($."key"), which cannot escape these


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` decoded as a JSON object; anything else is a DataError naming ``what``."""
    value = _load_json(text, what, MAX_JSON_BYTES)
    if not isinstance(value, dict):
        raise DataError(f'{what} must be a JSON object such as {{"color": "red"}}, got {_json_type(value)}')
    return value


def _load_json(text: str, what: str, limit: int) -> Any:
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        raise DataError(f"{what} is longer than {limit} bytes of JSON")
    if (depth := json_depth(text)) > MAX_JSON_DEPTH:
        raise DataError(
            f"{what} nests {depth} levels deep; at most {MAX_JSON_DEPTH} are allowed "
            '(send a flat object such as {"color": "red"})'
        )
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as error:
        raise DataError(f'{what} holds the key "{error}" twice; send each key once') from None
    except ValueError as error:
        raise DataError(f'{what} is not valid JSON ({error}); send an object such as {{"color": "red"}}') from None


class _DuplicateKeyError(ValueError):
    """A JSON object naming one key twice (``json.loads`` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        raise _DuplicateKeyError(next(key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1))
    return found


def json_depth(text: str) -> int:
    """The most brackets (``[`` and ``{``) open at once in JSON text, outside its strings; read in one
    pass without parsing, so hostile nesting is measured, not recursed into."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _json_type(value: object) -> str:
    return {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}.get(type(value), "a number")


def check_metadata(value: Mapping[str, Any], what: str = "metadata") -> dict[str, Scalar]:
    """A copy of ``value`` if it is valid item metadata (see the module docstring), else a DataError."""
    if isinstance(value, Mapping) and not value:  # most items added by vector: nothing to check or measure
        return {}
    checked = _check_pairs(value, what)
    if LABEL_KEY in checked:
        raise DataError(f"{what}: the key '{LABEL_KEY}' is reserved for the item's label; give the label separately")
    if len(json.dumps(checked).encode("utf-8")) > MAX_JSON_BYTES:
        raise DataError(f"{what} is longer than {MAX_JSON_BYTES} bytes of JSON")
    return checked


def parse_metadata(text: str, what: str = "metadata") -> dict[str, Scalar]:
    """Metadata given as JSON text (a form field, a command-line option)."""
    return check_metadata(parse_json_object(text, what), what)


def parse_metadata_for(text: str, count: int, what: str = "metadata") -> list[dict[str, Scalar]]:
    """Metadata of ``count`` items: one JSON object for all of them, or a JSON array of ``count`` objects."""
    value = _load_json(text, what, MAX_JSON_BYTES * max(count, 1))
    if isinstance(value, dict):
        checked = check_metadata(value, what)
        return [dict(checked) for _ in range(count)]
    if not isinstance(value, list):
        raise DataError(f'{what} must be a JSON object such as {{"color": "red"}}, got {_json_type(value)}')
    if len(value) != count or not all(isinstance(item, dict) for item in value):
        raise DataError(f"{what}: send one JSON object for every image, or an array of {count} objects (one each)")
    return [check_metadata(item, f"{what}[{n}]") for n, item in enumerate(value)]


@dataclass(frozen=True)
class ItemFilter:
    """Items that pass every condition (``filter_conditions``); ``label`` is the item's label, any other
    key a metadata key."""

    conditions: tuple[Condition, ...] = ()

    @classmethod
    def equal(cls, label: str | None = None, metadata: Mapping[str, Scalar] | None = None) -> ItemFilter:
        """Equality of the label (when given) and of each metadata pair: the filter of a plain object."""
        pairs = ([(LABEL_KEY, label)] if label is not None else []) + sorted((metadata or {}).items())
        return cls(tuple(Condition(key, "$eq", value) for key, value in pairs))

    def keys(self) -> list[str]:
        """The metadata keys it names (the label aside), sorted."""
        return sorted({c.key for c in self.conditions} - {LABEL_KEY})

    def to_json(self) -> dict[str, Any]:
        """The filter in its JSON form (equality as a plain value)."""
        document: dict[str, Any] = {}
        for c in self.conditions:
            document.setdefault(c.key, {})[c.op] = c.to_json()
        return {key: ops["$eq"] if list(ops) == ["$eq"] else ops for key, ops in document.items()}


def parse_filter(value: str | Mapping[str, Any] | None, what: str = "filter") -> ItemFilter | None:
    """A filter from JSON text or a mapping (the language of ``filter_conditions``); None, blank text or
    an empty object means no filter."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    given = parse_json_object(value, what) if isinstance(value, str) else value
    if not isinstance(given, Mapping):
        raise DataError(f'{what} must be a JSON object such as {{"color": "red"}}')
    if len(given) > MAX_KEYS:
        raise DataError(f"{what} has {len(given)} keys; at most {MAX_KEYS} are allowed")
    conditions: list[Condition] = []
    for key, item in given.items():
        check_key(key, what)
        conditions += conditions_of(key, item, what, is_label=key == LABEL_KEY)
    for condition in conditions:
        for text in condition.value if condition.op == "$in" else (condition.value,):
            _check_text(condition.key, text, what)
    return ItemFilter(tuple(sorted(conditions, key=lambda c: (c.key, c.op)))) if conditions else None


def check_key(key: object, what: str) -> None:
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS or set(key) & set(_KEY_FORBIDDEN):
        raise DataError(
            f"{what}: keys must be non-empty strings of at most {MAX_KEY_CHARS} characters without "
            f"double quotes or backslashes, got {json.dumps(key, default=str)}"
        )
    _check_text(key, None, what)


def _check_pairs(value: Mapping[str, Any], what: str) -> dict[str, Scalar]:
    if not isinstance(value, Mapping):
        raise DataError(f'{what} must be a JSON object such as {{"color": "red"}}')
    if len(value) > MAX_KEYS:
        raise DataError(f"{what} has {len(value)} keys; at most {MAX_KEYS} are allowed")
    checked: dict[str, Scalar] = {}
    for key, item in value.items():
        check_key(key, what)
        if not is_scalar(item):
            raise DataError(
                f"{what}: the value of '{key}' must be a string, number, true, false or null, got {type(item).__name__}"
            )
        _check_text(key, item, what)
        checked[key] = item
    return checked


def check_metadata_text(metadata: Mapping[str, Any], what: str) -> None:
    """The text rule (``unicode_text.text_problem``) over the keys and string values of metadata that
    came in another way than JSON text (a dataset's columns, the uploaded file's name): the stores'
    last check before anything is written."""
    for key, item in metadata.items():
        _check_text(str(key), item, what)


def _check_text(key: str, item: object, what: str) -> None:
    for text in (key, item) if isinstance(item, str) else (key,):
        if (problem := text_problem(text)) is not None:
            raise DataError(f'{what}: "{shown(text)}" {problem}')
