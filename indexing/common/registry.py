"""The one registry shape: names written in configs and on the command line -> entries.

Losses, miners, backbones, optimizers, dataset layouts and faiss index kinds each keep one
``Registry``. Lookup of an unknown name raises a ``ConfigError`` that lists the known names,
so every registry answers a typo the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

from retrieval.indexing.common.errors import ConfigError, RetrievalError

T = TypeVar("T")


def unknown_name(
    kind: str, plural: str, name: object, known: list[str], error: type[RetrievalError] = ConfigError
) -> RetrievalError:
    """``unknown backbone 'resnt18'; did you mean resnet18? known backbones: ...``: the one wording."""
    close = difflib.get_close_matches(name, known, n=3) if isinstance(name, str) else []
    hint = f"; did you mean {' or '.join(close)}?" if close else ";"
    return error(f"unknown {kind} {name!r}{hint} known {plural}: {', '.join(known)}")


class Registry(Generic[T]):
    """An ordered name -> entry table with one error message for unknown names."""

    def __init__(
        self,
        kind: str,
        plural: str | None = None,
        *,
        ordered: bool = False,
        error: type[RetrievalError] = ConfigError,
    ) -> None:
        self.kind = kind  # e.g. "loss": used in error messages
        self.plural = plural or f"{kind}s"
        self.ordered = ordered  # True: names() keeps registration order (defaults first, detection order)
        self.error = error
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; registering a name twice is a programming error."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        """The entry called ``name``, or a ConfigError naming the known ones."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise unknown_name(self.kind, self.plural, name, self.names(), self.error) from None

    def names(self) -> list[str]:
        """Registered names: sorted, or in registration order for an ``ordered`` registry."""
        return list(self._entries) if self.ordered else sorted(self._entries)

    def entries(self) -> list[T]:
        """Registered entries, in the order of ``names()``."""
        return [self._entries[name] for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
