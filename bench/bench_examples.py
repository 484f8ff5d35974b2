"""Search by examples, groups and diversity (issue #57), each against its baseline in one run.

1. Relevance feedback on the test classes of cub50 and cars196 (EfficientNet-Lite0 ImageNet features, the
   project's training-free model): a query image; each round marks the first 10 hits positive or negative by
   label and searches again. P@10 per round for our strategies and qdrant-client's recommend (local mode,
   same vectors). Rocchio's negative weight is chosen on the validation classes first.
2. Latency of one search by examples (a session after 2 rounds: 1 + 10 examples) at 100,000 items, float and
   binary, faiss flat indexes: p50 / p95.
3. Groups: ``grouped_search`` against a plain search of the same k and an exact brute-force grouping, at
   1,000,000 x 2,048-bit codes (binary) and 100,000 float vectors: exactly k groups, group recall, latency.
4. Several views per item: cars196 test, each class one item of its photos: R@1 by the best view (group_by)
   against the item's averaged vector (the query's own photo left out of both).
5. Diversity: MMR over the first 50 candidates, a table over lambda: distinct labels in the first 10, P@10.

    python bench/bench_examples.py            # the real data (embedded once, cached in $TMPDIR), ~15 minutes
    python bench/bench_examples.py --quick    # synthetic clusters, tiny sizes
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before faiss loads: idle OpenMP threads must not spin here

import argparse
import subprocess
import time
import zlib
from functools import partial
from pathlib import Path

import numpy as np
from examples_feedback import our_methods, ours, precision_by_round, qdrant_methods, rocchio
from quick_mode import parse_quick

from retrieval.indexing.examples.diversity import mmr_order
from retrieval.indexing.examples.example_search import search_by_examples
from retrieval.indexing.examples.grouping import grouped_search
from retrieval.indexing.examples.similarity import similarities
from retrieval.indexing.examples.strategies import STRATEGIES, Examples, Strategy
from retrieval.indexing.search.binary import binarize

DATA = Path("/work/shared/data")
ROCCHIO_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Rocchio's negative weights tried on the validation classes (0.5 ranks as Qdrant's average_vector)."""
LAMBDAS = (0.0, 0.1, 0.25, 0.5, 0.75)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="cub50,cars196")
    parser.add_argument("--queries", type=int, default=400, help="feedback sessions per dataset (seeded sample)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-size", type=int, default=100_000)
    parser.add_argument("--latency-requests", type=int, default=100)
    parser.add_argument("--group-binary-size", type=int, default=1_000_000)
    parser.add_argument("--group-float-size", type=int, default=100_000)
    parser.add_argument("--group-dim", type=int, default=2048)
    parser.add_argument("--group-queries", type=int, default=20)
    parser.add_argument("--sections", default="feedback,latency,groups,views,diversity", help="which tables")
    parser.add_argument("--synthetic", action="store_true", help="clustered synthetic vectors instead of the data")
    return parse_quick(
        parser,
        synthetic=True,
        queries=20,
        latency_size=2_000,
        latency_requests=10,
        group_binary_size=5_000,
        group_float_size=2_000,
        group_dim=256,
        group_queries=3,
    )


def synthetic_split(seed: int, classes: int = 20, per_class: int = 30, dim: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim))
    labels = np.repeat(np.arange(classes), per_class)
    vectors = centres[labels] + 1.2 * rng.normal(size=(len(labels), dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32), labels


def load(dataset: str, split: str, synthetic: bool) -> tuple[np.ndarray, np.ndarray]:
    if synthetic:
        return synthetic_split(seed=zlib.crc32(f"{dataset} {split}".encode()))
    from examples_embeddings import split_vectors

    got = split_vectors(DATA / dataset, split)
    return got.embeddings, got.labels


def sample(count: int, size: int, seed: int = 0) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).choice(count, size=min(size, count), replace=False))


