"""Build an index (or one shard of it) from a model and a dataset: ``run_build`` (a ``BuildRequest``,
the one use case), and the API's ``build_index`` and ``build_shard``, which describe their call as one; ``merge_index``
(shards merged into one index)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from retrieval.indexing.search.postprocess_params import PostprocessParams
from retrieval.indexing.store.backends import FILES, IndexTarget, index_target
from retrieval.indexing.store.build import builder, shards
from retrieval.indexing.store.build.builder import BuildReport
from retrieval.indexing.store.build.shard_merge import MergeReport, merge_shards
from retrieval.indexing.store.build.shards import ShardReport, data_root, parse_shard
from retrieval.indexing.usecases.build_request import BuildRequest
from retrieval.indexing.usecases.inputs import Data, PathLike, records_of
from retrieval.indexing.usecases.vector_build import build_from_vectors

if TYPE_CHECKING:
    from typing_extensions import Unpack


def run_build(request: BuildRequest) -> BuildReport | ShardReport:
    """The one index-build use case of ``retrieval index build``, ``build_index()`` and ``build_shard()``:
    the shard directory ``request.shard`` of the dataset, else the whole index (of ``request.vectors`` alone
    when given)."""
    if request.vectors is not None:
        return build_from_vectors(request, request.vectors)
    assert request.model is not None and request.data is not None  # BuildRequest's rules
    records = records_of(request.data, request.split)
    embedding = _Embedding(batch_size=request.batch_size, threads=request.threads, progress=request.progress)
    if request.shard is not None:
        return shards.build_shard(
            request.model,
            records,
            request.out,
            root=data_root(request.data_path()),
            spec=parse_shard(request.shard),
            float_kind_name=request.float_kind,
            binary_kind_name=request.binary_kind,
            **embedding,
        )
    return builder.build_index(
        request.model,
        records,
        request.out,
        float_kind=request.float_kind,
        binary_kind=request.binary_kind,
        target=request.target,
        postprocess=request.postprocess,
        **embedding,
    )


class _Embedding(TypedDict):
    """How both builds embed (``builder.build_index``'s and ``shards.build_shard``'s keywords alike)."""

    batch_size: int
    threads: int | None
    progress: bool


class BuildOptions(TypedDict, total=False):
    """What ``build_index`` and ``build_shard`` pass on to ``BuildRequest`` as they were given (its defaults:
    ``split`` "all", the kinds "flat", ``batch_size`` 32, all cores, ``progress`` True)."""

    split: str
    float_kind: str
    binary_kind: str
    batch_size: int
    threads: int | None
    progress: bool


def build_index(
    model: PathLike,
    data: Data,
    out: PathLike,
    *,
    target: IndexTarget | None = None,
    dba: int | None = None,
    postprocess_params: PostprocessParams | None = None,
    **options: Unpack[BuildOptions],
) -> BuildReport:
    """Embed a dataset (any layout ``retrieval data`` reads, or a list of ``ImageRecord``) with an
    export or run directory and write a float + binary index to ``out``; ``split``: all, train, val or
    test; ``target``: where the items go (``backends.index_target``; default the files backend); ``dba``:
    augment every vector with its top ``dba`` neighbours (alpha-DBA); ``postprocess_params``: the
    parameters recorded in the manifest (the service's ``postprocess=qe|kreciprocal``, DBA's alpha)."""
    request = BuildRequest(
        Path(model), data, Path(out), target=target, dba=dba, postprocess_params=postprocess_params, **options
    )
    report = run_build(request)
    assert isinstance(report, BuildReport)  # no shard asked
    return report


def build_shard(
    model: PathLike, data: PathLike, out: PathLike, shard: str, **options: Unpack[BuildOptions]
) -> ShardReport:
    """Embed shard ``shard`` ("I/N", stable by path) of a dataset into the shard directory ``out``, for
    ``index merge`` (the kinds are recorded for it)."""
    report = run_build(BuildRequest(Path(model), data, Path(out), shard=shard, **options))
    assert isinstance(report, ShardReport)  # a shard asked
    return report


def merge_index(
    out: PathLike,
    shard_dirs: Sequence[PathLike],
    *,
    backend: str = FILES,
    milvus_uri: str | None = None,
    collection: str | None = None,
    progress: bool = True,
) -> MergeReport:
    """``retrieval index merge``: the shard directories of one ``--shard I/N`` build merged into the index
    ``out`` (``backend="milvus"``: bulk-inserted into a Milvus collection, with the same ids)."""
    target = index_target(backend, milvus_uri, collection, Path(out))
    return merge_shards(Path(out), [Path(d) for d in shard_dirs], progress=progress, target=target)
