"""The Milvus side of the ``milvus`` backend: importing pymilvus, connecting, the two collections' schemas.

``pymilvus`` is imported lazily (the ``milvus`` extra), so the files backend never needs it. A URI
ending in ``.db`` is a milvus-lite file that pymilvus runs embedded (one process at a time); any
other URI (``http://milvus:19530``) is a Milvus server, reached with the same code.

Items live in one collection: ``id`` (primary key, our own ids, never reused), ``path``, ``label``,
``split``, ``is_query``, ``is_gallery``, ``metadata`` (JSON), ``key`` (the item key, "" for none) and
``key_hash`` (its hash, what lookups match; a collection built before keys has neither), ``filter_keys`` (JSON of hashed
key -> hashed value pairs that filters match, see ``milvus_filter``), ``path_key`` (hashed path),
``code`` (BINARY_VECTOR, BIN_FLAT + HAMMING) and ``vector`` (FLOAT_VECTOR, FLAT + IP). A second
collection ``NAME__meta`` holds the next item id and the idempotency records (Milvus has no
sequence; its rows carry a 2-d dummy vector because every collection needs one).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from retrieval.indexing.common.errors import ConfigError, RetrievalError
from retrieval.indexing.data.records import MAX_KEY_CHARS

T = TypeVar("T")
TIMEOUT_S = 30.0
"""Per call: pymilvus retries some failures (an unparsable filter) until its timeout."""
MAX_TOPK = 16384
"""Milvus's limit on ``limit`` of one search or query."""
PATH_CHARS, LABEL_CHARS, SPLIT_CHARS, KEY_CHARS = 8192, 2048, 256, 80
ITEM_KEY_BYTES = 4 * MAX_KEY_CHARS  # UTF-8 of the longest item key
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")


