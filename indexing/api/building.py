"""Build an index (or one shard of it) from a model and a dataset: ``build_index``, ``build_shard``."""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.api.inputs import Data, PathLike, records_of
from retrieval.indexing.search.postprocess_params import DbaParams, IndexPostprocess, PostprocessParams
from retrieval.indexing.store.backends import IndexTarget
from retrieval.indexing.store.build import builder, shards
from retrieval.indexing.store.build.builder import BuildReport
from retrieval.indexing.store.build.shards import ShardReport, data_root, parse_shard


def build_index(
    model: PathLike,
    data: Data,
    out: PathLike,
    *,
    split: str = "all",
    float_kind: str = "flat",
    binary_kind: str = "flat",
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = True,
    target: IndexTarget | None = None,
    dba: int | None = None,
    postprocess_params: PostprocessParams | None = None,
) -> BuildReport:
    """Embed a dataset (any layout ``retrieval data`` reads, or a list of ``ImageRecord``) with an
    export or run directory and write a float + binary index to ``out``; ``split``: all, train, val or
    test; ``target``: where the items go (``backends.index_target``; default the files backend); ``dba``:
    augment every vector with its top ``dba`` neighbours (alpha-DBA); ``postprocess_params``: the
    parameters recorded in the manifest (the service's ``postprocess=qe|kreciprocal``, DBA's alpha)."""
    return builder.build_index(
        Path(model),
        records_of(data, split),
        Path(out),
        float_kind=float_kind,
        binary_kind=binary_kind,
        batch_size=batch_size,
        threads=threads,
        progress=progress,
        target=target,
        postprocess=index_postprocess(dba, postprocess_params),
    )


def index_postprocess(dba: int | None, params: PostprocessParams | None) -> IndexPostprocess | None:
    """The manifest's ``postprocess`` of ``--dba N`` and ``--postprocess-params`` (None: neither given)."""
    if dba is None and params is None:
        return None
    chosen = params or PostprocessParams()
    if dba is not None:
        chosen = chosen.model_copy(update={"dba": DbaParams(n=dba, alpha=chosen.dba.alpha)})
    return IndexPostprocess.of(chosen, dba=dba is not None)


def build_shard(
    model: PathLike,
    data: PathLike,
    out: PathLike,
    shard: str,
    *,
    split: str = "all",
    float_kind: str = "flat",
    binary_kind: str = "flat",
    batch_size: int = 32,
    threads: int | None = None,
    progress: bool = True,
) -> ShardReport:
    """Embed shard ``shard`` ("I/N", stable by path) of a dataset into the shard directory ``out``, for
    ``index merge`` (the kinds are recorded for it)."""
    spec = parse_shard(shard)
    return shards.build_shard(
        Path(model),
        records_of(data, split),
        Path(out),
        root=data_root(Path(data)),
        spec=spec,
        float_kind_name=float_kind,
        binary_kind_name=binary_kind,
        batch_size=batch_size,
        threads=threads,
        progress=progress,
    )
