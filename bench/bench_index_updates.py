"""Index updates with segments: time per added item vs index size, and search with deltas vs compacted.

For each base size (random L2-normalised 2048-d vectors, flat float + flat binary kinds, written like
``retrieval index build`` writes them), it adds 1, 100 and 10,000 items (``--adds``) through ``IndexStore.add``
(each add one delta segment; automatic compaction off) and prints the time per added item beside the
baseline measured in the same run: rewriting the base's three files once, which is what every add
did before segments (``embeddings.f16.npy``, ``float.faiss``, ``binary.faiss``). Then, with 10 delta
segments and some tombstones, it measures batch and one-query-at-a-time search QPS (float, binary,
binary + re-rank 100), compacts (timed) and measures the same searches on the single base segment.

    python bench/bench_index_updates.py                           # 10k and 100k items (a few minutes)
    python bench/bench_index_updates.py --sizes 1000000           # 1M items: ~17 GB of memory, long

``OPENBLAS_CORETYPE=SkylakeX`` and ``OMP_WAIT_POLICY=PASSIVE`` are set for this process, as in the
other benchmarks (``--openblas-coretype none`` leaves it unset).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from openblas_core import AUTO, resolve_coretype
from quick_mode import parse_quick

DELTAS = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated base sizes")
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--queries", type=int, default=200, help="queries of the batch measurement")
    parser.add_argument("--single", type=int, default=30, help="queries timed one at a time")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--adds", default="1,100,10000", help="comma-separated numbers of items added, one add each")
    parser.add_argument("--workdir", default=None, help="where to write the indexes (default: a temp dir)")
    parser.add_argument(
        "--openblas-coretype", default=AUTO, help="OPENBLAS_CORETYPE: auto (follows this CPU), a value, or none"
    )
    parser.add_argument("--omp-wait-policy", default="PASSIVE", help="OMP_WAIT_POLICY for this process")
    return parse_quick(parser, sizes="1000", dim=32, queries=20, single=5, adds="1,100")


def random_unit(rng: Any, n: int, dim: int) -> Any:
    import numpy as np

    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def fake_export(folder: Path, dim: int) -> SimpleNamespace:
    """What ``write_index`` reads of an embedder (its manifest and files), for vectors without a model."""
    from vector_model import NO_MODEL_SHA256, vectors_only_manifest

    from retrieval.indexing.exported_model.model_manifest import manifest_json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(b"random vectors, no model")
    manifest = vectors_only_manifest(dim)
    (folder / "model.json").write_text(manifest_json(manifest))
    return SimpleNamespace(manifest=manifest, model_sha256=NO_MODEL_SHA256, export_dir=folder)


def records(start: int, stop: int) -> list[Any]:
    from retrieval.indexing.data.records import ImageRecord

    return [ImageRecord(Path(f"/bench/{i}.jpg"), f"c{i % 1000}") for i in range(start, stop)]


def rewrite_seconds(store: Any, scratch: Path) -> float:
    """Rewriting the base's three files once: the file work of one add before segments."""
    from retrieval.indexing.store.files.segment_storage.segment_files import write_embeddings, write_faiss_files

    base = store._set.segments[0]
    started = time.perf_counter()
    write_embeddings(scratch, base.embeddings)
    write_faiss_files(scratch, base.float_index, base.binary_index)
    seconds = time.perf_counter() - started
    shutil.rmtree(scratch, ignore_errors=True)
    return seconds


def qps(store: Any, queries: Any, single: int, k: int) -> dict[str, tuple[float, float]]:
    """(batch QPS, one-at-a-time QPS) of float, binary and binary + re-rank 100 searches."""
    out = {}
    for name, kwargs in (
        ("float", {}),
        ("binary", {"kind": "binary"}),
        ("binary+rerank", {"kind": "binary", "rerank": 100}),
    ):
        started = time.perf_counter()
        store.search(queries, k, **kwargs)
        batch = len(queries) / (time.perf_counter() - started)
        started = time.perf_counter()
        for row in queries[:single]:
            store.search(row[None], k, **kwargs)
        out[name] = (batch, single / (time.perf_counter() - started))
    return out


