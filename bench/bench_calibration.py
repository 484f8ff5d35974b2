"""Which calibration holds on classes it was not fitted on: the fits and base-rate handlings of issue 48,
measured on one model's validation classes (fit) and test classes (measure), as ``retrieval train`` splits them.

Rows: the chosen fit (Platt's logistic fit on each validation query's first 10 hits, searched among the
validation and training images) and the alternatives of ``calibration_alternatives.py`` (isotonic; the
validation classes alone; every query-gallery pair, keeping the validation classes' base rate or moving it to
the test gallery's by Bayes' rule on the odds). Each row: ECE over the test queries' first 10 hits (15 bins),
and the precision realised and the recall kept at min_probability 0.8. ``--trials`` adds the query-adaptive
fits tried and the class-halves protocol the fit was chosen on (``calibration_trials.py``). The embeddings are
cached in ``--cache`` (embedding is the slow part).

``--few-classes N`` (issue 58) runs the few-validation-classes protocol of ``few_classes.py`` instead: ``--draws``
random draws of N validation classes out of the training split, each fit and cut-off measured on the test
classes. ``--embeddings FILE.npz`` (``features`` and ``labels``, e.g. a pretrained backbone's pooled features)
stands for an ``--epochs 0`` run: centred on the training split's mean and L2-normalised, the classes split as
``retrieval train`` splits a folder (the first half of the sorted classes train).

    python bench/bench_calibration.py --model runs/cub50 --data ../shared/data/cub50 --cache /tmp/cub50.npz
    python bench/bench_calibration.py --few-classes 4 --draws 10 --embeddings /tmp/cub50_lite0.npz
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from calibration_alternatives import alternative_reports, figures
from calibration_trials import TRIALS, class_halves, trial_eces
from few_classes import one_draw, ranked
from given_run import model_and_data
from quick_mode import parse_quick

from retrieval.indexing.probability.fitting import fit_score_calibration
from retrieval.indexing.probability.held_out import held_out_reports
from retrieval.indexing.probability.pair_scores import LabelledSet
from retrieval.indexing.usecases import embed


def split_set(model: Path, data: Path, split: str, cache: Path | None) -> LabelledSet:
    """The split's embeddings and labels (every image a query and a gallery item, as the run measures them)."""
    stored = cache.with_suffix(f".{split}.npz") if cache is not None else None
    if stored is not None and stored.is_file():
        saved = np.load(stored)
        embeddings, labels = saved["embeddings"], saved["labels"]
    else:
        table = embed(model, data, split=split, progress=False)
        embeddings, labels = table.embeddings, np.array(table.labels)
        if stored is not None:
            np.savez(stored, embeddings=embeddings, labels=labels)
    flags = np.ones(len(labels), bool)
    return LabelledSet(embeddings, labels, flags, flags)


def joined(parts: list[LabelledSet]) -> LabelledSet:
    """One set of several splits (their classes are disjoint)."""
    if len(parts) == 1:
        return parts[0]
    flags = np.concatenate([part.is_query for part in parts])
    embeddings = np.concatenate([part.embeddings for part in parts])
    return LabelledSet(embeddings, np.concatenate([part.labels for part in parts]), flags, flags.copy())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a run or export (none: a random-weights stand-in run)")
    parser.add_argument("--data", type=Path, help="its dataset (with --model)")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument(
        "--fit-on",
        default="val",
        help="val: the validation images as queries, searched among themselves and the training images (as "
        "retrieval train fits); val,train: every image of both a query (fair only for --epochs 0 runs)",
    )
    parser.add_argument("--trials", action="store_true", help="also the query-adaptive fits and the selection")
    parser.add_argument("--few-classes", type=int, default=0, help="the few-validation-classes protocol, N classes")
    parser.add_argument("--draws", type=int, default=10, help="with --few-classes: random draws of the N classes")
    parser.add_argument("--embeddings", type=Path, default=None, help="with --few-classes: features and labels")
    args = parse_quick(parser, draws=2)
    if args.few_classes and args.embeddings is not None:
        few_classes(*features_split(args.embeddings), args.few_classes, args.draws)
        return
    with model_and_data(args):
        if args.few_classes:
            parts = {split: split_set(args.model, args.data, split, args.cache) for split in ("train", "val", "test")}
            pool = joined([parts["train"], parts["val"]])
            few_classes(
                np.concatenate([pool.embeddings, parts["test"].embeddings]).astype(np.float32),
                np.concatenate([pool.labels, parts["test"].labels]),
                np.unique(pool.labels),
                args.few_classes,
                args.draws,
            )
            return
        compare(args)


