"""Raw embedding vs alpha-QE, DBA, DBA + alpha-QE and k-reciprocal re-ranking: test-class MAP@R and R@1,
float and binary, each method's parameters chosen on the VALIDATION classes only.

The validation classes are the trainer's (``split_records`` with the trainer's defaults: 20 % of the
training classes, or ``--val-fold``), so no figure here is tuned on the test classes. For each method and
kind (float, binary), every parameter set of the grid below is measured on the validation images (the
same protocol as ``retrieval eval --postprocess``: ``indexing/eval/postprocess_eval.py``) and the one with
the best validation MAP@R is then measured once on the test images. The chosen parameters are written
as ``retrieval eval --postprocess-params`` files (``--out``/params-METHOD-KIND.json, also what
``retrieval index build --dba N --postprocess-params`` records), and the method best on validation is
named with its command.

    nice -n 10 python bench/bench_postprocess.py --model RUN_OR_EXPORT --data ../shared/data/cars196 \\
        --out /tmp/pp_cars [--grid small]

Without ``--model`` and ``--data`` it measures a random-weights stand-in run on generated data
(``bench/stand_in_run.py``): the code runs, the figures mean nothing. Embeddings are cached in ``--out`` (``embeddings-{val,test}.npz``, keyed by the model's sha256), so a
second run with another grid embeds nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as every `retrieval` command sets them
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

import numpy as np  # noqa: E402
from given_run import model_and_data  # noqa: E402
from quick_mode import parse_quick  # noqa: E402

from retrieval.indexing.data.sources import load_records  # noqa: E402
from retrieval.indexing.data.splits import split_records  # noqa: E402
from retrieval.indexing.eval.metrics import RetrievalMetrics  # noqa: E402
from retrieval.indexing.eval.postprocess_eval import postprocess_metrics  # noqa: E402
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, embed_records  # noqa: E402
from retrieval.indexing.exported_model.resolution import resolve_export_dir  # noqa: E402
from retrieval.indexing.search.postprocess_params import (  # noqa: E402
    DbaParams,
    KReciprocalParams,
    PostprocessParams,
    QeParams,
)

GRIDS = {
    "full": {
        "qe": [QeParams(n=n, alpha=a) for n, a in itertools.product((1, 2, 3, 5, 8, 12), (0.0, 1.0, 3.0, 5.0))],
        "dba": [DbaParams(n=n, alpha=a) for n, a in itertools.product((1, 2, 3, 5, 8, 12), (0.0, 1.0, 3.0, 5.0))],
        "kreciprocal": [
            KReciprocalParams(k1=k1, k2=k2, lam=lam)
            for k1, k2, lam in itertools.product((10, 15, 20, 30), (1, 3, 6), (0.1, 0.3, 0.5))
        ],
    },
    "small": {
        "qe": [QeParams(n=n, alpha=a) for n, a in itertools.product((2, 5, 10), (1.0, 3.0))],
        "dba": [DbaParams(n=n, alpha=a) for n, a in itertools.product((2, 5, 10), (1.0, 3.0))],
        "kreciprocal": [KReciprocalParams(k1=k1, k2=6, lam=0.3) for k1 in (10, 20)],
    },
}
METHODS = ("none", "qe", "dba", "dba+qe", "kreciprocal")
KINDS = ("float", "binary")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="export or run directory (default: a random-weights stand-in)")
    parser.add_argument("--data", type=Path, help="dataset (its test classes are reported); with --model")
    parser.add_argument("--out", type=Path, help="embedding cache and chosen parameters (default: a temporary folder)")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="full")
    parser.add_argument("--val-fraction", type=float, default=0.2, help="as the trainer's data.val_fraction")
    parser.add_argument("--val-fold", type=int, default=None, help="as the trainer's data.val_fold")
    parser.add_argument("--batch-size", type=int, default=32)
    return parse_quick(parser, grid="small")


def embedded(embedder: OnnxEmbedder, records: list, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(embeddings, labels) of the readable records, from ``cache`` when it was made by this model."""
    if cache.is_file():
        stored = np.load(cache)
        if str(stored["model"]) == embedder.model_sha256 and int(stored["count"]) == len(records):
            return stored["embeddings"], stored["labels"]
    kept, embeddings, _ = embed_records(embedder, records, progress=True)
    labels = np.array([record.label for record in kept])
    np.savez(cache, embeddings=embeddings, labels=labels, model=embedder.model_sha256, count=len(records))
    return embeddings, labels


def candidates(method: str, grid: dict) -> Iterator[PostprocessParams]:
    """Every parameter set of ``method`` in the grid (dba+qe: the product of the DBA and QE grids)."""
    if method == "none":
        yield PostprocessParams()
    elif method == "qe":
        yield from (PostprocessParams(qe=qe) for qe in grid["qe"])
    elif method == "dba":
        yield from (PostprocessParams(dba=dba) for dba in grid["dba"])
    elif method == "dba+qe":
        yield from (PostprocessParams(dba=dba, qe=qe) for dba, qe in itertools.product(grid["dba"], grid["qe"]))
    else:
        yield from (PostprocessParams(kreciprocal=kr) for kr in grid["kreciprocal"])


