"""Merge user parameters over a spec's defaults, rejecting unknown names and wrong types.

The defaults dict of a loss or miner spec lists every parameter it accepts, so it is
both the documentation and the schema: a key that is not there is a typo, and a value
whose kind (bool / number / string) differs from the default's is a mistake.
"""

from __future__ import annotations

from typing import Any

from retrieval.indexing.common.errors import ConfigError


def merge_params(defaults: dict[str, Any], overrides: dict[str, Any] | None, owner: str) -> dict[str, Any]:
    merged = dict(defaults)
    for key, value in (overrides or {}).items():
        if key not in defaults:
            accepted = ", ".join(sorted(defaults)) or "none"
            raise ConfigError(f"{owner} has no parameter {key!r}; accepted parameters: {accepted}")
        if not _same_kind(defaults[key], value):
            raise ConfigError(f"{owner} parameter {key!r} must be a {_kind(defaults[key])}, got {value!r}")
        merged[key] = value
    return merged


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _same_kind(default: Any, value: Any) -> bool:
    if default is None:
        return True
    return _kind(default) == _kind(value)