def feedback(args: argparse.Namespace) -> None:
    print(f"\n## 1. Relevance feedback: P@10 per round (round 0 = the plain search), {args.rounds} rounds\n")
    for dataset in args.datasets.split(","):
        vectors, labels = load(dataset, "val", args.synthetic)
        queries = sample(len(labels), args.queries)
        weight_p10 = {
            weight: precision_by_round(
                ours(vectors, Strategy("rocchio", partial(rocchio, negative_weight=weight))),
                vectors,
                labels,
                queries,
                args.rounds,
                10,
            )[2]
            for weight in ROCCHIO_WEIGHTS
        }
        best = max(weight_p10, key=lambda weight: weight_p10[weight])
        chosen = ", ".join(f"{weight}: {p10:.3f}" for weight, p10 in weight_p10.items())
        print(f"{dataset} validation classes, rocchio negative weight -> P@10 after round 2: {chosen}; best {best}\n")
        vectors, labels = load(dataset, "test", args.synthetic)
        queries = sample(len(labels), args.queries)
        tuned = Strategy("rocchio", partial(rocchio, negative_weight=best))
        methods = {
            **our_methods(vectors),
            f"rocchio, weight {best} (validation)": ours(vectors, tuned),
            **qdrant_methods(vectors),
        }
        table = {
            name: precision_by_round(method, vectors, labels, queries, args.rounds, 10)
            for name, method in methods.items()
        }
        qdrant_best = max((p[2] for name, p in table.items() if name.startswith("qdrant")), default=float("nan"))
        print(f"{dataset} test classes, {len(labels)} images, {len(queries)} sessions")
        print("| method | " + " | ".join(f"round {r}" for r in range(args.rounds + 1)) + " | round 2 - qdrant's best |")
        print("|---|" + "---|" * (args.rounds + 2))
        for name, precision in table.items():
            cells = " | ".join(f"{p:.3f}" for p in precision)
            print(f"| {name} | {cells} | {100 * (precision[2] - qdrant_best):+.1f} points |")
        print()


