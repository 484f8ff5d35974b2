"""The few-validation-classes protocol of ``bench_calibration.py --few-classes N`` (issue 58): calibrations and
cut-offs fitted on N validation classes drawn from the training split, measured on the test classes.

Each draw picks N of the training split's classes as validation classes; their images are the queries, searched
among every training-split image (as ``retrieval train`` fits). The fits compared:

- ``validation classes (today)``: Platt's fit on the validation queries' first 10 hits;
- ``every training-split class (cross-fit)``: Platt's fit with every training-split image a query. For a model
  that did not train on them (``--epochs 0``, training-free) these classes are as unseen as the validation
  ones; for a trained model this would need one model per class fold (not measured here);
- ``power prior w``: the validation pairs plus the other training classes' pairs weighted ``w`` (a Gaussian-free
  Bayesian shrinkage toward the training classes' fit: their likelihood raised to the power ``w``);
- ``gap to the 10th hit``: Platt's fit on the score and the score minus the query's 10th score (per-query
  normalisation);
- ``split-conformal over classes``: for a target precision p, the per-class score thresholds that reach p on
  its queries' first hits; the ceil((n + 1)(1 - alpha))-th smallest of the n classes' thresholds is, for a new
  class exchangeable with them, at least its own with probability >= 1 - alpha (alpha = 0.2; with n < 4 no
  threshold is certified and nothing is kept).

Reported on the test classes' first 10 hits: ECE, the precision of the hits kept at min_probability 0.5 and 0.8,
and the coverage of the class-jackknife interval (``indexing.probability.interval``): the share of test hits in
probability bins whose realised same-class fraction lies inside the bin's mean interval. Then the cut-offs,
F1 of the returned set (of the first ``DEPTH`` hits) against every same-class gallery image, each tuned on the
fitting classes: the global min_probability, Weaviate's autocut (jumps in the normalised score curve; its
parameter and the page size tuned), open-metric-learning's AdaptiveThresholding (first gap above n_std times
the mean gap) and ``cutoff=auto`` (``indexing.probability.cutoff``; min_probability floor tuned too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.probability.cutoff import auto_cutoff_rows
from retrieval.indexing.probability.interval import jackknife_interval
from retrieval.indexing.probability.logistic import logistic_parameters
from retrieval.indexing.probability.reliability import expected_calibration_error

TOP = 10
DEPTH = 100
ALPHA = 0.2
Fit = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Ranked:
    """Each query's first ``DEPTH`` hits: scores, same class, its class, same-class gallery images in all."""

    scores: np.ndarray
    same: np.ndarray
    classes: np.ndarray
    relevant: np.ndarray

    def top(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.scores[:, :TOP].ravel(), self.same[:, :TOP].ravel(), np.repeat(self.classes, TOP)

    def subset(self, rows: np.ndarray) -> Ranked:
        return Ranked(self.scores[rows], self.same[rows], self.classes[rows], self.relevant[rows])


def ranked(embeddings: np.ndarray, labels: np.ndarray, queries: np.ndarray, gallery: np.ndarray) -> Ranked:
    """The first hits of each ``queries`` image among the ``gallery`` images (boolean masks), itself left out."""
    q, g = np.flatnonzero(queries), np.flatnonzero(gallery)
    depth = min(DEPTH, len(g) - 1)
    scores, same = [], []
    for start in range(0, len(q), 512):
        rows = q[start : start + 512]
        block = embeddings[rows] @ embeddings[g].T
        block[rows[:, None] == g[None, :]] = -np.inf
        order = np.argsort(-block, axis=1)[:, :depth]
        scores.append(np.take_along_axis(block, order, 1))
        same.append(labels[g][order] == labels[rows][:, None])
    gallery_labels, counts = np.unique(labels[g], return_counts=True)
    per_class = dict(zip(gallery_labels.tolist(), counts.tolist(), strict=True))
    relevant = np.array([per_class.get(label, 0) for label in labels[q].tolist()]) - gallery[q]
    return Ranked(np.concatenate(scores), np.concatenate(same), labels[q], relevant)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


def _weighted_platt(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    theta = np.zeros(x.shape[1])
    for _ in range(60):
        p = _sigmoid(x @ theta)
        hessian = (x * (weights * p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, x.T @ (weights * (p - y)) + 1e-6 * theta)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return theta


def platt(fitted: Ranked, prior: Ranked | None = None, weight: float = 0.0) -> Fit:
    scores, same, _ = fitted.top()
    weights = np.ones(len(scores))
    if prior is not None and weight > 0:
        more_scores, more_same, _ = prior.top()
        scores, same = np.concatenate([scores, more_scores]), np.concatenate([same, more_same])
        weights = np.concatenate([weights, np.full(len(more_scores), weight)])
    a, b = _weighted_platt(np.stack([scores, np.ones(len(scores))], 1), same.astype(float), weights)
    return lambda s: _sigmoid(a * s + b)


def platt_gap(fitted: Ranked) -> Fit:
    def features(s: np.ndarray) -> np.ndarray:
        return np.stack([s, s - s[:, TOP - 1 : TOP], np.ones_like(s)], -1)

    x = features(fitted.scores)[:, :TOP].reshape(-1, 3)
    theta = _weighted_platt(x, fitted.same[:, :TOP].ravel().astype(float), np.ones(len(x)))
    return lambda s: _sigmoid(features(s) @ theta)


def query_adaptive(fitted: Ranked) -> Fit:
    """Platt's fit on the score and the mean of the query's first 10 scores (its neighbourhood's density, as in
    query-adaptive scoring), over all ``DEPTH`` hits of each fitting query: what a cut-off deep in a list reads."""

    def features(s: np.ndarray) -> np.ndarray:
        return np.stack([s, np.broadcast_to(s[:, :TOP].mean(1, keepdims=True), s.shape), np.ones_like(s)], -1)

    x = features(fitted.scores).reshape(-1, 3)
    theta = _weighted_platt(x, fitted.same.ravel().astype(float), np.ones(len(x)))
    return lambda s: _sigmoid(features(s) @ theta)


def conformal_threshold(fitted: Ranked, precision: float, alpha: float = ALPHA) -> float:
    """The split-conformal score threshold over classes for ``precision`` (inf: none certified)."""
    scores, same, classes = fitted.top()
    needed = []
    for name in np.unique(classes):
        s, y = scores[classes == name], same[classes == name]
        order = np.argsort(-s)
        reached = np.flatnonzero(np.cumsum(y[order]) / np.arange(1, len(order) + 1) >= precision)
        needed.append(s[order][reached.max()] if len(reached) else np.inf)
    rank = int(np.ceil((len(needed) + 1) * (1 - alpha)))
    return float(np.inf) if rank > len(needed) else float(np.sort(needed)[rank - 1])


def coverage(fitted: Ranked, test: Ranked) -> float:
    """The share of test hits in probability bins (tenths) whose same-class fraction lies in the bin's mean
    class-jackknife interval of the fit on ``fitted``."""
    scores, same, classes = fitted.top()
    interval = jackknife_interval(scores, same.astype(float), classes, logistic_parameters)
    s, y, _ = test.top()
    p = platt(fitted)(s)
    low, high = interval.bounds(s, p)
    bins = np.minimum((p * 10).astype(int), 9)
    return float(
        sum(
            (bins == b).mean()
            for b in np.unique(bins)
            if low[bins == b].mean() <= y[bins == b].mean() <= high[bins == b].mean()
        )
    )


def f1(keep: np.ndarray, data: Ranked) -> float:
    """Mean over queries of the F1 of the kept hits against every same-class gallery image."""
    right = (keep & data.same).sum(1)
    precision = right / np.maximum(keep.sum(1), 1)
    recall = right / np.maximum(data.relevant, 1)
    return float(np.mean(np.where(right > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0)))


def autocut(scores: np.ndarray, jumps: int, limit: int) -> np.ndarray:
    """Weaviate's autocut on the first ``limit`` hits: the curve normalised to [0, 1] minus the diagonal; cut
    after the ``jumps``-th local maximum."""
    s = scores[:, :limit]
    n = s.shape[1]
    diff = (s - s[:, -1:]) / np.maximum(s[:, :1] - s[:, -1:], 1e-12) - np.arange(n) / max(n - 1, 1)
    peak = (diff[:, 1:-1] > diff[:, :-2]) & (diff[:, 1:-1] > diff[:, 2:])
    seen = np.cumsum(peak, 1)
    cut = np.where((seen >= jumps).any(1), (seen >= jumps).argmax(1) + 1, n)
    keep = np.arange(n)[None, :] < cut[:, None]
    return np.pad(keep, ((0, 0), (0, scores.shape[1] - n)))


def adaptive_thresholding(scores: np.ndarray, n_std: float) -> np.ndarray:
    """open-metric-learning's AdaptiveThresholding: cut at the first gap above ``n_std`` times the mean gap."""
    gaps = scores[:, :-1] - scores[:, 1:]
    big = gaps > n_std * gaps.mean()
    last = np.where(big.any(1), big.argmax(1), scores.shape[1] - 1)
    return np.arange(scores.shape[1])[None, :] <= last[:, None]


PROBABILITY_GRID = np.round(np.linspace(0.05, 0.95, 19), 2)
AUTOCUT_GRID = [(jumps, limit) for jumps in (1, 2, 3, 4) for limit in (10, 20, 50, 100)]
N_STD_GRID = (0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16)


def cutoff_f1(tune: Ranked, test: Ranked, fit: Fit) -> dict[str, float]:
    """Each cut-off rule tuned on ``tune``, its F1 on ``test``."""
    p_tune, p_test = fit(tune.scores), fit(test.scores)
    adaptive = query_adaptive(tune)
    scores, same = tune.scores.ravel(), tune.same.ravel().astype(float)
    a, b = _weighted_platt(np.stack([scores, np.ones(len(scores))], 1), same, np.ones(len(scores)))
    deep = _sigmoid(a * test.scores + b)
    best_p = max(PROBABILITY_GRID, key=lambda p: f1(p_tune >= p, tune))
    jumps, limit = max(AUTOCUT_GRID, key=lambda c: f1(autocut(tune.scores, *c), tune))
    n_std = max(N_STD_GRID, key=lambda n: f1(adaptive_thresholding(tune.scores, n), tune))
    floor = max(PROBABILITY_GRID, key=lambda p: f1(auto_cutoff_rows(p_tune, p), tune))
    return {
        "global min_probability": f1(p_test >= best_p, test),
        "Weaviate autocut": f1(autocut(test.scores, jumps, limit), test),
        "OML AdaptiveThresholding": f1(adaptive_thresholding(test.scores, n_std), test),
        "cutoff=auto": f1(auto_cutoff_rows(p_test), test),
        "cutoff=auto, min_probability floor tuned": f1(auto_cutoff_rows(p_test, floor), test),
        "cutoff=auto on a fit over all 100 hits": f1(auto_cutoff_rows(deep), test),
        "cutoff=auto on query-adaptive probabilities": f1(auto_cutoff_rows(adaptive(test.scores)), test),
        "best single cut per query (oracle, for scale)": _oracle(test),
    }


def _oracle(test: Ranked) -> float:
    """The F1 of the best prefix of each query's list: what no rule without the labels can beat."""
    right = np.cumsum(test.same, 1)
    n = np.arange(1, test.same.shape[1] + 1)[None, :]
    best = np.max(2 * right / (n + np.maximum(test.relevant, 1)[:, None]), axis=1)
    return float(best.mean())


def kept_precision(p: np.ndarray, same: np.ndarray, cut: float) -> float:
    kept = p >= cut
    return float(same[kept].mean()) if kept.any() else float("nan")


def one_draw(
    embeddings: np.ndarray, labels: np.ndarray, pool: np.ndarray, test: Ranked, everything: Ranked, seed: int, n: int
) -> dict[str, float]:
    """The figures of one draw of ``n`` validation classes out of the training-split classes ``pool``."""
    validation = np.random.default_rng(seed).choice(pool, n, replace=False)
    in_pool = np.isin(labels, pool)
    fitted = ranked(embeddings, labels, np.isin(labels, validation), in_pool)
    others = everything.subset(~np.isin(everything.classes, validation))
    fits: dict[str, Fit] = {
        "validation classes (today)": platt(fitted),
        "every training-split class (cross-fit)": platt(everything),
        "power prior w=0.1": platt(fitted, others, 0.1),
        "power prior w=1": platt(fitted, others, 1.0),
        "validation classes, gap to the 10th hit": platt_gap(fitted),
        "every training-split class, gap to the 10th hit": platt_gap(everything),
    }
    s, y, _ = test.top()
    figures: dict[str, float] = {}
    for name, fit in fits.items():
        p = fit(test.scores[:, :TOP]).ravel()
        figures[f"{name}: ECE"] = expected_calibration_error(p, y)
        for cut in (0.5, 0.8):
            figures[f"{name}: precision at {cut}"] = kept_precision(p, y, cut)
    for name, source in (("validation classes", fitted), ("every training-split class", everything)):
        for cut in (0.5, 0.8):
            kept = s >= conformal_threshold(source, cut)
            figures[f"split-conformal, {name}: precision at {cut}"] = (
                float(y[kept].mean()) if kept.any() else float("nan")
            )
            figures[f"split-conformal, {name}: recall kept at {cut}"] = float(kept[y].mean())
        figures[f"interval, {name}: coverage"] = coverage(source, test)
    for name, (tune, fit) in {
        "tuned on validation classes": (fitted, fits["validation classes (today)"]),
        "tuned on every training-split class": (everything, fits["every training-split class (cross-fit)"]),
    }.items():
        for rule, value in cutoff_f1(tune, test, fit).items():
            figures[f"F1, {name}: {rule}"] = value
    return figures