_CACHES: dict[int, dict] = {}  # per data set: DBA galleries and k-reciprocal local sets, made once


def measure(data: tuple[np.ndarray, np.ndarray], method: str, params: PostprocessParams, threshold: float):
    embeddings, labels = data
    everything = np.ones(len(labels), bool)
    cache = _CACHES.setdefault(id(embeddings), {})
    found = postprocess_metrics(
        embeddings, labels, everything, everything, [method], params, threshold=threshold, cache=cache
    )
    return found[method]


def choose(method: str, grid: dict, val: tuple, threshold: float) -> dict[str, tuple[PostprocessParams, float]]:
    """{kind: (params, validation MAP@R)} of the best parameter set per kind."""
    best: dict[str, tuple[PostprocessParams, float]] = {}
    for params in candidates(method, grid):
        found = measure(val, method, params, threshold)
        for kind in KINDS:
            if kind not in best or found[kind].map_at_r > best[kind][1]:
                best[kind] = (params, found[kind].map_at_r)
    return best


def summary(method: str, params: PostprocessParams) -> str:
    qe, dba, kr = params.qe, params.dba, params.kreciprocal
    return {
        "none": "-",
        "qe": f"n={qe.n} a={qe.alpha:g}",
        "dba": f"n={dba.n} a={dba.alpha:g}",
        "dba+qe": f"dba n={dba.n} a={dba.alpha:g}; qe n={qe.n} a={qe.alpha:g}",
        "kreciprocal": f"k1={kr.k1} k2={kr.k2} lambda={kr.lam:g} K={kr.candidates}",
    }[method]


def main() -> None:
    args = parse_args()
    with model_and_data(args) as scratch:
        args.out = args.out or scratch / "out"
        compare(args)


def compare(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    embedder = OnnxEmbedder(resolve_export_dir(args.model))
    splits = split_records(load_records(args.data), val_fraction=args.val_fraction, val_fold=args.val_fold)
    val = embedded(embedder, splits.val, args.out / "embeddings-val.npz")
    test = embedded(embedder, splits.test, args.out / "embeddings-test.npz")
    threshold = embedder.manifest.binarization_threshold
    print(f"model {embedder.model_sha256[:12]} ({args.model}); data {args.data}")
    print(
        f"validation: {len(val[1])} images of {len(set(val[1].tolist()))} classes; test: {len(test[1])} images of "
        f"{len(set(test[1].tolist()))} classes; grid {args.grid}\n"
    )
    rows = run_methods(val, test, GRIDS[args.grid], threshold)
    print_table(rows)
    write_choices(rows, args)


Row = tuple[str, str, PostprocessParams, float, RetrievalMetrics, RetrievalMetrics]
"""(method, kind, parameters chosen on validation, validation MAP@R, test metrics, raw test metrics)."""


def run_methods(val: tuple, test: tuple, grid: dict, threshold: float) -> list[Row]:
    rows: list[Row] = []
    raw: dict[str, RetrievalMetrics] = {}
    for method in METHODS:
        started = time.perf_counter()
        best = choose(method, grid, val, threshold)
        for kind in KINDS:
            params, val_map = best[kind]
            metrics = measure(test, method, params, threshold)[kind]
            raw.setdefault(kind, metrics)
            rows.append((method, kind, params, val_map, metrics, raw[kind]))
        print(f"  {method}: {time.perf_counter() - started:.0f} s", flush=True)
    return rows


def print_table(rows: list[Row]) -> None:
    print(
        "\n| method | kind | parameters (chosen on validation) | val MAP@R | test MAP@R | vs raw | test R@1 | vs raw |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for method, kind, params, val_map, m, base in rows:
        print(
            f"| {method} | {kind} | {summary(method, params)} | {val_map:.4f} | {m.map_at_r:.4f} | "
            f"{100 * (m.map_at_r - base.map_at_r):+.1f} | {m.precision_at_1:.4f} | "
            f"{100 * (m.precision_at_1 - base.precision_at_1):+.1f} |"
        )


def write_choices(rows: list[Row], args: argparse.Namespace) -> None:
    """Each method's chosen parameters as a ``--postprocess-params`` file, and the command of the method
    that was best on validation, per kind."""
    for method, kind, params, _, _, _ in rows:
        (args.out / f"params-{method.replace('+', '_')}-{kind}.json").write_text(
            params.model_dump_json(indent=2) + "\n"
        )
    for kind in KINDS:
        method = max((row for row in rows if row[1] == kind), key=lambda row: row[3])[0]
        path = args.out / f"params-{method.replace('+', '_')}-{kind}.json"
        print(
            f"\nbest on validation, {kind}: {method}: retrieval eval --model {args.model} --data {args.data} "
            f"--postprocess none,{method} --postprocess-params {path}",
            end="",
        )
    print()


if __name__ == "__main__":
    main()
