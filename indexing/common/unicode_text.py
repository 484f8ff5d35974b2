"""Text that can be stored and sent: Python strings may hold lone surrogates (U+D800..U+DFFF), which no
UTF-8 file, SQLite column, Milvus field or JSON response can encode, and NUL (U+0000), which SQLite's
JSON paths and C strings end at (a key ``"a\\u0000b"`` is a JSON path error, a value ``"x\\u0000"``
compares equal to ``"x"``).

Surrogates arrive from JSON escapes (``"\\ud800"``) and from file names in another encoding (Python's
surrogate escapes); NUL from JSON escapes and form fields. The rule: refuse both where text comes in
(``text_problem``: labels, metadata keys and values, filters), and replace lone surrogates with U+FFFD
where text written before the rule is read back (``replace_lone_surrogates``, ``readable_json``), so
such a record is still served.
"""

from __future__ import annotations

import os
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, as a phrase that follows the quoted text, or None: the one text rule
    of labels, metadata and filters at every door (HTTP, command line, Python API)."""
    if "\0" in text:
        return "holds a NUL character (\\u0000), which cannot be stored or matched; remove it"
    if _SURROGATE.search(text) is not None:  # a surrogate pair is one code point: any surrogate is lone
        return (
            "is not valid UTF-8 (bytes of another encoding, e.g. in a file or folder name, or a lone surrogate "
            "such as \\ud800) and cannot be stored; rename such a file, e.g. with convmv, and send valid Unicode text"
        )
    return None


def shown(text: str) -> str:
    """``text`` printable: a file name's undecodable bytes as ``\\xe9``, other lone surrogates as ``\\ud800``,
    NUL as ``\\x00``."""
    try:
        printable = os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        printable = text.encode("utf-8", "backslashreplace").decode("ascii")
    return printable.replace("\0", "\\x00")


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
