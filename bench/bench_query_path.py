"""One query's latency through the product's search path (#55: the one query path and its chain of result
steps must not make a search slower), before and after, in one run.

The same files index (random unit vectors, built once) is searched one query at a time by each checkout's own
code in its own interpreter, the two alternating round by round: ``--before PYTHON`` is the interpreter of the
checkout before the change (e.g. ``/work/main/.venv/bin/python``: its ``usecases.searching.search_vectors``),
this interpreter runs the one after (``usecases.searching.search_store`` over ``Query.embedded``), faiss on one
thread with ``OMP_WAIT_POLICY=PASSIVE`` (on the busy shared machine, spinning OpenMP threads made the same
process 1 ms or 100 ms per query at random). Each cell is the median of the rounds' medians; the ratio is
after / before. Without ``--before`` only "after" is timed.

    python bench/bench_query_path.py --before /work/main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from quick_mode import parse_quick

SETTINGS = {
    "float k=10": {"k": 10},
    "binary rerank=100": {"k": 10, "kind": "binary", "rerank": 100},
    "float k=10 min_score=0.1": {"k": 10, "min_score": 0.1},
    "float k=10 offset=20": {"k": 10, "offset": 20},
}
MEASURE = r"""
import json, sys, time
import faiss
import numpy as np
faiss.omp_set_num_threads(1)  # one query at a time: threads only spin against other jobs on a busy machine
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.usecases import searching
index_dir, queries_path, settings_json, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
queries = np.load(queries_path)
if hasattr(searching, "search_store"):
    from retrieval.indexing.query.query import Query
    def one(store, vector, settings):
        return searching.search_store(store, [Query.embedded(vector)], settings)
else:
    def one(store, vector, settings):
        return searching.search_vectors(store, vector[None], settings, empty_ok=True)
out = {}
with IndexStore.open(index_dir) as store:
    for name, options in json.loads(settings_json).items():
        settings = SearchSettings(**options)
        for vector in queries[:5]:
            one(store, vector, settings)  # warm
        times = []
        for _ in range(repeats):
            for vector in queries:
                start = time.perf_counter()
                one(store, vector, settings)
                times.append((time.perf_counter() - start) * 1000.0)
        out[name] = float(np.median(times))
print(json.dumps(out))
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000, help="gallery vectors")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=100, help="queries timed one at a time, per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of before and after")
    parser.add_argument("--before", default=None, help="the interpreter of the checkout before the change")
    return parser.parse_args(argv) if argv is not None else parse_quick(parser, size=500, queries=5, rounds=1)


def build(root: Path, size: int, dim: int) -> Path:
    from retrieval.indexing.usecases.build_request import BuildRequest
    from retrieval.indexing.usecases.vector_build import build_from_vectors

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((size, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.save(root / "vectors.npy", vectors)
    out = root / "index"
    build_from_vectors(
        BuildRequest(None, None, out, progress=False, vectors=root / "vectors.npy"), root / "vectors.npy"
    )
    return out


def measure(python: str, index_dir: Path, queries: Path) -> dict[str, float]:
    done = subprocess.run(
        [python, "-c", MEASURE, str(index_dir), str(queries), json.dumps(SETTINGS), "1"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},  # bench_search.py: spin-waiting is 60x slower here
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        index_dir = build(root, args.size, args.dim)
        rng = np.random.default_rng(1)
        queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
        np.save(root / "queries.npy", queries / np.linalg.norm(queries, axis=1, keepdims=True))
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            if args.before:
                runs["before"].append(measure(args.before, index_dir, root / "queries.npy"))
            runs["after"].append(measure(sys.executable, index_dir, root / "queries.npy"))
    print(f"gallery {args.size} x {args.dim}, {args.queries} queries x {args.rounds} rounds, median ms per query\n")
    print("| search | before (ms) | after (ms) | after / before |")
    print("|---|---:|---:|---:|")
    for name in SETTINGS:
        after = statistics.median(run[name] for run in runs["after"])
        if runs["before"]:
            before = statistics.median(run[name] for run in runs["before"])
            print(f"| {name} | {before:.3f} | {after:.3f} | {after / before:.2f} |")
        else:
            print(f"| {name} | - | {after:.3f} | - |")


if __name__ == "__main__":
    main()