def run_size(size: int, args: argparse.Namespace, root: Path) -> tuple[list[str], list[str]]:
    import numpy as np

    from retrieval.indexing.store.build.builder import write_index
    from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
    from retrieval.indexing.store.files.index_store import IndexStore
    from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy

    rng = np.random.default_rng(size)
    out = root / f"index-{size}"
    started = time.perf_counter()
    kinds = (float_kind("flat"), binary_kind("flat"))
    write_index(out, fake_export(root / "export", args.dim), records(0, size), random_unit(rng, size, args.dim), kinds)  # type: ignore[arg-type]
    build = time.perf_counter() - started
    never = CompactionPolicy(
        max_delta_segments=10**6, max_delta_fraction=10**6, max_tombstone_fraction=1, min_rows=10**12
    )
    add_rows = []
    with IndexStore.open(out) as store:
        store.compact(policy=never)
        baseline = rewrite_seconds(store, root / "rewrite")
        next_id = size
        for count in (int(n) for n in args.adds.split(",")):
            vectors = random_unit(rng, count, args.dim)
            started = time.perf_counter()
            store.add(records(next_id, next_id + count), vectors)
            seconds = time.perf_counter() - started
            next_id += count
            add_rows.append(
                f"| {size:,} | {count:,} | {seconds:.3f} | {1000 * seconds / count:.2f} | {baseline:.2f} | "
                f"{1000 * baseline / count:.2f} | {baseline / seconds:,.1f}x |"
            )
        while store.segment_count < 1 + DELTAS:
            store.add(records(next_id, next_id + 100), random_unit(rng, 100, args.dim))
            next_id += 100
        store.remove(list(range(1, size + 1, 100)))  # 1% of the base as tombstones
        queries = random_unit(rng, args.queries, args.dim)
        segmented = qps(store, queries, args.single, args.k)
        result = store.compact()
        compacted = qps(store, queries, args.single, args.k)
    search_rows = [
        f"| {size:,} | {name} | {segmented[name][0]:,.0f} / {compacted[name][0]:,.0f} "
        f"({segmented[name][0] / compacted[name][0]:.2f}) | {segmented[name][1]:,.1f} / {compacted[name][1]:,.1f} "
        f"({segmented[name][1] / compacted[name][1]:.2f}) | {result.seconds:.1f} | {build:.1f} |"
        for name in segmented
    ]
    shutil.rmtree(out, ignore_errors=True)
    return add_rows, search_rows


def main() -> None:
    args = parse_args()
    coretype, why = resolve_coretype(args.openblas_coretype)
    os.environ.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    print(f"OPENBLAS_CORETYPE={coretype or 'unset'}: {why}")
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy
    import faiss

    root = Path(args.workdir or tempfile.mkdtemp(prefix="bench-updates-"))
    adds, searches = [], []
    for size in (int(s) for s in args.sizes.split(",")):
        rows = run_size(size, args, root)
        adds += rows[0]
        searches += rows[1]
    print(
        f"faiss {faiss.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"OMP_WAIT_POLICY={args.omp_wait_policy}, {faiss.omp_get_max_threads()} threads, "
        f"load average {os.getloadavg()[0]:.1f}, d={args.dim}, flat kinds\n"
    )
    print("| base items | added | add s | ms per added item | old add s (full rewrite) | old ms per item | old / new |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(adds))
    print(
        f"\n{DELTAS} delta segments + 1% tombstones / compacted ({args.queries} batch queries, {args.single} single, k={args.k}):\n"
    )
    print(
        "| base items | search | batch QPS deltas / compacted (ratio) | single QPS deltas / compacted (ratio) | compact s | build s |"
    )
    print("|---|---|---|---|---|---|")
    print("\n".join(searches))
    if args.workdir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
