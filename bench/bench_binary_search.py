"""Batched binary search: faiss IndexBinaryFlat's blocking settings and binary IVF, per gallery size.

IndexBinaryFlat searches ``query_batch_size`` queries at a time (default 32) against blocks of
``faiss.cvar.hamming_batch_size`` codes (default 65,536, a global), each query in one OpenMP
thread, keeping its top-k in a heap (``use_heap``) or by counting (``use_heap=False``). This
bench times a grid of those settings on the same codes, checks that every setting returns
exactly the default's results, and then sweeps ``nprobe`` of the binary IVF index that
``retrieval index build --binary-kind ivf`` builds, to the first value whose recall@k against
the exact search is >= 0.99. Data: 2048-bit sign codes of unit vectors in Gaussian clusters
(exhaustive cost does not depend on the data; IVF recall does, so random codes would be unfair).

    python bench/bench_binary_search.py                  # 10k and 100k codes (a few minutes)
    python bench/bench_binary_search.py --sizes 1000000  # 1M flat (256 MB of codes)
    python bench/bench_binary_search.py --sizes 1000000 --ivf-max-size 1000000  # + IVF (k-means on a sample: long)
"""

from __future__ import annotations

import argparse
import os
import time

from quick_mode import parse_quick

FLAT_SETTINGS = (
    (65_536, 32, True),  # faiss's defaults
    (65_536, 32, False),
    (65_536, 1_000, True),
    (16_384, 256, True),
    (16_384, 1_000, True),
    (2_048, 1_000, True),
)
"""(hamming_batch_size, query_batch_size, use_heap)."""
RECALL_GOAL = 0.99


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated gallery sizes")
    parser.add_argument("--bits", type=int, default=2048)
    parser.add_argument("--queries", type=int, default=1000, help="queries of the batch measurement")
    parser.add_argument("--single", type=int, default=50, help="queries timed one at a time")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--noise", type=float, default=1.5, help="noise norm relative to the cluster centre's")
    parser.add_argument("--repeat", type=int, default=3, help="batch timings per setting (median)")
    parser.add_argument("--ivf-max-size", type=int, default=100_000, help="skip binary IVF above this size")
    parser.add_argument("--train-sample", type=int, default=100_000, help="codes the IVF k-means trains on")
    parser.add_argument("--omp-wait-policy", default="PASSIVE", help="OMP_WAIT_POLICY (see bench_search.py)")
    return parse_quick(parser, sizes="2000", bits=256, queries=50, single=5, repeat=1, train_sample=2_000)


def clustered_codes(n: int, bits: int, clusters: int, noise: float, seed: int, chunk: int = 50_000):
    """Sign codes of vectors around ``clusters`` fixed centres, generated chunk by chunk (1M x 2048 floats
    would be 8 GB); the same centres for every seed, so queries come from the gallery's clusters."""
    import numpy as np

    from retrieval.indexing.search.binary import binarize

    centres = np.random.default_rng(0).standard_normal((clusters, bits), dtype=np.float32)
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        x = centres[rng.integers(0, clusters, rows)] + noise * rng.standard_normal((rows, bits), dtype=np.float32)
        parts.append(binarize(x))
    return np.concatenate(parts)


def timed(search, repeat: int) -> tuple[float, tuple]:
    """(median seconds, last result) of ``repeat`` calls after one warm-up."""
    import numpy as np

    search()
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = search()
        times.append(time.perf_counter() - started)
    return float(np.median(times)), result


def single_qps(index, queries, k: int, count: int) -> float:
    started = time.perf_counter()
    for row in range(count):
        index.search(queries[row : row + 1], k)
    return count / (time.perf_counter() - started)


def recall(found, truth) -> float:
    import numpy as np

    return float(np.mean([len(np.intersect1d(f, t)) / len(t) for f, t in zip(found, truth)]))


