"""Retried writes under an ``Idempotency-Key`` (the IETF httpapi Idempotency-Key header draft; Stripe's
idempotent requests): the store remembers, with the ids and count of the first add, a digest of what the
request asked for (``request_digest``); ``replayed`` answers a retry of the same request with that first
answer, and refuses a key reused for another request (a DataError: the service's 422), which otherwise got
the first answer while its own items were never added."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.store.shared.store_protocol import Store


def request_digest(vectors: Any = None, **fields: Any) -> str:
    """The sha256 of what an add asks for: its ``vectors`` (as float32, so a list and its base64 are one
    request) or images' bytes (``bytes`` values), and its JSON-able ``fields`` (labels, keys, metadata ...)."""
    digest = hashlib.sha256()
    if vectors is not None:
        digest.update(np.ascontiguousarray(np.asarray(vectors, dtype="<f4")).tobytes())
    for name, value in sorted(fields.items()):
        digest.update(name.encode())
        if isinstance(value, list) and value and all(isinstance(part, bytes) for part in value):
            for part in value:
                digest.update(hashlib.sha256(part).digest())
        else:
            digest.update(json.dumps(value, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def replayed(store: Store, idempotency_key: str, digest: str) -> dict[str, Any] | None:
    """The ids and count the first add under ``idempotency_key`` answered, or None when the key is new; a
    key first used for another request (another ``digest``) is a DataError. A record written before digests
    were kept is replayed as before."""
    first = store.recall(idempotency_key)
    if first is None:
        return None
    recorded = first.pop("request", None)
    if recorded is not None and recorded != digest:
        raise DataError(
            f"the Idempotency-Key {idempotency_key!r} was first used for a request with another body; a retry "
            "must send the same body, and a new request needs a new key"
        )
    return first
