"""Label audit (``retrieval data audit``) against cleanlab 2.9 on the same embeddings.

``planted``: 5 % of the items' labels flipped, to a random other class (``random``) or to the class whose mean
is nearest the true one's (``nearest``, by the embeddings' class means); each method ranks all items, scored by
average precision (AP) and precision at the number planted (P@m), means over ``--seeds``. cleanlab runs each
way its docs offer for features without a trained classifier: out-of-fold kNN ``pred_probs``
(scikit-learn ``KNeighborsClassifier``, cosine, 5 folds), cross-validated logistic-regression ``pred_probs`` (5
folds, the best of ``--lr-c``), and ``Datalab(...).find_issues(features=...)``; the first two with each
``get_label_quality_scores`` method, the best reported.

``outliers``: 2 % foreign images (``--foreign``: another dataset's photos, embedded by the same model) planted
among the data under random labels; AUROC of the outlier scores against Datalab's outlier issue score.

``scale``: random clustered vectors (``--size`` x ``--dim``, ``--classes`` classes), ours and cleanlab's kNN
path (the one that runs at this size) each in its own process: time and peak RSS; 1M projected from growth.

Embeddings: EfficientNet-Lite0's ImageNet weights, the default model of ``retrieval data audit``
(``audit_embeddings.py``, cached). ``--split`` picks the classes: ``training`` (classes 001-025 of cub50,
001-098 of cars196: where the method was chosen) or ``test`` (the test classes, held out from the choice).

    python bench/bench_label_audit.py planted --data ../shared/data/cub50 ../shared/data/cars196
    python bench/bench_label_audit.py outliers --data ../shared/data/cub50 --foreign ../shared/data/cars196
    python bench/bench_label_audit.py scale --size 100000 --classes 5000 --dim 128
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from quick_mode import parse_quick

FLIP = 0.05
FOREIGN = 0.02
METHODS = ("self_confidence", "normalized_margin", "confidence_weighted_entropy")


def plant_flips(labels: np.ndarray, vectors: np.ndarray, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(noisy labels, planted mask)``: ``FLIP`` of the items moved to another class (``kind``)."""
    rng = np.random.default_rng(seed)
    classes = int(labels.max()) + 1
    chosen = rng.choice(len(labels), int(round(FLIP * len(labels))), replace=False)
    noisy = labels.copy()
    if kind == "random":
        shift = rng.integers(1, classes, len(chosen))
        noisy[chosen] = (labels[chosen] + shift) % classes
    else:
        means = np.stack([vectors[labels == c].mean(axis=0) for c in range(classes)])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        similar = means @ means.T
        np.fill_diagonal(similar, -np.inf)
        noisy[chosen] = similar.argmax(axis=1)[labels[chosen]]
    planted = np.zeros(len(labels), bool)
    planted[chosen] = True
    return noisy, planted


