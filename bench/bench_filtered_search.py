"""A filtered search against an unfiltered one on a 100k-item files index: p50 / p99 per query.

The index is written by the real build path (``write_index``: the SQLite item table, the faiss indexes,
the stored embeddings) over random unit vectors with ``--labels`` labels (item i has label ``c{i % labels}``),
once, and cached under ``--cache`` (default /tmp) for later runs. Each query runs what ``POST /search`` runs
on the store thread (``usecases.searching.search_store``: ``filter_warnings``, then ``ranked_pages``):
unfiltered, with ``{"label": {"$in": [10 labels]}}`` (the same filter every query: the store remembers its
matches for its generation), and with a new 10-label filter every query (its matches read from SQLite each
time), the three taking turns query by query, faiss on one thread (the service's ``search_threads``).
Target: p50 filtered <= 1.5 x p50 unfiltered, for both filtered rows.

    nice -n 10 python bench/bench_filtered_search.py              # 100k x 512-d, flat (about a minute once built)
    nice -n 10 python bench/bench_filtered_search.py --kinds flat,binary
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as `retrieval serve` sets them
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

import faiss  # noqa: E402
import numpy as np  # noqa: E402
from quick_mode import parse_quick  # noqa: E402
from vector_model import NO_MODEL_SHA256, vectors_only_manifest  # noqa: E402

from retrieval.indexing.data.records import ImageRecord  # noqa: E402
from retrieval.indexing.exported_model.model_manifest import manifest_json  # noqa: E402
from retrieval.indexing.query.chain import filter_warnings, ranked_pages  # noqa: E402
from retrieval.indexing.store.build.builder import write_index  # noqa: E402
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind  # noqa: E402
from retrieval.indexing.store.files.index_store import IndexStore  # noqa: E402
from retrieval.indexing.store.shared.items.item_filter import ItemFilter, parse_filter  # noqa: E402
from retrieval.indexing.store.shared.search_settings import SearchSettings  # noqa: E402

TARGET = 1.5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="items of the index")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--labels", type=int, default=1000, help="distinct labels (item i: c{i %% labels})")
    parser.add_argument("--in-labels", type=int, default=10, help="labels of the $in filter")
    parser.add_argument("--queries", type=int, default=200, help="queries per variant, taking turns")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--kinds", default="flat", help="float (flat) and/or binary (flat) searches: flat,binary")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()), help="where the built index is kept")
    return parse_quick(parser, size=2_000, dim=32, labels=100, queries=20)


def unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def cached_index(args: argparse.Namespace) -> Path:
    """The index of ``--size`` random vectors, built once through ``write_index`` and kept in ``--cache``."""
    out = args.cache / f"retrieval-bench-filtered-{args.size}x{args.dim}-{args.labels}labels" / "index"
    if (out / "index.json").is_file():
        print(f"cached index: {out}")
        return out
    model_dir = out.parent / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "model.onnx").write_bytes(b"random vectors, no model")
    manifest = vectors_only_manifest(args.dim)
    (model_dir / "model.json").write_text(manifest_json(manifest))
    model = SimpleNamespace(manifest=manifest, model_sha256=NO_MODEL_SHA256, export_dir=model_dir)
    records = [ImageRecord(Path(f"/bench/{i}.jpg"), f"c{i % args.labels}") for i in range(args.size)]
    started = time.perf_counter()
    kinds = (float_kind("flat"), binary_kind("flat"))
    write_index(out, model, records, unit_vectors(args.size, args.dim, 0), kinds)  # type: ignore[arg-type]
    print(f"built {args.size:,} x {args.dim} in {time.perf_counter() - started:.0f} s: {out}")
    return out


def one_search(store: IndexStore, query: np.ndarray, k: int, kind: str, where: ItemFilter | None) -> float:
    """Milliseconds of what ``POST /search`` runs on the store thread for one query."""
    started = time.perf_counter()
    filter_warnings(store, where)
    ranked_pages(store, query[None], SearchSettings(k=k, kind=kind, where=where))  # type: ignore[arg-type]
    return 1000 * (time.perf_counter() - started)


def main() -> None:
    args = parse_args()
    faiss.omp_set_num_threads(1)
    index_dir = cached_index(args)
    queries = unit_vectors(args.queries, args.dim, 1)
    numbers = [i * (args.labels // args.in_labels) for i in range(args.in_labels)]
    chosen = [f"c{number}" for number in numbers]
    matches = int(np.isin(np.arange(args.size) % args.labels, numbers).sum())
    where = parse_filter({"label": {"$in": chosen}})
    step = args.labels // args.in_labels
    fresh = [  # query q: labels o + i * step with o = 1 + q % (step - 1): never `where`'s, and a filter comes
        # back only after step - 2 others, more than the store remembers, so its matches are read each time
        parse_filter({"label": {"$in": [f"c{1 + q % (step - 1) + i * step}" for i in range(args.in_labels)]}})
        for q in range(args.queries)
    ]
    kinds = {"flat": "float", "binary": "binary"}
    print("load average {:.2f} {:.2f} {:.2f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    print(  # one query at a time: faiss scans without BLAS, so the BLAS kernel does not matter here
        f"avx512f: {'avx512f' in flags}, avx2: {'avx2' in flags}, "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, faiss {faiss.__version__}"
    )
    print(
        f"\n| search ({args.size:,} items, {args.dim}-d, k={args.k}) | filter | matches | p50 ms | p99 ms | "
        "p50 vs unfiltered |\n|---|---|---|---|---|---|"
    )
    with IndexStore.open(index_dir) as store:
        for name in args.kinds.split(","):
            kind = kinds[name]
            times: dict[str, list[float]] = {"none": [], "in": [], "fresh": []}
            for query in queries[:5]:  # warm-up: pages in, caches filled
                one_search(store, query, args.k, kind, None)
                one_search(store, query, args.k, kind, where)
            for query, new_filter in zip(queries, fresh):
                times["none"].append(one_search(store, query, args.k, kind, None))
                times["in"].append(one_search(store, query, args.k, kind, where))
                times["fresh"].append(one_search(store, query, args.k, kind, new_filter))
            plain = statistics.median(times["none"])
            variants = (
                ("none", times["none"], args.size),
                (f"label $in {args.in_labels} labels, the same filter each query", times["in"], matches),
                (f"label $in {args.in_labels} labels, a new filter each query", times["fresh"], matches),
            )
            for label, values, count in variants:
                p50, p99 = statistics.median(values), float(np.percentile(values, 99))
                print(f"| {kind} | {label} | {count:,} | {p50:.2f} | {p99:.2f} | {p50 / plain:.2f}x |")
            for variant in ("in", "fresh"):
                ratio = statistics.median(times[variant]) / plain
                verdict = "met" if ratio <= TARGET else "MISSED"
                which = "same filter" if variant == "in" else "new filters"
                print(f"{kind}, {which}: filtered p50 / unfiltered p50 = {ratio:.2f} (target <= {TARGET}: {verdict})")


if __name__ == "__main__":
    main()
