"""The whitening stage of a run: a linear map after the chosen model, fitted on training classes only.

After the epochs are chosen (or at once with ``--epochs 0``), the chosen model embeds at most
``whitening.fit_images`` images of the TRAINING split (``reference.fit_sample``: never a validation
or test image; the report lists the classes it read). On them it fits ``model.whitening``
(``pca`` / ``supervised``) and the rotation of the binary code (``model.itq``: ITQ, or a fixed
orthogonal expansion without it), and folds both into one linear layer of the model
(``embedding_model.with_whitening``): the checkpoint, the export, eval and the index carry it like any
other layer.

The choice rule: what ``whitening`` leaves open (``method: auto``, ``dim: null``) is chosen on the
validation classes by float MAP@R, the number epochs are chosen by, among ``none`` (no whitening;
only for ``auto``), then each method at each of ``candidate_shrinkages`` and ``candidate_dims`` (capped at ``bits`` and at the embedding's rank), the
first best kept (ties go to none, then to fewer dimensions). The code's rotation is orthogonal and
changes no float ranking, so it is fitted once, after the choice, also when ``none`` wins (then on
the embeddings as they are, where they fit in ``bits``). A run without validation classes must name
the method, the dim and the shrinkage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import WhiteningConfig
from retrieval.training.model.embedding_model import EmbeddingModel, with_whitening, without_whitening
from retrieval.training.model.itq import fit_itq, orthonormal_rows, quantization_error
from retrieval.training.model.whitening import LinearMap, WhiteningMethod, fit_whitenings
from retrieval.training.run.inputs.split_inputs import SplitInputs
from retrieval.training.run.measures.split_metrics import split_metrics

Scorer = Callable[[LinearMap | None], float]  # validation MAP@R of the base embeddings under a map (None: as they are)


@dataclass(frozen=True)
class Candidate:
    method: WhiteningMethod | None  # None: no whitening
    dim: int | None
    shrinkage: float | None = None
    linear: LinearMap | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return "none" if self.method is None else f"{self.method}-{self.dim}-s{self.shrinkage:g}"


@dataclass(frozen=True)
class WhiteningFit:
    """The whitened model (or the base model when nothing was fitted) and what was fitted, read and chosen."""

    model: EmbeddingModel
    report: dict[str, Any]


def needs_validation(settings: WhiteningConfig) -> bool:
    return settings.method == "auto" or settings.dim is None or settings.shrinkage is None


def candidates(settings: WhiteningConfig, embeddings: np.ndarray, labels: Sequence[object]) -> list[Candidate]:
    """``none`` (for ``auto``) and each method x shrinkage x dim the settings leave open, fitted on ``embeddings``."""
    methods: list[WhiteningMethod] = ["pca", "supervised"] if settings.method == "auto" else [settings.method]  # type: ignore[list-item]
    dims = [settings.dim] if settings.dim is not None else sorted(settings.candidate_dims)
    shrinkages = [settings.shrinkage] if settings.shrinkage is not None else list(settings.candidate_shrinkages)
    found = [Candidate(None, None)] if settings.method == "auto" else []
    for method in methods:
        for shrinkage, basis in zip(shrinkages, fit_whitenings(method, embeddings, labels, shrinkages)):
            usable = sorted({min(dim, settings.bits, basis.max_dim) for dim in dims})
            found += [Candidate(method, dim, shrinkage, basis.map(dim)) for dim in usable]
    return found


def choose(found: Sequence[Candidate], score: Scorer | None) -> tuple[Candidate, dict[str, float]]:
    """The first candidate of highest validation MAP@R (the only one when nothing is left to choose)."""
    if len(found) == 1 or score is None:
        return found[-1], {}
    scores = {candidate.name: score(candidate.linear) for candidate in found}
    best = max(found, key=lambda candidate: (scores[candidate.name], -found.index(candidate)))
    return best, scores


def plain_code(dim: int, bits: int, seed: int) -> np.ndarray:
    """The code without learning: the sign itself (d == bits), else a fixed random orthogonal expansion."""
    return np.eye(dim) if dim == bits else orthonormal_rows(dim, bits, seed)


def code_rotation(whitened: np.ndarray, settings: WhiteningConfig, seed: int) -> np.ndarray:
    """d x bits, orthonormal rows: ITQ's rotation, or the plain code (``plain_code``) without it."""
    if settings.itq:
        return fit_itq(whitened, settings.bits, iterations=settings.itq_iterations, seed=seed)
    return plain_code(whitened.shape[1], settings.bits, seed)