def padded(vectors: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """``size`` unit vectors: the given ones, then noisy copies of them (the data's structure, 100k of it)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(vectors), size - len(vectors))
    extra = vectors[picks] + 0.05 * rng.standard_normal((len(picks), vectors.shape[1]), dtype=np.float32)
    out = np.concatenate([vectors, extra / np.linalg.norm(extra, axis=1, keepdims=True)])
    return out.astype(np.float32)


def faiss_index(vectors: np.ndarray, binary: bool):  # noqa: ANN201 - faiss is untyped
    import faiss

    if binary:
        index = faiss.IndexBinaryFlat(8 * vectors.shape[1])
    else:
        index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def index_callables(index, stored: np.ndarray, binary: bool):  # noqa: ANN001, ANN201
    """(search, compare) of ``search_by_examples`` over a faiss flat index of ``stored`` (codes or floats)."""
    bits = 8 * stored.shape[1]

    def search(vectors: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        if binary:
            distances, ids = index.search(binarize(vectors), n)
            return ids, 1.0 - 2.0 * distances / bits
        scores, ids = index.search(np.ascontiguousarray(vectors, dtype=np.float32), n)
        return ids, scores

    def compare(ids: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        return similarities(stored[ids], binarize(vectors) if binary else vectors)

    return search, compare


def latency(args: argparse.Namespace) -> None:
    print(f"\n## 2. One search by examples (1 query + 5 positives + 5 negatives), {args.latency_size:,} items, k=10\n")
    vectors, labels = load(args.datasets.split(",")[-1], "test", args.synthetic)
    gallery = padded(vectors, args.latency_size)
    rng = np.random.default_rng(1)
    print("| kind | strategy | p50 ms | p95 ms | plain search p95 ms |")
    print("|---|---|---|---|---|")
    for binary in (False, True):
        stored = binarize(gallery) if binary else gallery
        index = faiss_index(stored, binary)
        search, compare = index_callables(index, stored, binary)
        plain = _timed(partial(_plain_request, search, gallery[: len(vectors)], rng), args.latency_requests)
        for name in STRATEGIES.names():
            one = partial(_examples_request, search, compare, STRATEGIES.get(name), gallery, labels, rng)
            times = _timed(one, args.latency_requests)
            kind = "binary" if binary else "float"
            print(
                f"| {kind} | {name} | {np.percentile(times, 50):.1f} | {np.percentile(times, 95):.1f} | {np.percentile(plain, 95):.1f} |"
            )


def _plain_request(search, queries: np.ndarray, rng: np.random.Generator) -> None:  # noqa: ANN001
    search(queries[rng.integers(len(queries))][None, :], 10)


def _examples_request(search, compare, strategy: Strategy, gallery, labels, rng) -> None:  # noqa: ANN001
    """A session after 2 rounds: the query and 5 positives of its class, 5 negatives of others."""
    query = int(rng.integers(len(labels)))
    same, other = np.flatnonzero(labels == labels[query]), np.flatnonzero(labels != labels[query])
    positive, negative = [query, *rng.choice(same, 5)], list(rng.choice(other, 5))
    examples = Examples.of(gallery[positive], gallery[negative])
    search_by_examples(search, compare, strategy, examples, 10, np.array(positive + negative))


def _timed(call, repeats: int) -> np.ndarray:  # noqa: ANN001
    call()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(1000 * (time.perf_counter() - start))
    return np.array(times)


def grouped_codes(size: int, bits: int, per_group: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``size`` packed codes in groups of ``per_group``: each a random centre with 1/8 of its bits flipped
    (chunked: 1M x 2048 bits is 256 MB); the group keys; and the centres."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 256, (size // per_group, bits // 8), dtype=np.uint8)
    keys = np.arange(size) // per_group
    codes = np.empty((size, bits // 8), np.uint8)
    for start in range(0, size, 100_000):
        part = slice(start, min(size, start + 100_000))
        shape = (part.stop - part.start, bits // 8)
        flips = rng.integers(0, 256, shape, dtype=np.uint8) & rng.integers(0, 256, shape, dtype=np.uint8)
        codes[part] = centres[keys[part]] ^ (flips & rng.integers(0, 256, shape, dtype=np.uint8))
    return codes, keys, centres


def exact_groups(scores: np.ndarray, keys: np.ndarray, k: int) -> set[int]:
    """The ``k`` groups with the best best-hit, by brute force over every item."""
    best = np.full(keys.max() + 1, -np.inf)
    np.maximum.at(best, keys, scores)
    return set(np.argsort(-best, kind="stable")[:k].tolist())


def groups(args: argparse.Namespace) -> None:
    print("\n## 3. group_by: k=10 groups of up to 3 hits, against a plain search of k=10 and an exact grouping\n")
    print("| index | items | groups found (min) | group recall | plain p50 ms | grouped p50 ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for binary, size in ((True, args.group_binary_size), (False, args.group_float_size)):
        _group_row(args, binary, size)


def _group_row(args: argparse.Namespace, binary: bool, size: int) -> None:
    codes, keys, centres = grouped_codes(size, args.group_dim, per_group=10)
    rng = np.random.default_rng(2)
    if binary:
        stored = codes
    else:  # float vectors with the same groups: the +-1 signs of the codes plus noise
        signs = np.unpackbits(codes, axis=1).astype(np.float32) * 2 - 1
        stored = signs + rng.standard_normal(signs.shape, dtype=np.float32)
        stored /= np.linalg.norm(stored, axis=1, keepdims=True)
        del signs
    index = faiss_index(stored, binary)
    key_of = partial(_keys_of, keys)
    found, recall, plain, grouped = [], [], [], []
    for _ in range(args.group_queries):
        centre = centres[rng.integers(len(centres))][None, :]
        signs = (np.unpackbits(centre, axis=1).astype(np.float32) * 2 - 1) / np.sqrt(args.group_dim)
        query = centre if binary else signs
        search = partial(_ranked, index, query, binary)
        plain.append(_timed(partial(search, 10), 3).min())
        grouped.append(_timed(partial(grouped_search, search, key_of, 10, 3, size), 3).min())
        result = grouped_search(search, key_of, 10, 3, size)
        found.append(len(result))
        exact = exact_groups(similarities(query, stored)[0], keys, 10)
        recall.append(len({group.key for group in result} & exact) / 10)
    ratio = np.median(grouped) / np.median(plain)
    kind = f"binary {args.group_dim} bits" if binary else f"float d={args.group_dim}"
    print(
        f"| {kind} | {size:,} | {min(found)} | {np.mean(recall):.3f} | {np.median(plain):.1f} | "
        f"{np.median(grouped):.1f} | {ratio:.2f}x |"
    )


def _keys_of(keys: np.ndarray, ids: np.ndarray) -> list[int]:
    return keys[ids].tolist()


def _ranked(index, query: np.ndarray, binary: bool, n: int) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """The best ``n`` (ids, scores) of one query of a faiss flat index (binary: minus the Hamming distance)."""
    got, ids = index.search(query, n)
    return ids[0], (-got[0] if binary else got[0])


def views(args: argparse.Namespace) -> None:
    print("\n## 4. Several views per item: each class one item of its photos, R@1 (the query photo left out)\n")
    dataset = args.datasets.split(",")[-1]
    vectors, labels = load(dataset, "test", args.synthetic)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    sums = np.stack([vectors[labels == label].sum(axis=0) for label in range(labels.max() + 1)])
    counts = np.bincount(labels)
    best_view = averaged = 0
    for query in range(len(labels)):
        order = np.argsort(-sims[query], kind="stable")
        best = grouped_search(partial(_prefix, order, sims[query]), partial(_keys_of, labels), 1, 1, len(labels) - 1)
        best_view += best[0].key == labels[query]
        means = sums.copy()
        means[labels[query]] -= vectors[query]
        means /= np.maximum(counts - (np.arange(len(counts)) == labels[query]), 1)[:, None]
        averaged += int(np.argmax(means @ vectors[query])) == labels[query]
    print(f"{dataset} test: {labels.max() + 1} items, {len(labels)} photos\n")
    print("| item vector | R@1 |\n|---|---|")
    print(f"| best view (group_by, group_size 1) | {best_view / len(labels):.3f} |")
    print(f"| averaged vector per item | {averaged / len(labels):.3f} |")


def _prefix(order: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return order[:n], scores[order[:n]]


def diversity(args: argparse.Namespace) -> None:
    print("\n## 5. Diversity (MMR over the first 50 candidates): distinct labels in the first 10, P@10\n")
    print("| dataset | " + " | ".join(f"diversity {value}" for value in LAMBDAS) + " |")
    print("|---|" + "---|" * len(LAMBDAS))
    for dataset in args.datasets.split(","):
        vectors, labels = load(dataset, "test", args.synthetic)
        cells = []
        for value in LAMBDAS:
            distinct, precision = [], []
            for query in sample(len(labels), args.queries).tolist():
                relevance = vectors @ vectors[query]
                relevance[query] = -np.inf
                top = np.argsort(-relevance, kind="stable")[:50]
                chosen = top[mmr_order(relevance[top], vectors[top] @ vectors[top].T, value, 10)]
                distinct.append(len(set(labels[chosen].tolist())))
                precision.append(float(np.mean(labels[chosen] == labels[query])))
            cells.append(f"{np.mean(distinct):.2f} labels, P@10 {np.mean(precision):.3f}")
        print(f"| {dataset} | " + " | ".join(cells) + " |")


def main() -> None:
    args = parse_args()
    load_note = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# bench_examples {'(synthetic)' if args.synthetic else ''}: load {load_note}")
    print(
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}"
    )
    for section in args.sections.split(","):
        {"feedback": feedback, "latency": latency, "groups": groups, "views": views, "diversity": diversity}[section](
            args
        )
    print(f"\nload at the end: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    main()
