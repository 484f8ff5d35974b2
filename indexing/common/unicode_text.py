"""Text that can be stored and sent: Python strings may hold lone surrogates (U+D800..U+DFFF), which no
UTF-8 file, SQLite column, Milvus field or JSON response can encode.

They arrive from JSON escapes (``"\\ud800"``) and from file names in another encoding (Python's
surrogate escapes). The rule: refuse them where text comes in (``has_lone_surrogate``), and replace
them with U+FFFD where text written before the rule is read back (``replace_lone_surrogates``,
``readable_json``), so such a record is still served.
"""

from __future__ import annotations

import os
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a code point that UTF-8 cannot encode (a surrogate pair is one code point
    in a Python string, so every surrogate found is a lone one)."""
    return _SURROGATE.search(text) is not None


def shown(text: str) -> str:
    """``text`` printable: a file name's undecodable bytes as ``\\xe9``, other lone surrogates as ``\\ud800``."""
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("ascii")


def replace_lone_surrogates(text: str) -> str:
    return _SURROGATE.sub(REPLACEMENT, text)


def readable_json(value: Any) -> Any:
    """A decoded JSON value with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {readable_json(key): readable_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [readable_json(item) for item in value]
    return value