def fit_map(
    settings: WhiteningConfig,
    embeddings: np.ndarray,
    labels: Sequence[object],
    score: Scorer | None,
    *,
    seed: int = 0,
) -> tuple[LinearMap | None, dict[str, Any]]:
    """The stage on arrays: choose (on ``score``, the validation classes), fit the code's rotation, fold them.

    When ``none`` wins the code is still learned (ITQ) on the embeddings as they are, where they fit in
    ``bits``: float rankings stay those of the model, only the sign code changes. None: nothing to fit."""
    if needs_validation(settings) and score is None:
        raise ConfigError(
            "whitening.method auto, and a null whitening.dim or whitening.shrinkage, are chosen on the validation "
            "classes, and this run has none: name them (e.g. --set whitening.method=supervised "
            "--set whitening.dim=512 --set whitening.shrinkage=0.1)"
        )
    started = time.perf_counter()
    best, scores = choose(candidates(settings, embeddings, labels), score)
    report: dict[str, Any] = {"method": best.method or "none", "dim": best.dim, "shrinkage": best.shrinkage}
    report["validation_map_at_r"] = scores
    linear = best.linear
    if linear is None:
        size = embeddings.shape[1]
        if size > settings.bits or not settings.itq:
            return None, {**report, "seconds": time.perf_counter() - started}
        linear = LinearMap(np.eye(size), np.zeros(size))
    whitened = linear.apply(embeddings)
    rotation = code_rotation(whitened, settings, seed)
    report.update(
        bits=settings.bits,
        itq=settings.itq,
        quantization_error={
            "plain": quantization_error(whitened, plain_code(linear.dim, settings.bits, seed)),
            "learned" if settings.itq else "plain": quantization_error(whitened, rotation),
        },
        seconds=time.perf_counter() - started,
    )
    return linear.then(rotation), report


def whiten_model(
    model: EmbeddingModel,
    settings: WhiteningConfig,
    fit: SplitInputs,
    val: SplitInputs | None,
    *,
    ks: Sequence[int] | None,
    seed: int,
) -> WhiteningFit:
    """``model`` followed by the map fitted on ``fit``'s readable images (chosen on ``val``, where open)."""
    base = without_whitening(model)
    keep = ~fit.dataset.bad_mask()
    embeddings, labels = fit.embed(base)[keep], fit.labels[keep]
    score = _validation_scorer(base, val, ks) if val is not None and needs_validation(settings) else None
    linear, report = fit_map(settings, embeddings, labels, score, seed=seed)
    read = [record for record, ok in zip(fit.dataset.records, keep) if ok]
    report.update(fit_images=len(read), fit_classes=sorted({record.label for record in read}))
    if linear is None:
        return WhiteningFit(base, report)
    return WhiteningFit(with_whitening(base, linear.weight, linear.bias), report)


def _validation_scorer(base: EmbeddingModel, val: SplitInputs, ks: Sequence[int] | None) -> Scorer:
    embeddings = val.embed(base)

    def score(linear: LinearMap | None) -> float:
        mapped = embeddings if linear is None else linear.apply(embeddings)
        return split_metrics(mapped, val.labels, val.dataset, kinds=("float",), ks=ks, compute_nmi=False).map_at_r

    return score
