"""The text of ``study.md``: the command, the protocol, the two tables, the search and the time spent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.training.study.reporting.report import Row, markdown_table
from retrieval.training.study.study_state import StudySpec
from retrieval.training.study.tuning.search import format_params

CACHED_NOTE = (
    "**Protocol: cached features (`--cached-features`), not full fine-tuning.** The backbone is frozen: "
    "every image was embedded once with its pooled features (evaluation transform, no augmentation), and "
    "each model trains only the new layers (LayerNorm / linear head) and the loss on those features. This "
    "is a different, much cheaper protocol than the Reality Check's, which fine-tunes the whole network "
    "with augmentation; its numbers compare losses under the same frozen features and are not comparable "
    "with fine-tuned results."
)
FINE_TUNE_NOTE = (
    "**Protocol: full fine-tuning.** Each fold model trains the whole network with the trainer "
    "(augmentation, warm-start epochs and schedule of the loss's recipe)."
)


def protocol_section(spec: StudySpec, reference_name: str, reference: dict[str, Any], loss_dims: str) -> str:
    dims = reference["dims"]
    return "\n".join(
        [
            CACHED_NOTE if spec.cached_features else FINE_TUNE_NOTE,
            "",
            f"The training classes are cut into {spec.folds} contiguous, class-disjoint folds (sorted order); "
            f"for each loss, {spec.trials} trials of optuna's TPE sampler (seed {spec.seed}) searched the "
            "settings that maximise the mean validation MAP@R over the folds (each fold: train on the other "
            f"folds, keep the epoch with the best validation MAP@R). The best settings were then trained "
            f"{spec.seeds} time(s) (seeds {spec.seed + 1}..{spec.seed + spec.seeds}) on every fold, and each "
            "fold model embedded the test classes once; the test classes were never seen during the search.",
            "",
            f"Concatenated: the {spec.folds} fold models' L2-normalised embeddings joined and normalised "
            f"({loss_dims}). Separated: each fold model alone, averaged over the folds. Values are percentages, "
            "mean ± 95 % confidence interval (Student t) over the final runs (n/a with one run). "
            f"`{reference_name}`: the backbone's pooled features ({reference['feature_dim']}-d) centred on the "
            f"training images' mean, {_reduction(reference['feature_dim'], dims)}.",
        ]
    )


def _reduction(feature_dim: int, dims: dict[str, int]) -> str:
    """How the reference features were reduced, in words."""
    if dims["concatenated"] >= feature_dim and dims["separated"] >= feature_dim:
        return "kept whole (no larger than the embeddings), as in both columns"
    return (
        f"reduced by PCA fitted on training-class images to {dims['concatenated']} (concatenated) and "
        f"{dims['separated']} (separated) dimensions (kept whole where not larger; the reduction of "
        "`retrieval eval`'s reference row)"
    )


def tables_section(rows: Sequence[Row], dims: dict[str, str]) -> str:
    float_table = markdown_table(rows, "float", dims)
    binary_table = markdown_table(rows, "binary", dims)
    return "\n".join(
        ["## Float embeddings (inner product)", "", *float_table, "", "## Binary embeddings (sign bits, Hamming)"]
        + ["", *binary_table]
    )


def search_section(searches: dict[str, dict[str, Any]]) -> str:
    lines = [
        "## Search",
        "",
        "| loss | trials (diverged) | best trial | best mean val MAP@R | best settings | search time |",
        "|---|---|---|---|---|---|",
    ]
    for loss, search in searches.items():
        lines.append(
            f"| {loss} | {search['trials_finished']} ({search['trials_diverged']}) | {search['best_trial']} | "
            f"{100 * search['best_val_map_at_r']:.2f} | {format_params(search['best_params'])} | "
            f"{search['search_seconds']:.0f} s |"
        )
    return "\n".join(lines)


def time_section(spec: StudySpec, out: Path, seconds: dict[str, float]) -> str:
    parts = ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items())
    return "\n".join(["## Command and time", "", "```bash", spec.command(out), "```", "", f"Time spent: {parts}."])
