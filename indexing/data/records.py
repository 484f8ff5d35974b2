"""The one record type every data source yields and every stage consumes.

Training wraps records in a torch ``Dataset``; indexing embeds them; the SQLite item
table stores them. Keeping it torch-free lets the serving image read datasets too.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.unicode_text import shown, text_problem

MAX_LABEL_CHARS = 256
"""The longest class label any store keeps (the web page shows it whole; Milvus has a fixed width)."""
MAX_KEY_CHARS = 256
"""The longest item key (a user's own id: a SKU, a file key) any store keeps."""


@dataclass(frozen=True)
class ImageRecord:
    """One labelled image of a dataset.

    ``split`` is the source's own split when it has one (``"train"``/``"test"`` for CUB,
    Cars196, SOP, In-Shop, or a CSV ``split`` column) and ``None`` otherwise, in which
    case the class-disjoint split rule decides. ``is_query``/``is_gallery`` matter only
    for protocols with separate query and gallery sets (In-Shop); both default to True,
    meaning "query = gallery, self excluded". ``key`` is the user's own id of the item (unique per
    index, ``key_problem``), or None: items are then known by the integer ids the index gives; it is kept
    in its NFC form (``normal_key``), whichever door it came in by.
    """

    path: Path
    label: str
    split: str | None = None
    is_query: bool = True
    is_gallery: bool = True
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    key: str | None = None

    def __post_init__(self) -> None:
        if self.key is not None:
            object.__setattr__(self, "key", normal_key(self.key))  # frozen: the one place a key is set


def is_blank_label(label: object) -> bool:
    """True for a label that is empty or only white space: it would silently form its own class."""
    return not str(label).strip()


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot be a class label (a phrase that follows "the label"), or None: the one label
    rule of the index builder, ``index add``, the Python API and ``POST /items``."""
    if is_blank_label(label):
        return "is empty; give every image a class name"
    if (problem := text_problem(label)) is not None:
        return f'"{shown(label)}" {problem}'
    if len(label) > MAX_LABEL_CHARS:
        return f"{label[:40]!r}... is {len(label)} characters long; at most {MAX_LABEL_CHARS} characters are allowed"
    return None


def normal_key(key: str) -> str:
    """``key`` as every store keeps and looks it up: Unicode NFC, so that "café" typed as one code point
    (U+00E9) and as "e" plus a combining accent (U+0301) is one key."""
    return unicodedata.normalize("NFC", key)


def item_key(key: str) -> str:
    """``key`` as stored (``normal_key``), or a DataError saying why it cannot be a key: the one key rule of
    every door (the service's path and form fields, ``--keys`` files, CSV manifests, the Python API)."""
    key = normal_key(key)
    if (problem := key_problem(key)) is not None:
        raise DataError(f"the key {problem}")
    return key


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an item key (a phrase that follows "the key"), or None: the one key rule of
    ``index build`` / ``index add`` (a CSV ``key`` column), the Python API and the service."""
    if not key:
        return "is empty; give every keyed item a non-empty key"
    plain = key.isascii() and key.isprintable()  # no NUL, surrogate, control or format character: skip those scans
    if not plain and (problem := text_problem(key)) is not None:
        return f'"{shown(key)}" {problem}'
    if not plain and any(ord(char) < 32 or 0x7F <= ord(char) < 0xA0 for char in key):
        return f'"{shown(key)}" holds a control character (a line break, a tab, ...); keys are one line of text'
    if all(map(is_invisible, key)):
        return f"{ascii(key)} is blank (only white space or invisible characters); give every keyed item a visible key"
    if not plain and (hidden := _hidden_format_character(key)) is not None:
        name = unicodedata.name(hidden, "a format character")
        return f"{key!r} holds the invisible U+{ord(hidden):04X} ({name}), which makes it look like another key"
    if len(key) > MAX_KEY_CHARS:
        return f"{key[:40]!r}... is {len(key)} characters long; at most {MAX_KEY_CHARS} characters are allowed"
    return None


_BLANK_SYMBOLS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
"""Letters, marks and symbols that draw nothing (Hangul fillers, the braille blank, ...)."""
_JOINERS = frozenset("\u200c\u200d")
"""Zero-width (non-)joiners: part of emoji sequences and of Persian and Indic words, so allowed inside a key."""


def is_invisible(char: str) -> bool:
    """White space, a format character (zero-width), a nonspacing mark or a symbol that draws nothing: the
    characters of a blank key, and of a blank text query."""
    return char.isspace() or char in _BLANK_SYMBOLS or unicodedata.category(char) in ("Cf", "Mn")


def _hidden_format_character(key: str) -> str | None:
    """The first format character (category Cf: U+200B zero-width space, U+FEFF, bidi controls, ...) of
    ``key``, except a joiner between two other characters; None when there is none."""
    for position, char in enumerate(key):
        inside = 0 < position < len(key) - 1
        if unicodedata.category(char) == "Cf" and not (char in _JOINERS and inside):
            return char
    return None
