"""What ``retrieval serve --verify-on-load`` costs: the service's load of an index with and without
``retrieval index verify``'s checks, by index size (issue 44).

A random-weights resnet18 export (512-d, as the service would load it) and random unit vectors written as
``retrieval index build`` writes them (flat float + flat binary kinds), so that the index is as large as
asked without embedding images. Each row times, in this process and from a cold page cache where the
kernel allows it and ``--cold`` asks (it empties the whole machine's cache: not on a shared machine),
else warm (said in the table), what a (re)load does: the model (``OnnxEmbedder``), the
load checks (``check_on_load``: manifest seal, model copy's sha256) and the store's open; then the same
with ``verify=True`` (every file's sha256, every vector against the faiss indexes, every record).

    python bench/bench_verify_on_load.py                    # 20k and 200k items (a few minutes)
    python bench/bench_verify_on_load.py --sizes 1000000    # ~3 GB on disk, long
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench_index_updates import random_unit, records
from bench_models import export_resnet18
from quick_mode import parse_quick

DIM = 512  # resnet18's pooled features


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,200000", help="comma-separated index sizes (items)")
    parser.add_argument("--repeats", type=int, default=2, help="loads timed per setting (the best is shown)")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before each load (root)")
    return parse_quick(parser, sizes="300", repeats=1)


def _drop_page_cache() -> bool:
    """Ask the kernel to forget cached file pages (root only); whether it did."""
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
    except OSError:
        return False
    return True


def _load_seconds(index_dir: Path, verify: bool, cold: bool) -> tuple[float, bool]:
    """One load as the service makes it (model, load checks, store); (seconds, from a cold cache)."""
    from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
    from retrieval.indexing.store.backends import open_store
    from retrieval.indexing.store.maintenance.load_checks import check_on_load

    cold = cold and _drop_page_cache()
    started = time.perf_counter()
    embedder = OnnxEmbedder(index_dir / INDEX_MODEL_SUBDIR, threads=1)
    check_on_load(index_dir, embedder.manifest, verify=verify)
    store = open_store(index_dir, expected_model_sha256=embedder.model_sha256)
    seconds = time.perf_counter() - started
    store.close()
    embedder.close()
    return seconds, cold


def _build(size: int, export: Any, root: Path) -> Path:
    import numpy as np

    from retrieval.indexing.store.build.builder import write_index
    from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind

    out = root / f"index-{size}"
    vectors = random_unit(np.random.default_rng(size), size, DIM)
    write_index(out, export, records(0, size), vectors, (float_kind("flat"), binary_kind("flat")))
    return out


def main() -> None:
    args = parse_args()
    from retrieval.indexing.exported_model.model_manifest import file_sha256
    from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        root = Path(tmp)
        export_resnet18(root / "export")
        export = SimpleNamespace(  # what write_index reads of an embedder
            manifest=load_model_manifest(root / "export"),
            model_sha256=file_sha256(root / "export" / "model.onnx"),
            export_dir=root / "export",
        )
        for size in (int(part) for part in args.sizes.split(",")):
            index_dir = _build(size, export, root)
            megabytes = sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file()) / 1e6
            plain = min(_load_seconds(index_dir, verify=False, cold=args.cold) for _ in range(args.repeats))
            verified = min(_load_seconds(index_dir, verify=True, cold=args.cold) for _ in range(args.repeats))
            cache = "cold" if plain[1] else "warm"
            rows.append((size, megabytes, plain[0], verified[0], cache))
            print(f"  {size:,} items done", flush=True)
    print("\n| items | index on disk | load (model + checks + store) | load with --verify-on-load | ratio | cache |")
    print("|---|---|---|---|---|---|")
    for size, megabytes, plain_s, verified_s, cache in rows:
        print(
            f"| {size:,} | {megabytes:,.0f} MB | {plain_s:.2f} s | {verified_s:.2f} s | {verified_s / plain_s:.1f}x | {cache} |"
        )


if __name__ == "__main__":
    main()
