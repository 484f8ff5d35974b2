"""The milvus backend on embedded milvus-lite vs the files backend's flat faiss indexes, per gallery size.

Times, on the same random unit 2048-d vectors: the bulk insert of a build, ``MilvusStore.add`` of 100
items, and one-query searches (float IP, binary Hamming, binary + re-rank of a 100 shortlist) through
``MilvusStore.search``, against faiss ``IndexFlatIP`` / ``IndexBinaryFlat`` (what ``--float-kind flat
--binary-kind flat`` search) on the same data, as ratios in the same run. Also the on-disk size.

    python bench/bench_milvus.py                 # 2,000 and 10,000 items (about a minute)
    python bench/bench_milvus.py --sizes 100000  # bigger (minutes; milvus-lite is one process)
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
from quick_mode import parse_quick, skip
from vector_model import NO_MODEL_SHA256, vectors_only_manifest

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.milvus.milvus_build import BINARY_KIND, FLOAT_KIND, INSERT_BATCH
from retrieval.indexing.store.milvus.milvus_client import connect, create_collections, meta_collection
from retrieval.indexing.store.milvus.milvus_rows import item_rows, save_next_id
from retrieval.indexing.store.milvus.milvus_store import MilvusStore
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest, save_index_manifest, utc_now

DIM = 2048


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000", help="comma-separated gallery sizes")
    parser.add_argument("--queries", type=int, default=30, help="queries timed one at a time")
    parser.add_argument("--k", type=int, default=10)
    return parse_quick(parser, sizes="200", queries=5)


def unit_vectors(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def records(count: int, start: int) -> list[ImageRecord]:
    return [ImageRecord(path=Path(f"/gallery/{start + i}.jpg"), label=f"c{(start + i) % 100}") for i in range(count)]


def build(root: Path, vectors: np.ndarray) -> tuple[Path, float]:
    """A milvus index directory (no model/: searching needs none) and the seconds of its bulk insert."""
    uri, name = str(root / "milvus.db"), "bench"
    client = connect(uri)
    started = time.perf_counter()
    create_collections(client, name, dim=DIM, bits=DIM)
    for begin in range(0, len(vectors), INSERT_BATCH):
        chunk = vectors[begin : begin + INSERT_BATCH]
        ids = range(begin + 1, begin + 1 + len(chunk))
        client.insert(name, data=item_rows(records(len(chunk), begin), chunk, ids, 0.0))
    save_next_id(client, meta_collection(name), uri, len(vectors) + 1)
    seconds = time.perf_counter() - started
    client.close()
    model = vectors_only_manifest(DIM)
    now = utc_now()
    manifest = IndexManifest(
        model_sha256=NO_MODEL_SHA256,
        model=model,
        model_dir=str(root),
        dim=DIM,
        bits=DIM,
        float_kind=FLOAT_KIND,
        binary_kind=BINARY_KIND,
        count=len(vectors),
        num_labels=100,
        generation=0,
        created_at=now,
        updated_at=now,
        backend="milvus",
        milvus_uri=uri,
        milvus_collection=name,
    )
    save_index_manifest(root / "index", manifest)
    return root / "index", seconds


def median_ms(search, queries: np.ndarray) -> float:
    times = []
    for query in queries:
        started = time.perf_counter()
        search(query[None])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(size: int, args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    vectors, queries = unit_vectors(size, 0), unit_vectors(args.queries, 1)
    float_index, binary_index = faiss.IndexFlatIP(DIM), faiss.IndexBinaryFlat(DIM)
    float_index.add(vectors)
    binary_index.add(binarize(vectors))
    with tempfile.TemporaryDirectory() as tmp:
        index_dir, insert_s = build(Path(tmp), vectors)
        with MilvusStore.open(index_dir) as store:
            started = time.perf_counter()
            store.add(records(100, size), unit_vectors(100, 2))
            add_ms = (time.perf_counter() - started) * 1000 / 100
            rows = [
                ("float IP", lambda q: store.search(q, args.k), lambda q: float_index.search(q, args.k)),
                (
                    "binary Hamming",
                    lambda q: store.search(q, args.k, kind="binary"),
                    lambda q: binary_index.search(binarize(q), args.k),
                ),
                ("binary + rerank 100", lambda q: store.search(q, args.k, kind="binary", rerank=100), None),
            ]
            table = []
            for name, milvus_search, faiss_search in rows:
                milvus_ms = median_ms(milvus_search, queries)
                faiss_ms = median_ms(faiss_search, queries) if faiss_search else float("nan")
                ratio = f"{milvus_ms / faiss_ms:.1f}x" if faiss_search else ""
                table.append(
                    (
                        f"{size:,}",
                        f"search: {name}",
                        f"{milvus_ms:.2f} ms",
                        f"{faiss_ms:.2f} ms ({ratio})" if faiss_search else "-",
                    )
                )
        disk_mb = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file()) / 1e6
    files_mb = size * (DIM * 2 + DIM * 4 + DIM // 8) / 1e6  # embeddings.f16 + float.faiss + binary.faiss
    table += [
        (f"{size:,}", "build insert / item", f"{insert_s * 1000 / size:.2f} ms", "-"),
        (f"{size:,}", "add 100 / item", f"{add_ms:.2f} ms", "-"),
        (f"{size:,}", "on disk", f"{disk_mb:.0f} MB", f"{files_mb:.0f} MB (files, flat kinds)"),
    ]
    return table


def main() -> None:
    args = parse_args()
    if importlib.util.find_spec("milvus_lite") is None:
        skip("milvus-lite is not installed (pip install -e '.[milvus]')")
    faiss.omp_set_num_threads(1)  # one query at a time, as the service's store thread searches
    header = ("items", "what (median of one-query calls)", "milvus-lite 2.5.1", "faiss flat (ratio)")
    rows = [row for size in (int(s) for s in args.sizes.split(",")) for row in measure(size, args)]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * width for width in widths), *rows]:
        print("| " + " | ".join(str(cell).ljust(width) for cell, width in zip(row, widths)) + " |")


if __name__ == "__main__":
    main()
