"""Cost of the whitening stage's fitting (issue 33's "<= 60 s for 10k training images"), step by step.

Generated features with class structure (class centre + noise, made positive and pooled-like as
ReLU features are), ``--images`` training images of ``--classes`` classes and ``--val-images``
validation images of other classes, ``--dims`` wide. The stage runs as ``whitening.method: auto``
runs it (``fit_map``, the settings' defaults: pca and supervised x 3 shrinkages x 3 dims, ITQ to
2048 bits), scored on the validation classes as the trainer scores them (``evaluate_retrieval``, float
MAP@R). Then each step is timed on its own, with the functions the stage calls:

- scatter: one scatter matrix of the centred training features (``scatter``);
- eigh: one eigendecomposition of a ``dims`` x ``dims`` scatter matrix (``descending_eigh``, one BLAS
  thread), and the same on NumPy's default threads, as the stage ran it before;
- candidates: every whitening the settings leave open, fitted (``candidates``);
- scoring: one validation score (map, then float MAP@R), and all of them;
- itq: one ITQ step and ``itq_iterations`` of them, for the chosen dim (``fit_itq``).

Feature extraction is not part of it (the stage embeds the images first; docs/results.md times that).

    python bench/bench_whitening_fit.py                     # 10,000 x 1,280, the issue's size
    python bench/bench_whitening_fit.py --images 2000       # quicker
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from quick_mode import parse_quick

from retrieval.indexing.eval.metrics import evaluate_retrieval
from retrieval.training.config.train_config import WhiteningConfig
from retrieval.training.model.itq import fit_itq
from retrieval.training.model.whitening import LinearMap, descending_eigh, scatter
from retrieval.training.run.measures.whitening_stage import candidates, fit_map

T = TypeVar("T")
QUICK_SETTINGS = {"candidate_dims": (16, 32), "bits": 512, "itq_iterations": 2}
"""The stage's settings in a quick run: dims that 64-wide features allow, and a short ITQ."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10_000, help="training images the map is fitted on")
    parser.add_argument("--classes", type=int, default=100, help="training classes")
    parser.add_argument("--val-images", type=int, default=1_600, help="validation images (20 other classes)")
    parser.add_argument("--dims", type=int, default=1280, help="feature width (Lite0's pooled features: 1280)")
    parser.add_argument("--seed", type=int, default=0)
    return parse_quick(parser, images=400, classes=20, val_images=100, dims=64)


def class_features(
    images: int, classes: int, nuisance: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Pooled-like features: a low-rank class centre, a strong nuisance shared by every class (what supervised
    whitening learns to suppress, as on cars196) and noise, through a ReLU, L2-normalised (float32)."""
    labels, dims = np.arange(images) % classes, nuisance.shape[1]
    centres = rng.standard_normal((classes, 64)) @ rng.standard_normal((64, dims)) / 8
    shared = rng.standard_normal((images, len(nuisance))) @ nuisance
    values = np.maximum(centres[labels] + shared + 0.5 * rng.standard_normal((images, dims)) + 0.3, 0)
    return (values / np.linalg.norm(values, axis=1, keepdims=True)).astype(np.float32), labels


def timed(call: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def main() -> None:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    nuisance = rng.standard_normal((32, args.dims)) / 4  # the spread every class shares (pose, background)
    train, train_labels = class_features(args.images, args.classes, nuisance, rng)
    val, val_labels = class_features(args.val_images, 20, nuisance, rng)
    settings = WhiteningConfig(method="auto", **(QUICK_SETTINGS if args.quick else {}))  # type: ignore[arg-type]

    def score(linear: LinearMap | None) -> float:
        mapped = val if linear is None else linear.apply(val)
        return evaluate_retrieval(mapped, val_labels, compute_nmi=False).map_at_r

    (linear, report), total = timed(lambda: fit_map(settings, train, train_labels, score))
    print(f"fit_map: {total:.1f} s, chose {report['method']} dim {report['dim']} shrinkage {report['shrinkage']}")
    centred = train.astype(np.float64) - train.mean(axis=0, dtype=np.float64)
    covariance, scatter_s = timed(lambda: scatter(centred))
    _, eigh_s = timed(lambda: descending_eigh(covariance))
    _, eigh_threads_s = timed(lambda: np.linalg.eigh(covariance))  # as before: on every BLAS thread
    found, candidates_s = timed(lambda: candidates(settings, train, train_labels))
    scores = [timed(lambda candidate=candidate: score(candidate.linear))[1] for candidate in found]
    dim = int(report["dim"] or 512)  # none chosen: time ITQ at 512 dims, the case
    whitened = next(c.linear for c in found if c.linear is not None and c.linear.dim == dim).apply(train)
    _, itq_one_s = timed(lambda: fit_itq(whitened, settings.bits, iterations=1))
    _, itq_s = timed(lambda: fit_itq(whitened, settings.bits, iterations=settings.itq_iterations))

    load = os.getloadavg()
    print(f"{args.images} training images x {args.dims} dims, {args.classes} classes; {args.val_images} validation")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
    print()
    print("| step | count | seconds each | seconds |")
    print("|---|---|---|---|")
    print(f"| scatter matrix ({args.images} x {args.dims}) | 1 | {scatter_s:.2f} | {scatter_s:.2f} |")
    print(f"| eigendecomposition ({args.dims} x {args.dims}), one BLAS thread | 1 | {eigh_s:.2f} | {eigh_s:.2f} |")
    print(f"| the same on every BLAS thread (before) | 1 | {eigh_threads_s:.2f} | {eigh_threads_s:.2f} |")
    print(f"| candidates (every whitening fitted) | {len(found)} | - | {candidates_s:.2f} |")
    print(f"| validation scoring | {len(scores)} | {np.median(scores):.3f} | {sum(scores):.2f} |")
    print(f"| ITQ ({dim} -> {settings.bits} bits) | {settings.itq_iterations} | {itq_one_s:.2f} | {itq_s:.2f} |")
    print(f"| **fit_map, all of it** | 1 | - | **{total:.1f}** |")


if __name__ == "__main__":
    main()
