"""The torch-free Python API, and what the commands run: one function per thing a user does with an
index, a model export or a dataset, so ``retrieval.cli`` only parses arguments and prints.

``inputs`` (data, images and query models as records, vectors and embedders), ``build_request``
(``BuildRequest``: one index build as asked, the rules between its options), ``building`` (``run_build``,
the one build use case, and ``build_index``, ``build_shard``, with their ``BuildReport``, ``ShardReport``), ``searching`` (``search``; ``search_index`` for ``retrieval
search``), ``evaluating`` (``evaluate``; ``evaluate_index_dir``, ``evaluate_dataset`` and
``save_evaluation`` for ``retrieval eval``, with ``run_dir_of``: the training run of a ``--model``), ``embedding`` (``embed``; ``index_embeddings``,
``dataset_embeddings``), ``updating`` (``add_images``, ``remove_items``, ``compact_index``) and
``maintaining`` (``index_info``, ``index_generations``, ``snapshot_index``, ``verify_index``, ``rebuild_index``,
``switch_index``, ``rollback_index``).
``retrieval.training.api`` adds what needs torch (train, export, study).

    from retrieval.indexing import api
    api.build_index("runs/ns/export", "data/", "index/", split="test")
    hits = api.search("index/", ["query.jpg"], k=5)   # per image: [(Item, score), ...]
"""

from retrieval.indexing.api.build_request import BuildRequest
from retrieval.indexing.api.building import BuildReport, ShardReport, build_index, build_shard, run_build
from retrieval.indexing.api.embedding import dataset_embeddings, embed, index_embeddings
from retrieval.indexing.api.evaluating import (
    Evaluation,
    evaluate,
    evaluate_dataset,
    evaluate_index_dir,
    save_evaluation,
)
from retrieval.indexing.api.maintaining import (
    index_generations,
    index_info,
    rebuild_index,
    rollback_index,
    snapshot_index,
    switch_index,
    verify_index,
)
from retrieval.indexing.api.searching import QueryHits, SearchOutcome, search, search_index
from retrieval.indexing.api.updating import add_images, compact_index, remove_items
from retrieval.indexing.model.resolution import run_dir_of

__all__ = [
    "BuildReport",
    "BuildRequest",
    "Evaluation",
    "QueryHits",
    "SearchOutcome",
    "ShardReport",
    "add_images",
    "build_index",
    "build_shard",
    "compact_index",
    "dataset_embeddings",
    "embed",
    "evaluate",
    "evaluate_dataset",
    "evaluate_index_dir",
    "index_embeddings",
    "index_generations",
    "index_info",
    "rebuild_index",
    "remove_items",
    "rollback_index",
    "run_build",
    "run_dir_of",
    "save_evaluation",
    "search",
    "search_index",
    "snapshot_index",
    "switch_index",
    "verify_index",
]