def pymilvus() -> Any:
    """The ``pymilvus`` module, or a ConfigError saying which extra to install."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # milvus-lite 2.5 imports the deprecated pkg_resources
            import pymilvus as module
    except ImportError as error:
        raise ConfigError(
            f"the milvus backend needs pymilvus and milvus-lite ({error}); install the milvus extra: "
            "pip install 'retrieval[milvus]'"
        ) from None
    return module


def is_local(uri: str) -> bool:
    """A milvus-lite file (pymilvus runs it embedded) rather than a server URL."""
    return uri.endswith(".db") and "://" not in uri


def normalized_uri(uri: str) -> str:
    """A local ``.db`` path made absolute (the manifest must work from any directory); URLs unchanged."""
    if not uri.strip():
        raise ConfigError("--milvus-uri is empty; give http://HOST:19530 or a milvus-lite file such as ./index.db")
    if is_local(uri):
        path = Path(uri).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return str(path)
    if "://" not in uri:
        raise ConfigError(f"--milvus-uri {uri!r} is neither a URL (http://HOST:19530) nor a milvus-lite file (*.db)")
    return uri


def check_collection_name(name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"--collection {name!r} is not a Milvus collection name: letters, digits and underscores, "
            "starting with a letter or underscore"
        )
    return name


def meta_collection(name: str) -> str:
    return f"{name}__meta"


def milvus_call(uri: str, what: str, call: Callable[[], T]) -> T:
    """Run one pymilvus call; its failures become a RetrievalError naming the server (the service: 503)."""
    module = pymilvus()
    try:
        return call()
    except module.MilvusException as error:
        message = getattr(error, "message", None) or str(error)
        raise RetrievalError(f"Milvus at {uri}: {what} failed ({message})") from None


def connect(uri: str) -> Any:
    """A ``MilvusClient`` for ``uri``; an unreachable server is a RetrievalError, not a hang."""
    module = pymilvus()
    try:
        with warnings.catch_warnings(), _lite_logs(uri):
            warnings.simplefilter("ignore", UserWarning)  # milvus-lite 2.5 imports the deprecated pkg_resources
            return module.MilvusClient(uri=uri, timeout=TIMEOUT_S)
    except module.MilvusException as error:
        raise RetrievalError(f"cannot connect to Milvus at {uri} ({error}); is the server running?") from None


KEPT_LITE_LOGS = 20
"""Log files of the embedded server kept beside its database (each start writes one)."""


def lite_log_dir(uri: str) -> Path:
    """Where the embedded milvus-lite server of the database ``uri`` writes its logs: ``.NAME.logs/``
    beside the database file (its glog would otherwise leave a file in /tmp at every start)."""
    database = Path(uri)
    return database.parent / f".{database.name}.logs"


@contextmanager
def _lite_logs(uri: str) -> Iterator[None]:
    """Send the logs of a milvus-lite server started meanwhile to ``lite_log_dir`` (glog reads
    ``GLOG_log_dir`` from the environment the server inherits), keeping the newest ``KEPT_LITE_LOGS``;
    a server URL, or a log directory the user chose, is left alone."""
    if not is_local(uri) or "GLOG_log_dir" in os.environ:
        yield
        return
    folder = lite_log_dir(uri)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["GLOG_log_dir"] = str(folder)
    try:
        yield
    finally:
        del os.environ["GLOG_log_dir"]
        logs = sorted((p for p in folder.iterdir() if p.is_file() and not p.is_symlink()), key=_mtime, reverse=True)
        for old in logs[KEPT_LITE_LOGS:]:
            old.unlink(missing_ok=True)


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns


def create_collections(client: Any, name: str, *, dim: int, bits: int) -> None:
    """(Re)create the items collection and its meta collection, indexed and loaded."""
    module = pymilvus()
    for existing in (name, meta_collection(name)):
        if client.has_collection(existing, timeout=TIMEOUT_S):
            client.drop_collection(existing, timeout=TIMEOUT_S)
    client.create_collection(
        name,
        schema=_items_schema(module, dim, bits),
        index_params=_index_params(client, {"code": ("BIN_FLAT", "HAMMING"), "vector": ("FLAT", "IP")}),
        consistency_level="Strong",
        timeout=TIMEOUT_S,
    )
    client.create_collection(
        meta_collection(name),
        schema=_meta_schema(module),
        index_params=_index_params(client, {"dummy": ("FLAT", "L2")}),
        consistency_level="Strong",
        timeout=TIMEOUT_S,
    )


def code_bits(bits: int) -> int:
    """BINARY_VECTOR lengths are whole bytes; ``binarize`` pads the last byte with zero bits."""
    return -(-bits // 8) * 8


def _items_schema(module: Any, dim: int, bits: int) -> Any:
    types = module.DataType
    schema = module.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", types.INT64, is_primary=True)
    schema.add_field("path", types.VARCHAR, max_length=PATH_CHARS)
    schema.add_field("path_key", types.VARCHAR, max_length=KEY_CHARS)
    schema.add_field("label", types.VARCHAR, max_length=LABEL_CHARS)
    schema.add_field("split", types.VARCHAR, max_length=SPLIT_CHARS)
    schema.add_field("is_query", types.BOOL)
    schema.add_field("is_gallery", types.BOOL)
    schema.add_field("metadata", types.JSON)
    schema.add_field("key", types.VARCHAR, max_length=ITEM_KEY_BYTES)
    schema.add_field("key_hash", types.VARCHAR, max_length=KEY_CHARS)
    schema.add_field("filter_keys", types.JSON)
    schema.add_field("code", types.BINARY_VECTOR, dim=code_bits(bits))
    schema.add_field("vector", types.FLOAT_VECTOR, dim=dim)
    return schema


def _meta_schema(module: Any) -> Any:
    types = module.DataType
    schema = module.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("key", types.VARCHAR, is_primary=True, max_length=KEY_CHARS)
    schema.add_field("value", types.JSON)
    schema.add_field("dummy", types.FLOAT_VECTOR, dim=2)
    return schema


def _index_params(client: Any, fields: dict[str, tuple[str, str]]) -> Any:
    params = client.prepare_index_params()
    for field, (index_type, metric) in fields.items():
        params.add_index(field, index_type=index_type, metric_type=metric)
    return params


def has_keys(client: Any, uri: str, name: str) -> bool:
    """Whether the items collection has the ``key`` fields (not one built before item keys existed)."""
    described = milvus_call(uri, "describe_collection", partial(client.describe_collection, name, timeout=TIMEOUT_S))
    return "key_hash" in {field["name"] for field in described["fields"]}
