"""Approximate index kinds on CLUSTERED data: recall@10 against exact search, QPS, build time.

Every kind is built exactly as ``retrieval index build --float-kind/--binary-kind`` builds it
(``faiss_kinds``, parameters sized for the gallery). Float kinds are scored against exact
inner-product search (the ``flat`` row, measured in the same run), binary kinds against
exact Hamming search. Random uniform vectors would make every approximate index look
broken (no neighbourhood structure), so the data are Gaussian clusters on the sphere.

    python bench/bench_ann.py                        # 50k x 512-d, about 2-4 minutes on 2 cores
    python bench/bench_ann.py --size 1000000 --dim 512 --clusters 10000   # the full size (long)
"""

from __future__ import annotations

import argparse
import os
import time

from openblas_core import AUTO, resolve_coretype
from quick_mode import parse_quick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=0.6, help="noise norm relative to the cluster centre")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--float-kinds", default="flat,hnsw,ivf,ivfpq")
    parser.add_argument("--binary-kinds", default="flat,ivf,hnsw")
    parser.add_argument(
        "--openblas-coretype", default=AUTO, help="OPENBLAS_CORETYPE: auto (follows this CPU), a value, or none"
    )
    parser.add_argument(
        "--omp-wait-policy",
        default="PASSIVE",
        help="OMP_WAIT_POLICY: PASSIVE keeps idle OpenMP threads from spinning on a shared machine",
    )
    return parse_quick(parser, size=2_000, dim=32, clusters=20, queries=50)


def clustered(n: int, dim: int, clusters: int, spread: float, seed: int):
    """Unit vectors around ``clusters`` random centres; the same seed gives the same centres."""
    import numpy as np

    centres = np.random.default_rng(0).standard_normal((clusters, dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((n, dim), dtype=np.float32) * (spread / np.sqrt(dim))
    x = centres[rng.integers(0, clusters, n)] + noise
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def recall_at_k(found, truth) -> float:
    """Mean fraction of the exact top-k found by the approximate top-k."""
    import numpy as np

    return float(np.mean([len(np.intersect1d(f, t)) / len(t) for f, t in zip(found, truth)]))


def measure(build, data, queries, k: int):
    """(index, build seconds, batch QPS, ids)."""
    started = time.perf_counter()
    index = build(data)
    build_s = time.perf_counter() - started
    index.search(queries[:8], k)
    started = time.perf_counter()
    _, ids = index.search(queries, k)
    return index, build_s, len(queries) / (time.perf_counter() - started), ids


def main() -> None:
    args = parse_args()
    coretype, why = resolve_coretype(args.openblas_coretype)
    os.environ.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    print(f"OPENBLAS_CORETYPE={coretype or 'unset'}: {why}")
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy
    import faiss
    import numpy as np

    from retrieval.indexing.search.binary import binarize
    from retrieval.indexing.store.files.faiss_kinds import (
        binary_kind,
        build_binary_index,
        build_float_index,
        float_kind,
    )

    gallery = clustered(args.size, args.dim, args.clusters, args.spread, seed=1)
    queries = clustered(args.queries, args.dim, args.clusters, args.spread, seed=2)
    ids = np.arange(args.size, dtype=np.int64)
    families = [
        (
            "float",
            args.float_kinds,
            float_kind,
            lambda kind: lambda x: build_float_index(kind, x, ids),
            gallery,
            queries,
        ),
        (
            "binary",
            args.binary_kinds,
            binary_kind,
            lambda kind: lambda x: build_binary_index(kind, x, ids, args.dim),
            binarize(gallery),
            binarize(queries),
        ),
    ]
    print(
        f"faiss {faiss.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"OMP_WAIT_POLICY={args.omp_wait_policy}, load average {os.getloadavg()[0]:.1f}, "
        f"{args.size:,} x {args.dim}-d in {args.clusters} clusters, "
        f"{args.queries} queries, k={args.k}\n"
    )
    print("| family | kind | parameters | recall@10 vs exact | batch QPS | QPS vs exact | build s |")
    print("|---|---|---|---|---|---|---|")
    for family, names, lookup, builder, data, qs in families:
        exact_ids, exact_qps = None, None
        for name in names.split(","):
            kind = lookup(name)
            index, build_s, qps, found = measure(builder(kind), data, qs, args.k)
            if exact_ids is None:  # the first kind of each family is its exact baseline
                exact_ids, exact_qps = found, qps
            print(
                f"| {family} | {name} | {describe(index)} | {recall_at_k(found, exact_ids):.3f} | {qps:,.0f} | "
                f"{qps / exact_qps:.1f}x | {build_s:.1f} |"
            )
            del index


def describe(index) -> str:
    """The search-time parameters of an ID-mapped index."""
    import faiss

    inner = index.index
    inner = (
        faiss.downcast_IndexBinary(inner) if isinstance(index, faiss.IndexBinaryIDMap2) else faiss.downcast_index(inner)
    )
    if hasattr(inner, "nprobe"):
        extra = f", PQ {inner.pq.M}x{inner.pq.nbits} bits" if hasattr(inner, "pq") else ""
        return f"nlist {inner.nlist}, nprobe {inner.nprobe}{extra}"
    if hasattr(inner, "hnsw"):
        return f"M {inner.hnsw.nb_neighbors(1)}, efSearch {inner.hnsw.efSearch}"
    return "exhaustive"


if __name__ == "__main__":
    main()