def ours(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from retrieval.indexing.audit.audit_scores import audit_scores

    scores = audit_scores(vectors, [str(label) for label in labels])
    return scores.label_scores, scores.outlier_scores


def cleanlab_paths(vectors: np.ndarray, labels: np.ndarray, lr_c: list[float]) -> dict[str, list[np.ndarray]]:
    """Issue scores (higher = more likely mislabelled) of each cleanlab path, one per variant."""
    from cleanlab.rank import get_label_quality_scores
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.neighbors import KNeighborsClassifier

    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    found: dict[str, list[np.ndarray]] = {"cleanlab kNN": [], "cleanlab LR": []}
    knn = KNeighborsClassifier(n_neighbors=10, metric="cosine", weights="distance")
    probs = {"cleanlab kNN": [cross_val_predict(knn, vectors, labels, cv=folds, method="predict_proba")]}
    probs["cleanlab LR"] = [
        cross_val_predict(LogisticRegression(C=c, max_iter=300), vectors, labels, cv=folds, method="predict_proba")
        for c in lr_c
    ]
    for name, variants in probs.items():
        for pred in variants:
            found[name] += [1 - get_label_quality_scores(labels, pred, method=method) for method in METHODS]
    found["cleanlab Datalab"] = [1 - datalab(vectors, labels)["label_score"].to_numpy()]
    return found


def datalab(vectors: np.ndarray, labels: np.ndarray, issue: str = "label"):  # noqa: ANN201 - a pandas frame
    from cleanlab import Datalab

    lab = Datalab({"labels": labels}, label_name="labels", verbosity=0)
    lab.find_issues(features=vectors, issue_types={issue: {}})
    return lab.get_issues(issue)


def precision_at_planted(scores: np.ndarray, planted: np.ndarray) -> float:
    return float(planted[np.argsort(-scores, kind="stable")[: planted.sum()]].mean())


def planted_table(args: argparse.Namespace) -> None:
    from sklearn.metrics import average_precision_score

    print(f"load: {os.getloadavg()}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}")
    print("| data | flips | method | AP | P@m | ratio AP / cleanlab best |")
    print("|---|---|---|---|---|---|")
    for data_name, vectors, labels in datasets(args):
        for kind in ("random", "nearest"):
            rows: dict[str, list[tuple[float, float]]] = {}
            for seed in range(args.seeds):
                noisy, planted = plant_flips(labels, vectors, kind, seed)
                candidates = {"retrieval audit": [ours(vectors, noisy)[0]]} | cleanlab_paths(vectors, noisy, args.lr_c)
                for name, variants in candidates.items():
                    aps = [average_precision_score(planted, s) for s in variants]
                    best = int(np.argmax(aps))
                    rows.setdefault(name, []).append((aps[best], precision_at_planted(variants[best], planted)))
            means = {name: np.mean(values, axis=0) for name, values in rows.items()}
            best_cleanlab = max(ap for name, (ap, _) in means.items() if name.startswith("cleanlab"))
            for name, (ap, precision) in means.items():
                print(f"| {data_name} | {kind} | {name} | {ap:.3f} | {precision:.3f} | {ap / best_cleanlab:.3f} |")


def datasets(args: argparse.Namespace):  # noqa: ANN201 - yields (name, vectors, labels)
    if args.quick:
        vectors, labels = clustered(300, 12, 16, seed=0)
        yield "synthetic", vectors, labels
        return
    from audit_embeddings import embedded

    for folder in args.data:
        table = embedded(Path(folder), training_only=args.split == "training")
        keep = np.isin(table.splits, ["train", "val"] if args.split == "training" else ["test"])
        _, labels = np.unique(table.labels[keep], return_inverse=True)
        yield f"{Path(folder).name} {args.split} ({keep.sum()} images)", table.vectors[keep], labels


def clustered(size: int, classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random class centres, items around them (cosine to the centre about 0.7), L2-normalised."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim)).astype(np.float32)
    labels = rng.integers(0, classes, size)
    vectors = centres[labels] + rng.normal(size=(size, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True), labels


def outlier_table(args: argparse.Namespace) -> None:
    from sklearn.metrics import roc_auc_score

    print(f"load: {os.getloadavg()}")
    print("| data | foreign | method | AUROC | ratio |")
    print("|---|---|---|---|---|")
    for data_name, vectors, labels, foreign in outlier_sets(args):
        mixed = np.concatenate([vectors, foreign])
        rng = np.random.default_rng(0)
        noisy = np.concatenate([labels, rng.integers(0, labels.max() + 1, len(foreign))])
        truth = np.r_[np.zeros(len(vectors), bool), np.ones(len(foreign), bool)]
        theirs = roc_auc_score(truth, 1 - datalab(mixed, noisy, "outlier")["outlier_score"].to_numpy())
        mine = roc_auc_score(truth, ours(mixed, noisy)[1])
        for name, value in (("retrieval audit", mine), ("cleanlab Datalab outlier", theirs)):
            print(f"| {data_name} | {len(foreign)} | {name} | {value:.3f} | {value - theirs:+.3f} |")


def outlier_sets(args: argparse.Namespace):  # noqa: ANN201 - yields (name, vectors, labels, foreign vectors)
    if args.quick:
        vectors, labels = clustered(300, 12, 16, seed=0)
        foreign, _ = clustered(6, 2, 16, seed=1)
        yield "synthetic", vectors, labels, foreign
        return
    from audit_embeddings import embedded

    table = embedded(Path(args.data[0]))
    keep = np.isin(table.splits, ["train", "val"] if args.split == "training" else ["test"])
    _, labels = np.unique(table.labels[keep], return_inverse=True)
    count = int(round(FOREIGN * keep.sum()))
    others = embedded(Path(args.foreign), model_of=Path(args.data[0]), limit=400).vectors
    foreign = others[np.random.default_rng(1).choice(len(others), count, replace=False)]
    yield f"{Path(args.data[0]).name} {args.split}", table.vectors[keep], labels, foreign


def scale_table(args: argparse.Namespace) -> None:
    print(
        f"load: {os.getloadavg()}; {args.dim}-d, {args.classes} classes, threads: {os.environ.get('OMP_NUM_THREADS')}"
    )
    print("| method | items | seconds | CPU seconds | peak RSS GiB |")
    print("|---|---|---|---|---|")
    measured: dict[str, list[tuple[int, float]]] = {}
    for method in ("ours", "cleanlab-knn"):
        for size in args.sizes:
            row = json.loads(
                subprocess.run(
                    [sys.executable, __file__, "one", method, str(size), str(args.classes), str(args.dim)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.splitlines()[-1]
            )
            measured.setdefault(method, []).append((size, row["seconds"]))
            print(f"| {method} | {size:,} | {row['seconds']:.1f} | {row['cpu_seconds']:.1f} | {row['peak_gib']:.2f} |")
    for method, points in measured.items():
        if len(points) > 1:
            (n0, t0), (n1, t1) = points[0], points[-1]
            power = np.log(t1 / t0) / np.log(n1 / n0)
            print(f"| {method} | 1,000,000 (projected, t ~ n^{power:.2f}) | {t1 * (1e6 / n1) ** power:.0f} | | |")


def one_scale_run(method: str, size: int, classes: int, dim: int) -> None:
    vectors, labels = clustered(size, classes, dim, seed=0)
    noisy, _ = plant_flips(labels, vectors, "random", 0)
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = before.ru_utime + before.ru_stime
    start = time.perf_counter()
    if method == "ours":
        ours(vectors, noisy)
    else:
        from cleanlab.rank import get_label_quality_scores
        from sklearn.model_selection import StratifiedKFold, cross_val_predict
        from sklearn.neighbors import KNeighborsClassifier

        knn = KNeighborsClassifier(n_neighbors=10, metric="cosine", weights="distance")
        pred = cross_val_predict(knn, vectors, noisy, cv=StratifiedKFold(5), method="predict_proba")
        get_label_quality_scores(noisy, pred, method="self_confidence")
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_gib": usage.ru_maxrss / 2**20}))


def main() -> None:
    if sys.argv[1:2] == ["one"]:
        one_scale_run(sys.argv[2], *(int(value) for value in sys.argv[3:6]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=("planted", "outliers", "scale"), default="planted")
    parser.add_argument("--data", nargs="+", default=["../shared/data/cub50", "../shared/data/cars196"])
    parser.add_argument("--foreign", default="../shared/data/cars196")
    parser.add_argument("--split", choices=("training", "test"), default="training")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--lr-c", type=float, nargs="+", default=[10.0, 100.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000])
    parser.add_argument("--classes", type=int, default=5000)
    parser.add_argument("--dim", type=int, default=128)
    args = parse_quick(parser, seeds=1, lr_c=[10.0], sizes=[2000], classes=50)
    {"planted": planted_table, "outliers": outlier_table, "scale": scale_table}[args.mode](args)
    if args.quick:
        outlier_table(args)
        scale_table(args)


if __name__ == "__main__":
    main()
