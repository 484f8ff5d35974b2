"""Which calibration holds on classes it was not fitted on: the fits and base-rate handlings of issue 48,
measured on one model's validation classes (fit) and test classes (measure), as ``retrieval train`` splits them.

Rows: the chosen fit (Platt's logistic fit on each validation query's first 10 hits, searched among the
validation and training images) and the alternatives of ``indexing.probability.alternatives`` (isotonic; the
validation classes alone; every query-gallery pair, keeping the validation classes' base rate or moving it to
the test gallery's by Bayes' rule on the odds). Each row: ECE over the test queries' first 10 hits (15 bins),
and the precision realised and the recall kept at min_probability 0.8. ``--trials`` adds the query-adaptive
fits tried and the class-halves protocol the fit was chosen on (``calibration_trials.py``). The embeddings are
cached in ``--cache`` (embedding is the slow part).

    python bench/bench_calibration.py --model runs/cub50 --data ../shared/data/cub50 --cache /tmp/cub50.npz
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from calibration_trials import TRIALS, class_halves, trial_eces
from given_run import model_and_data
from quick_mode import parse_quick

from retrieval.indexing.probability.alternatives import alternative_reports, figures
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
    args = parse_quick(parser)
    with model_and_data(args):
        compare(args)


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
