"""``BuildRequest``: one call of ``retrieval index build`` or the Python API's ``build_index()`` /
``build_shard()``, with the rules between its options.

Every entry point describes what it was asked as a ``BuildRequest`` and hands it to
``building.run_build``; the rules between options (a shard is a files-backend directory of embeddings
for ``index merge``, so no Milvus target and no whole-index post-processing; a shard is cut from a
dataset path, not from records) are checked once, when the request is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.search.postprocess_params import DbaParams, IndexPostprocess, PostprocessParams
from retrieval.indexing.store.backends import IndexTarget
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.usecases.inputs import Data


@dataclass(frozen=True)
class BuildRequest:
    """What to embed with which model into where, and how to index it.

    ``target``: where the items go (``backends.index_target``; None: the files backend in ``out``);
    ``shard``: ``"I/N"`` builds only that shard of the dataset into ``out``, a shard directory for
    ``index merge``; ``dba``: augment every vector with its top ``dba`` neighbours (alpha-DBA);
    ``postprocess_params``: the post-processing parameters recorded in the manifest; ``vectors``: a ``.npy``
    of vectors to index instead of a model and a dataset (``items``: their CSV of keys, labels, metadata),
    an index with no model (``vector_build``).
    """

    model: Path | None
    data: Data | None
    out: Path
    split: str = "all"
    float_kind: str = "flat"
    binary_kind: str = "flat"
    batch_size: int = 32
    threads: int | None = None
    progress: bool = True
    target: IndexTarget | None = None
    shard: str | None = None
    dba: int | None = None
    postprocess_params: PostprocessParams | None = None
    vectors: Path | None = None
    items: Path | None = None

    def __post_init__(self) -> None:
        """The rules between options, refused in one sentence before anything is read."""
        self._check_sources()
        if self.shard is None:
            return
        if self.target is not None and not isinstance(self.target, FilesTarget):  # a shard is files
            raise ConfigError("--shard writes a shard directory; build shards without --backend milvus")
        if self.dba is not None or self.postprocess_params is not None:
            raise ConfigError("--dba and --postprocess-params apply to a whole index; build shards without them")
        self.data_path()  # a shard's item keys are relative to the dataset's path

    def _check_sources(self) -> None:
        """Either a model and a dataset, or ``vectors`` (with ``items``) alone, into a files-backend index."""
        if self.vectors is None:
            if self.items is not None:
                raise ConfigError("--items names the items of --vectors; give --vectors too, or leave --items out")
            if self.model is None or self.data is None:
                raise ConfigError("give --model and --data (images to embed), or --vectors (an index of vectors alone)")
            return
        if self.model is not None or self.data is not None:
            raise ConfigError("--vectors builds an index of vectors alone; give it without --model and --data")
        if self.shard is not None or (self.target is not None and not isinstance(self.target, FilesTarget)):
            raise ConfigError("--vectors writes a whole files-backend index; leave out --shard and --backend milvus")

    def data_path(self) -> Path:
        """The dataset's path; a list of records has none."""
        if not isinstance(self.data, str | Path):
            raise ConfigError("a shard is cut from a dataset path (its keys are relative to it), not from records")
        return Path(self.data)

    @property
    def postprocess(self) -> IndexPostprocess | None:
        """The manifest's ``postprocess`` of ``dba`` and ``postprocess_params`` (None: neither given)."""
        if self.dba is None and self.postprocess_params is None:
            return None
        chosen = self.postprocess_params or PostprocessParams()
        if self.dba is not None:
            chosen = chosen.model_copy(update={"dba": DbaParams(n=self.dba, alpha=chosen.dba.alpha)})
        return IndexPostprocess.of(chosen, dba=self.dba is not None)
