"""Exhaustive search speed and memory: float IndexFlatIP (d=2048) vs binary IndexBinaryFlat (2048 bits).

Uses the same ID-mapped indexes ``retrieval index build`` writes (``faiss_kinds``), on random
L2-normalised vectors (exhaustive search cost does not depend on the data). Prints a
markdown table with batch QPS (all queries in one call), single-query QPS (one call per
query) and bytes per vector; ratios are binary over float measured in the same run.

    python bench/bench_search.py                       # 100k gallery (about a minute)
    python bench/bench_search.py --sizes 100000,1000000  # adds 1M (8 GB of float32, built in chunks)

faiss's bundled OpenBLAS picks a slow kernel on this CPU; ``--openblas-coretype SkylakeX``
(the default here) sets OPENBLAS_CORETYPE for this process only; ``none`` leaves it unset.
``OMP_WAIT_POLICY=PASSIVE`` (default here): on a busy shared 2-core machine, OpenMP's default
spin-waiting made one-query-at-a-time binary search 60x slower (11 vs 696 QPS, same run).
"""

from __future__ import annotations

import argparse
import os
import time

from openblas_core import AUTO, resolve_coretype
from quick_mode import parse_quick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated gallery sizes")
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--queries", type=int, default=1000, help="queries of the batch measurement")
    parser.add_argument("--single", type=int, default=50, help="queries timed one at a time")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=50_000, help="vectors generated and added per chunk")
    parser.add_argument(
        "--openblas-coretype", default=AUTO, help="OPENBLAS_CORETYPE: auto (follows this CPU), a value, or none"
    )
    parser.add_argument(
        "--omp-wait-policy",
        default="PASSIVE",
        help="OMP_WAIT_POLICY: PASSIVE keeps idle OpenMP threads from spinning on a shared machine",
    )
    return parse_quick(parser, sizes="2000", dim=64, queries=50, single=5, chunk=1_000)


def random_unit(rng, n: int, dim: int):
    import numpy as np

    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def build(size: int, dim: int, chunk: int, seed: int = 0):
    """Float and binary ID-mapped flat indexes over ``size`` random vectors, added chunk by chunk."""
    import numpy as np

    from retrieval.indexing.search.binary import binarize
    from retrieval.indexing.store.files.faiss_kinds import (
        BINARY_KINDS,
        FLOAT_KINDS,
        build_binary_index,
        build_float_index,
    )

    rng = np.random.default_rng(seed)
    empty_f, empty_b = np.empty((0, dim), np.float32), np.empty((0, dim // 8), np.uint8)
    float_index = build_float_index(FLOAT_KINDS.get("flat"), empty_f, np.empty(0, np.int64))
    binary_index = build_binary_index(BINARY_KINDS.get("flat"), empty_b, np.empty(0, np.int64), dim)
    for start in range(0, size, chunk):
        vectors = random_unit(rng, min(chunk, size - start), dim)
        ids = np.arange(start, start + len(vectors), dtype=np.int64)
        float_index.add_with_ids(vectors, ids)
        binary_index.add_with_ids(binarize(vectors), ids)
        del vectors
    return float_index, binary_index


def time_search(index, queries, k: int, single: int) -> tuple[float, float]:
    """(batch QPS, single-query QPS)."""
    index.search(queries[:4], k)  # warm-up
    started = time.perf_counter()
    index.search(queries, k)
    batch_qps = len(queries) / (time.perf_counter() - started)
    started = time.perf_counter()
    for row in range(single):
        index.search(queries[row : row + 1], k)
    return batch_qps, single / (time.perf_counter() - started)


def main() -> None:
    args = parse_args()
    coretype, why = resolve_coretype(args.openblas_coretype)
    os.environ.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    print(f"OPENBLAS_CORETYPE={coretype or 'unset'}: {why}")
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy  # before faiss is imported
    import faiss
    import numpy as np

    from retrieval.indexing.search.binary import binarize

    queries = random_unit(np.random.default_rng(1), args.queries, args.dim)
    codes = binarize(queries)
    print(
        f"faiss {faiss.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"OMP_WAIT_POLICY={args.omp_wait_policy}, load average {os.getloadavg()[0]:.1f}, "
        f"threads={faiss.omp_get_max_threads()}, d={args.dim}, k={args.k}, {args.queries} batch queries, "
        f"{args.single} single queries\n"
    )
    print("| index | gallery | batch QPS | single-query QPS | bytes/vector | build s |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for size in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        float_index, binary_index = build(size, args.dim, args.chunk)
        build_s = time.perf_counter() - started
        f_batch, f_single = time_search(float_index, queries, args.k, args.single)
        b_batch, b_single = time_search(binary_index, codes, args.k, args.single)
        print(
            f"| IndexFlatIP d={args.dim} | {size:,} | {f_batch:,.0f} | {f_single:,.1f} | {args.dim * 4:,} | {build_s:.0f} |"
        )
        print(
            f"| IndexBinaryFlat {args.dim} bits | {size:,} | {b_batch:,.0f} | {b_single:,.1f} | {args.dim // 8:,} | - |"
        )
        ratios.append((size, b_batch / f_batch, b_single / f_single))
        del float_index, binary_index
    print("\n| gallery | binary/float batch QPS | binary/float single-query QPS | memory ratio |")
    print("|---|---|---|---|")
    for size, batch, single in ratios:
        print(f"| {size:,} | {batch:.1f}x | {single:.1f}x | 1/32 |")


if __name__ == "__main__":
    main()
