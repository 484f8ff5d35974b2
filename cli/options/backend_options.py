"""The index backend options of ``index build`` and ``index merge``: files, or a Milvus collection
(``retrieval.indexing.store.backends.index_target`` turns them into where the index is written)."""

from __future__ import annotations

from typing import Annotated

import typer

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