def features_split(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(embeddings, labels, training-split classes) of a features file, as an ``--epochs 0`` run sees it."""
    saved = np.load(path)
    features, labels = saved["features"].astype(np.float64), saved["labels"]
    classes = np.unique(labels)
    pool = classes[: len(classes) // 2]
    features -= features[np.isin(labels, pool)].mean(0)
    features /= np.linalg.norm(features, axis=1, keepdims=True)
    return features.astype(np.float32), labels, pool


def few_classes(embeddings: np.ndarray, labels: np.ndarray, pool: np.ndarray, n: int, draws: int) -> None:
    """The few-validation-classes table: per figure, its median and worst draw (worst: the highest ECE, the
    lowest F1 or coverage, the precision farthest from its target)."""
    in_pool = np.isin(labels, pool)
    test = ranked(embeddings, labels, ~in_pool, ~in_pool)
    everything = ranked(embeddings, labels, in_pool, in_pool)
    print(
        f"load {os.getloadavg()[0]:.1f}; {len(pool)} training-split classes ({in_pool.sum()} images), "
        f"{len(np.unique(labels[~in_pool]))} test classes ({(~in_pool).sum()} images); {draws} draws of {n} "
        "validation classes"
    )
    rows = [one_draw(embeddings, labels, pool, test, everything, seed, n) for seed in range(draws)]
    print("| figure (test classes) | median | worst draw |")
    print("|---|---|---|")
    for name in rows[0]:
        values = np.array([row[name] for row in rows], np.float64)
        print(f"| {name} | {np.nanmedian(values):.3f} | {_worst(name, values):.3f} |")


def _worst(name: str, values: np.ndarray) -> float:
    if np.isnan(values).all():
        return float("nan")
    if name.endswith("ECE"):
        return float(np.nanmax(values))
    if "precision at" in name:
        target = float(name.rsplit(" ", 1)[1])
        return float(values[np.nanargmax(np.abs(values - target))])
    return float(np.nanmin(values))


def compare(args: argparse.Namespace) -> None:
    """Fit on ``--fit-on``, measure every fit on the test classes, print the table."""
    val = fitting_set(args)
    test = split_set(args.model, args.data, "test", args.cache)
    print(
        f"load {os.getloadavg()[0]:.1f}; fitted on {args.fit_on}: {len(val.queries)} queries of "
        f"{len(np.unique(val.labels[val.queries]))} classes among {len(val.gallery)} images of "
        f"{len(np.unique(val.labels[val.gallery]))} classes, base rate {val.base_rate():.4f}; test: "
        f"{len(np.unique(test.labels))} classes, "
        f"{len(test.labels)} images, base rate {test.base_rate():.4f}"
    )
    calibration = fit_score_calibration(val)
    if calibration is None:
        raise SystemExit("no validation hit shares its query's class: nothing to fit")
    rows = {
        "logistic on the first hits (chosen)": held_out_reports(calibration, test),
        **alternative_reports(val, test),
    }
    print("| fit | kind | ECE | precision at 0.8 | recall kept at 0.8 |")
    print("|---|---|---|---|---|")
    for kind in ("float", "binary"):
        for name, reports in rows.items():
            shown = figures(reports[kind])
            precision = "no hit kept" if shown["precision_at_0.8"] is None else f"{shown['precision_at_0.8']:.3f}"
            print(f"| {name} | {kind} | {shown['ece']:.3f} | {precision} | {shown['recall_kept_at_0.8']:.3f} |")
    if args.trials:
        trials(args, val, test)


def fitting_set(args: argparse.Namespace) -> LabelledSet:
    """What ``--fit-on`` names: the validation images with the training images in their gallery (``val``, as
    ``retrieval train``), or every image of the named splits a query."""
    if args.fit_on != "val":
        return joined([split_set(args.model, args.data, split, args.cache) for split in args.fit_on.split(",")])
    train = split_set(args.model, args.data, "train", args.cache)
    return split_set(args.model, args.data, "val", args.cache).with_distractors(train.embeddings, train.labels)


def trials(args: argparse.Namespace, val: LabelledSet, test: LabelledSet) -> None:
    """ECE per fit tried: on the class halves of the validation and training classes (the selection, mean of
    the two folds), then on the test classes."""
    everything = joined([split_set(args.model, args.data, split, args.cache) for split in ("val", "train")])
    folds = class_halves(everything, len(np.unique(val.labels[val.queries])))
    print("\n| fit tried | kind | ECE, class halves (selection) | ECE, test classes |")
    print("|---|---|---|---|")
    for kind in ("float", "binary"):
        selection = [trial_eces(fit, measured, kind) for fit, measured in folds]
        alone = [trial_eces(fit.without_distractors(), measured, kind) for fit, measured in folds]
        on_test = trial_eces(val, test, kind)
        for name in TRIALS:
            print(f"| {name} | {kind} | {np.mean([s[name] for s in selection]):.3f} | {on_test[name]:.3f} |")
        kept = next(iter(TRIALS))
        alone_test = trial_eces(val.without_distractors(), test, kind)[kept]
        print(
            f"| {kept}, validation classes alone | {kind} | {np.mean([a[kept] for a in alone]):.3f} | {alone_test:.3f} |"
        )


if __name__ == "__main__":
    main()