def flat_rows(codes, queries, args) -> tuple[list[tuple], object]:
    """One row per blocking setting: (label, batch QPS, recall, identical to default, single QPS).

    Settings take turns within each repeat (not one after the other), so a change in the
    machine's load during the run does not favour the settings timed last."""
    import faiss
    import numpy as np

    index = faiss.IndexBinaryFlat(args.bits)
    index.add(codes)
    times: dict[tuple, list[float]] = {setting: [] for setting in FLAT_SETTINGS}
    results, singles = {}, {}
    for repeat in range(args.repeat):
        for setting in FLAT_SETTINGS:
            faiss.cvar.hamming_batch_size = setting[0]
            index.query_batch_size, index.use_heap = setting[1], setting[2]
            seconds, results[setting] = timed(lambda: index.search(queries, args.k), 1)
            times[setting].append(seconds)
            if repeat == 0:
                singles[setting] = single_qps(index, queries, args.k, args.single)
    faiss.cvar.hamming_batch_size = FLAT_SETTINGS[0][0]
    reference = results[FLAT_SETTINGS[0]]
    rows = []
    for setting in FLAT_SETTINGS:
        distances, ids = results[setting]
        same = bool((distances == reference[0]).all() and (ids == reference[1]).all())
        label = (
            f"flat: hamming_batch_size {setting[0]:,}, query_batch_size {setting[1]:,}, "
            f"{'heap' if setting[2] else 'counting'}"
        )
        qps = len(queries) / float(np.median(times[setting]))
        rows.append((label, qps, recall(ids, reference[1]), same, singles[setting]))
    return rows, reference[1]


def ivf_rows(codes, queries, truth, args) -> list[tuple]:
    """The store's binary IVF (nlist ~ 4 sqrt(n)), nprobe doubled until recall >= RECALL_GOAL."""
    import numpy as np

    from retrieval.indexing.store.files.faiss_kinds import BINARY_KINDS

    index = BINARY_KINDS.get("ivf").build(args.bits, len(codes))
    sample = np.random.default_rng(2).permutation(len(codes))[: args.train_sample]
    started = time.perf_counter()
    index.train(codes[np.sort(sample)])
    index.add(codes)
    build = time.perf_counter() - started
    rows, nprobe = [], 1
    while nprobe <= index.nlist:
        index.nprobe = nprobe
        seconds, (_, ids) = timed(lambda: index.search(queries, args.k), args.repeat)
        found = recall(ids, truth)
        single = single_qps(index, queries, args.k, args.single)
        rows.append(
            (
                f"ivf: nlist {index.nlist:,}, nprobe {nprobe} (build {build:.0f} s)",
                len(queries) / seconds,
                found,
                False,
                single,
            )
        )
        if found >= RECALL_GOAL:
            break
        nprobe *= 2
    return rows


def main() -> None:
    args = parse_args()
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy  # before faiss is imported
    import faiss

    print(
        f"faiss {faiss.__version__} ({faiss.get_compile_options()}), OMP_WAIT_POLICY={args.omp_wait_policy}, "
        f"threads={faiss.omp_get_max_threads()}, load average {os.getloadavg()[0]:.1f}, {args.bits} bits, k={args.k}, "
        f"{args.queries} batch queries (median of {args.repeat}), {args.single} single queries\n"
    )
    best = []
    for size in (int(s) for s in args.sizes.split(",")):
        clusters = max(10, size // 100)
        codes = clustered_codes(size, args.bits, clusters, args.noise, seed=1)
        queries = clustered_codes(args.queries, args.bits, clusters, args.noise, seed=2)
        flat, truth = flat_rows(codes, queries, args)
        rows = flat + (ivf_rows(codes, queries, truth, args) if size <= args.ivf_max_size else [])
        default_qps = flat[0][1]
        print(f"gallery {size:,} (load average {os.getloadavg()[0]:.1f})\n")
        print("| setting | batch QPS | vs default | recall@k | identical to default | single-query QPS |")
        print("|---|---|---|---|---|---|")
        for label, qps, found, same, single in rows:
            identical = "yes" if same else ("NO" if label.startswith("flat") else "-")
            print(f"| {label} | {qps:,.0f} | {qps / default_qps:.2f}x | {found:.3f} | {identical} | {single:,.1f} |")
        exact = max((r for r in flat if r[3]), key=lambda r: r[1])
        approx = [r for r in rows if r[2] >= RECALL_GOAL and not r[0].startswith("flat")] or [exact]
        best.append((size, exact, max(approx, key=lambda r: r[1]), default_qps))
        print()
    print("| gallery | best exact setting | QPS | vs default | best with recall >= 0.99 | QPS | recall | vs default |")
    print("|---|---|---|---|---|---|---|---|")
    for size, exact, approx, default_qps in best:
        print(
            f"| {size:,} | {exact[0]} | {exact[1]:,.0f} | {exact[1] / default_qps:.2f}x | {approx[0]} "
            f"| {approx[1]:,.0f} | {approx[2]:.3f} | {approx[1] / default_qps:.2f}x |"
        )


if __name__ == "__main__":
    main()
