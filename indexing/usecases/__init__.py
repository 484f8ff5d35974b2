"""The torch-free Python API, and what the commands run: one function per thing a user does with an
index, a model export or a dataset, so ``retrieval.cli`` only parses arguments and prints.

``inputs`` (data, images and query models as records, vectors and embedders), ``build_request``
(``BuildRequest``: one index build as asked, the rules between its options), ``building`` (``run_build``,
the one build use case, and ``build_index``, ``build_shard``, with their ``BuildReport``, ``ShardReport``;
``merge_index``), ``query_vectors`` (every ``Query`` as vectors: the one place),
``searching`` (``search_store``, the one search of every door; ``search``; ``SearchRequest`` and
``search_index``, which both ``search`` and ``retrieval search`` run), ``evaluating`` (``evaluate``; ``evaluate_index_dir``, ``evaluate_dataset`` and
``save_evaluation`` for ``retrieval eval``, with ``run_dir_of``: the training run of a ``--model``), ``embedding`` (``embed``; ``index_embeddings``,
``dataset_embeddings``), ``updating`` (``add_images``, ``remove_items``, ``compact_index``), ``vectors``
(``add``, ``add_vectors``: items in by vectors made elsewhere, checked by
``vector_input``; ``vector_build``: an index built from vectors alone), ``deleting`` (``delete_matching``: the items a filter selects),
``duplicates/`` (``find_dataset_duplicates``, ``find_exact_copies``: the copies in a dataset;
``find_index_duplicates``, ``store_duplicate_groups``, ``item_duplicates``: copies in a gallery) and
``maintaining`` (``index_info``, ``index_generations``, ``snapshot_index``, ``verify_index``, ``rebuild_index``,
``switch_index``, ``rollback_index``).
``retrieval.training.usecases`` adds what needs torch (train, export, study). What a caller meets is one
import away too: the errors, the choices and parsers of the options (``load_params``, ``parse_methods``,
``FLOAT_KINDS``, ...), the report types (``EvaluationReport``, ``UpgradeReport``, ...) and the dataset
functions of ``retrieval data`` (``load_records``, ``split_records``, ``scan_images``, ...).

    from retrieval.indexing import usecases as api
    api.build_index("runs/ns/export", "data/", "index/", split="test")
    hits = api.search("index/", ["query.jpg"], k=5)   # per image: [(Item, score), ...]
"""

# What a caller of these functions meets, one import away (the commands parse and print only these):
# the errors, the choices and parsers of their options, and the types of their reports.
from retrieval.indexing.common.errors import ConfigError, DataError, RetrievalError
from retrieval.indexing.common.table_files import table_suffix
from retrieval.indexing.data.bad_images import scan_images
from retrieval.indexing.data.class_check import class_problems
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.data.sources import describe_layout, load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.eval.evaluation import KINDS, EvaluationReport
from retrieval.indexing.eval.metrics import RetrievalMetrics
from retrieval.indexing.eval.text_to_image import DEFAULT_PROMPT
from retrieval.indexing.exported_model.embedding_files import check_embedding_path, write_embedding_table
from retrieval.indexing.exported_model.model_manifest import Quantization
from retrieval.indexing.exported_model.resolution import run_dir_of
from retrieval.indexing.exported_model.training_verdict import TrainingVerdict
from retrieval.indexing.query.query import Query
from retrieval.indexing.search.postprocess_params import IndexPostprocess, load_params, parse_methods
from retrieval.indexing.store.backends import backend_of, index_target
from retrieval.indexing.store.files.faiss_kinds import BINARY_KINDS, FLOAT_KINDS
from retrieval.indexing.store.maintenance.generations import KEEP_PREVIOUS, Generation
from retrieval.indexing.store.maintenance.model_check import DEEP_SAMPLE
from retrieval.indexing.store.maintenance.model_upgrade import UpgradeReport
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest
from retrieval.indexing.store.shared.items.item_filter import parse_metadata
from retrieval.indexing.usecases.build_request import BuildRequest
from retrieval.indexing.usecases.building import (
    BuildReport,
    ShardReport,
    build_index,
    build_shard,
    merge_index,
    run_build,
)
from retrieval.indexing.usecases.duplicates.dataset_duplicates import (
    SplitSettings,
    find_dataset_duplicates,
    find_exact_copies,
)
from retrieval.indexing.usecases.duplicates.index_duplicates import (
    DuplicateGroups,
    find_index_duplicates,
    item_duplicates,
    store_duplicate_groups,
)
from retrieval.indexing.usecases.embedding import dataset_embeddings, embed, index_embeddings
from retrieval.indexing.usecases.evaluating import (
    EvalRequest,
    Evaluation,
    evaluate,
    evaluate_dataset,
    evaluate_index_dir,
    run_eval,
    save_evaluation,
)
from retrieval.indexing.usecases.maintaining import (
    index_generations,
    index_info,
    rebuild_index,
    rollback_index,
    snapshot_index,
    switch_index,
    verify_index,
)
from retrieval.indexing.usecases.searching import (
    QueryHits,
    SearchOutcome,
    SearchRequest,
    aliased,
    search,
    search_index,
    search_store,
)
from retrieval.indexing.usecases.updating import add_images, compact_index, remove_items
from retrieval.indexing.usecases.vectors import VectorAdd, VectorAddReport, add, add_vectors

__all__ = [
    "BINARY_KINDS",
    "BuildReport",
    "BuildRequest",
    "CompactionPolicy",
    "ConfigError",
    "DEEP_SAMPLE",
    "DEFAULT_PROMPT",
    "DataError",
    "EvalRequest",
    "DuplicateGroups",
    "Evaluation",
    "EvaluationReport",
    "FLOAT_KINDS",
    "Generation",
    "ImageRecord",
    "IndexPostprocess",
    "KEEP_PREVIOUS",
    "KINDS",
    "Quantization",
    "Query",
    "QueryHits",
    "RetrievalError",
    "RetrievalMetrics",
    "SearchOutcome",
    "SearchRequest",
    "ShardReport",
    "SplitSettings",
    "TrainingVerdict",
    "UpgradeReport",
    "VectorAdd",
    "VectorAddReport",
    "add",
    "add_images",
    "add_vectors",
    "aliased",
    "backend_of",
    "build_index",
    "build_shard",
    "check_embedding_path",
    "class_problems",
    "compact_index",
    "dataset_embeddings",
    "describe_layout",
    "embed",
    "evaluate",
    "evaluate_dataset",
    "evaluate_index_dir",
    "find_dataset_duplicates",
    "find_exact_copies",
    "find_index_duplicates",
    "generate_synthetic_dataset",
    "index_embeddings",
    "index_generations",
    "index_info",
    "item_duplicates",
    "index_target",
    "load_index_manifest",
    "load_params",
    "load_records",
    "merge_index",
    "parse_metadata",
    "parse_methods",
    "rebuild_index",
    "remove_items",
    "rollback_index",
    "run_build",
    "run_dir_of",
    "run_eval",
    "save_evaluation",
    "scan_images",
    "search",
    "search_index",
    "search_store",
    "snapshot_index",
    "split_records",
    "store_duplicate_groups",
    "switch_index",
    "table_suffix",
    "verify_index",
    "write_embedding_table",
]
