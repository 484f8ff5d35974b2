"""What the post-processing methods cost: alpha-QE and k-reciprocal per query in the service's search path,
k-reciprocal alone on the top 100, and DBA's share of an index build.

1. One query at a time, as the service searches (faiss on ``--search-threads`` OpenMP threads, the
   service's ``search_threads``), through ``ranked_pages`` (the path of ``POST /search``) on an index of
   ``--size`` clustered unit vectors: binary + float re-rank of 100 (the binary + float re-rank path)
   and exact float, each plain, with ``postprocess=qe`` and with ``postprocess=kreciprocal``. The
   variants take turns query by query; medians in ms, and each one's ratio to the plain search of its
   path measured in the same run.
2. ``k_reciprocal_rerank`` of one query's top ``candidates`` (100) alone: median ms.
3. DBA at build time: ``write_index`` of ``--dba-sizes`` vectors with and without ``--dba 10``; with
   ``--model`` and ``--data`` also a real build of that dataset's test split (embedding included, once),
   so that the overhead is a share of what ``retrieval index build`` costs.

    nice -n 10 python bench/bench_postprocess_cost.py [--size 100000] [--model RUN --data ../shared/data/cars196]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
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
from retrieval.indexing.query.chain import ranked_pages  # noqa: E402
from retrieval.indexing.search.postprocess import k_reciprocal_rerank  # noqa: E402
from retrieval.indexing.search.postprocess_params import DbaParams, IndexPostprocess, KReciprocalParams  # noqa: E402
from retrieval.indexing.search.results import SearchResults  # noqa: E402
from retrieval.indexing.store.build.builder import write_index  # noqa: E402
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind  # noqa: E402
from retrieval.indexing.store.files.files_target import FilesTarget  # noqa: E402
from retrieval.indexing.store.files.index_store import IndexStore  # noqa: E402
from retrieval.indexing.store.shared.search_settings import SearchSettings  # noqa: E402

FLAT = (float_kind("flat"), binary_kind("flat"))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="items of the searched index")
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--queries", type=int, default=100, help="one-at-a-time queries per variant")
    parser.add_argument("--float-queries", type=int, default=20, help="of them on the (slow) exact float path")
    parser.add_argument("--search-threads", type=int, default=1, help="faiss threads (the service's default: 1)")
    parser.add_argument("--dba-sizes", default="10000,20000", help="vectors of the DBA build comparison")
    parser.add_argument("--model", type=Path, help="export or run directory: also a real build with and without DBA")
    parser.add_argument("--data", type=Path, help="dataset whose test split the real build indexes")
    parser.add_argument("--workdir", type=Path, default=None)
    return parse_quick(parser, size=1_000, dim=64, queries=5, float_queries=3, dba_sizes="500")


def clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors in n/100 Gaussian clusters (noise 1.5 x the centre's norm)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 100, 1), dim), dtype=np.float32)
    x = centres[rng.integers(0, len(centres), n)] + 1.5 * rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def fake_export(folder: Path, dim: int) -> SimpleNamespace:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(b"random vectors, no model")
    manifest = vectors_only_manifest(dim)
    (folder / "model.json").write_text(manifest_json(manifest))
    return SimpleNamespace(manifest=manifest, model_sha256=NO_MODEL_SHA256, export_dir=folder)


def records(n: int) -> list[ImageRecord]:
    return [ImageRecord(Path(f"/bench/{i}.jpg"), f"c{i % 1000}") for i in range(n)]


def search_costs(args: argparse.Namespace, root: Path) -> None:
    vectors = clustered(args.size + args.queries, args.dim)
    gallery, queries = vectors[: args.size], vectors[args.size :]
    out = root / "search-index"
    started = time.perf_counter()
    write_index(out, fake_export(root / "model", args.dim), records(args.size), gallery, FLAT)
    print(f"built {args.size:,} x {args.dim} in {time.perf_counter() - started:.0f} s")
    faiss.omp_set_num_threads(args.search_threads)
    paths = {"binary + re-rank 100": {"kind": "binary", "rerank": 100}, "float (exact)": {"kind": "float"}}
    print("\n| path | postprocess | median ms per query | p90 ms | vs plain | queries |\n|---|---|---|---|---|---|")
    with IndexStore.open(out) as store:
        for path, kwargs in paths.items():
            count = args.queries if "binary" in path else args.float_queries
            times: dict[str, list[float]] = {"none": [], "qe": [], "kreciprocal": []}
            for query in queries[:count]:
                for method in times:
                    started = time.perf_counter()
                    ranked_pages(store, query, SearchSettings(k=10, postprocess=method, **kwargs))  # type: ignore[arg-type]
                    times[method].append(1000 * (time.perf_counter() - started))
            plain = statistics.median(times["none"])
            for method, values in times.items():
                median = statistics.median(values)
                p90 = float(np.percentile(values, 90))
                print(f"| {path} | {method} | {median:.2f} | {p90:.2f} | {median / plain:.2f}x | {count} |")


def kreciprocal_alone(args: argparse.Namespace) -> None:
    params = KReciprocalParams()
    candidates = clustered(params.candidates + 1, args.dim, seed=1)
    query, gallery = candidates[:1], candidates[1:]
    first = SearchResults(np.arange(params.candidates)[None], (gallery @ query[0])[None])
    times = []
    for _ in range(50):
        started = time.perf_counter()
        k_reciprocal_rerank(query, gallery, first, params)
        times.append(1000 * (time.perf_counter() - started))
    print(
        f"\nk_reciprocal_rerank, one query, top {params.candidates} of {args.dim}-d (k1 {params.k1}, k2 {params.k2}): "
        f"median {statistics.median(times):.2f} ms, p90 {np.percentile(times, 90):.2f} ms (50 runs)"
    )


def dba_builds(args: argparse.Namespace, root: Path) -> None:
    print("\n| build | items | plain s | with --dba 10 s | ratio |\n|---|---|---|---|---|")
    target = FilesTarget(postprocess=IndexPostprocess(dba=DbaParams(n=10)))
    model = fake_export(root / "model", args.dim)
    for size in [int(s) for s in args.dba_sizes.split(",") if s]:
        vectors = clustered(size, args.dim, seed=2)
        plain = timed(write_index, root / f"plain-{size}", model, records(size), vectors, FLAT)
        dba = timed(write_index, root / f"dba-{size}", model, records(size), vectors, FLAT, target=target)
        print(f"| vectors only (write_index) | {size:,} | {plain:.1f} | {dba:.1f} | {dba / plain:.2f}x |")
    if args.model and args.data:
        real_build(args, root, target)


def real_build(args: argparse.Namespace, root: Path, target: FilesTarget) -> None:
    """``index build --split test`` with and without DBA: the embedding once, timed, shared by both."""
    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.data.splits import select_split
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, embed_records
    from retrieval.indexing.exported_model.resolution import resolve_export_dir

    test = select_split(load_records(args.data), "test")
    embedder = OnnxEmbedder(resolve_export_dir(args.model))
    started = time.perf_counter()
    kept, embeddings, _ = embed_records(embedder, test, progress=False)
    embed = time.perf_counter() - started
    plain = timed(write_index, root / "real-plain", embedder, kept, embeddings, FLAT)
    dba = timed(write_index, root / "real-dba", embedder, kept, embeddings, FLAT, target=target)
    print(
        f"| {args.data.name} test split, embedding {embed:.0f} s included | {len(kept):,} | {embed + plain:.1f} | "
        f"{embed + dba:.1f} | {(embed + dba) / (embed + plain):.2f}x |"
    )


def timed(work: Callable[..., object], *args: object, **kwargs: object) -> float:
    started = time.perf_counter()
    work(*args, **kwargs)
    return time.perf_counter() - started


def main() -> None:
    args = parse_args()
    load = os.getloadavg()
    print(
        f"load average {load[0]:.1f}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, faiss {faiss.__version__}, "
        f"avx512f {'yes' if 'avx512f' in Path('/proc/cpuinfo').read_text() else 'no'}, "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}"
    )
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        root = Path(scratch)
        search_costs(args, root)
        kreciprocal_alone(args)
        dba_builds(args, root)


if __name__ == "__main__":
    main()
