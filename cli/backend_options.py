"""The index backend options of ``index build`` and ``index merge``: files, or a Milvus collection."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.store.milvus.milvus_build import MilvusTarget

BackendOpt = Annotated[
    str, typer.Option("--backend", help="files (faiss + SQLite in --out) or milvus (items in a Milvus collection)")
]
MilvusUriOpt = Annotated[
    str | None,
    typer.Option("--milvus-uri", help="--backend milvus: http://HOST:19530, or a milvus-lite file such as ./index.db"),
]
CollectionOpt = Annotated[
    str | None,
    typer.Option("--collection", help="--backend milvus: collection name (default: retrieval_<out name>)"),
]


def milvus_target(backend: str, uri: str | None, collection: str | None, out: Path) -> MilvusTarget | None:
    """None for the files backend; the collection to write for ``--backend milvus``."""
    if backend not in ("files", "milvus"):
        raise ConfigError(f"--backend {backend!r} is unknown; use files or milvus")
    if backend == "files":
        if uri or collection:
            raise ConfigError("--milvus-uri and --collection need --backend milvus")
        return None
    return MilvusTarget.of(uri, collection, out)
