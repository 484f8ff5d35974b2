"""One plain sentence at the end of a run: did training beat the model it started from, beyond noise?

The starting model (the pretrained backbone's pooled features, or a random backbone's) is epoch 0, a candidate
like every trained epoch. The epoch with the best validation MAP@R beats it only when the whole interval of its
gain is above zero (a paired bootstrap over the validation queries, ``indexing.eval.gain_interval``);
otherwise the run keeps the starting model and says the gain is within validation noise: nobody ships a model
worse than, or no better than, what they started from without being told. Too few validation classes or
queries make the choice itself unreliable, and the sentence starts with that. The test classes choose nothing;
the words only never claim an improvement the test classes contradict beyond their own noise.
The sentence and its figures (``TrainingVerdict``) go to the terminal, ``test_metrics.json`` and the exported
``model.json`` (shown by ``retrieval index info``).
"""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.indexing.data.splits import FEWER_ADVICE, MIN_CLASSES, MIN_VALIDATION_CLASSES, MIN_VALIDATION_QUERIES
from retrieval.indexing.exported_model.training_verdict import DataCopies, Decision, GainInterval, TrainingVerdict


def beats_reference(validation: GainInterval | None) -> bool:
    """Whether the best trained epoch may replace epoch 0: its validation gain is above noise (no validation
    split: nothing to compare, the trained model stays)."""
    return validation is None or validation.above_noise


@dataclass(frozen=True)
class Verdict:
    reference: str  # "pretrained" or "untrained"
    epochs: int  # epochs the run was asked to train (0: none)
    best_epoch: int  # the run's model
    candidate_epoch: int  # the epoch with the best validation MAP@R
    validation: GainInterval | None  # the candidate against epoch 0 on the validation queries
    test: GainInterval | None = None  # the run's model against epoch 0 on the test queries, never used to choose
    validation_classes: int = 0
    validation_queries: int = 0
    whitened_reference_test: float | None = None  # test MAP@R of the reference + the whitening stage, reported only
    pool_classes: int = 0  # the training and validation classes together (0: not known)
    data_copies: DataCopies | None = None  # exact copies among the run's images, repeated beside the verdict

    @property
    def kept_reference(self) -> bool:
        return self.best_epoch == 0

    @property
    def reliable(self) -> bool:
        return self.validation_classes >= MIN_VALIDATION_CLASSES and self.validation_queries >= MIN_VALIDATION_QUERIES

    @property
    def decision(self) -> Decision:
        return "no-training" if self.epochs == 0 else "reference" if self.kept_reference else "trained"

    def sentence(self) -> str:
        copies = self.data_copies.sentence() if self.data_copies is not None else None
        return self._decision_words() + self._whitening_chain() + (f"; {copies}" if copies else "")

    def _decision_words(self) -> str:
        if self.epochs == 0:
            return f"no training epoch ran: {self._backbone()} is the run's model"
        if self.validation is None and self.kept_reference:  # a run resumed from checkpoints without per-query APs
            return f"no epoch beat the {self.reference} backbone on validation, so it is kept as the run's model"
        if self.validation is None:
            return f"trained model kept (epoch {self.best_epoch}); no validation classes to compare it on"
        if self.validation.at_ceiling and self.kept_reference:
            return self._ceiling(self.validation)
        interval_follows = self.candidate_epoch != 0
        return self._reliability(interval_follows) + self._choice(self.validation)

    def _ceiling(self, validation: GainInterval) -> str:
        """Validation MAP@R already at 1.000: a ceiling, not evidence that training does not help."""
        return (
            f"cannot measure: the {self.reference} backbone already scores validation MAP@R {validation.before:.3f} "
            f"on the {self.validation_classes} validation classes ({self.validation_queries} queries), the ceiling, so "
            f"no epoch can show a gain there; ship {self._backbone()} (`--epochs 0`){self._more_classes_advice()}"
        )

    def _more_classes_advice(self) -> str:
        """A --val-fraction that draws more validation classes (up to the reliable count), or: add classes."""
        most = min(MIN_VALIDATION_CLASSES, self.pool_classes - MIN_CLASSES)
        if most <= self.validation_classes:
            return ", or add classes so that validation can draw more of them"
        fraction = next(
            f / 100 for f in range(1, 100) if round(f / 100 * self.pool_classes) >= most
        )  # the split's rule
        return (
            f", or measure on {most} validation classes instead of {self.validation_classes}: "
            f"--val-fraction {fraction:.2f}"
        )

    def record(self) -> TrainingVerdict:
        return TrainingVerdict(
            sentence=self.sentence(),
            decision=self.decision,
            reference=self.reference,
            best_epoch=self.best_epoch,
            candidate_epoch=self.candidate_epoch,
            validation=self.validation,
            test=self.test,
            validation_classes=self.validation_classes,
            validation_queries=self.validation_queries,
            reliable=self.reliable if self.validation is not None else None,
            data_copies=self.data_copies,
        )

    def _reliability(self, interval_follows: bool = True) -> str:
        """What too small a validation split threatens: with few classes, the luck of which classes were drawn
        (the interval, a bootstrap over their queries, cannot see it); with few queries, the interval itself."""
        if self.reliable:
            return ""
        classes, queries = self.validation_classes, self.validation_queries
        interval = "the interval that follows" if interval_follows else "a gain's interval"
        threat = (
            f"; {interval} counts the noise of those queries, not the luck of which {classes} classes "
            "happened to be drawn, and other classes might choose otherwise"
            if classes < MIN_VALIDATION_CLASSES
            else f", too few queries for {interval} to be trusted"
        )
        return f"unreliable choice: it rests on {classes} validation classes ({queries} queries){threat} ({FEWER_ADVICE}); "

    def _choice(self, validation: GainInterval) -> str:
        reference = self.reference
        if self.candidate_epoch == 0:
            return (
                f"training did not help: no epoch beat the {reference} backbone's validation MAP@R "
                f"{validation.before:.3f}, so {self._backbone()} is kept as the run's model"
            )
        if self.kept_reference:
            return (
                f"no gain beyond validation noise (epoch {self.candidate_epoch}: {_gain(validation)}): "
                f"{self._backbone()} is kept"
            )
        if not validation.above_noise:  # trainer.select_reference off: epoch 0 was no candidate
            return (
                f"epoch {self.best_epoch} kept (trainer.select_reference is off) although its validation gain over "
                f"the {reference} backbone is within noise ({_gain(validation)})"
            )
        if self.test is not None and self.test.below_noise:
            return (
                f"validation {_gain(validation)}, test {_gain(self.test)}: epoch {self.best_epoch} is kept, as "
                f"validation chose it, but the test classes disagree beyond their noise"
            )
        chosen = (
            f"training improved validation MAP@R {_change(validation)} over the {reference} backbone "
            f"(epoch {self.best_epoch})"
        )
        if self.test is None:
            return chosen
        if self.whitened_reference_test is not None:  # the whitening chain says it
            return chosen
        return f"{chosen}; on the test classes, which chose nothing: {_change(self.test)}"

    def _backbone(self) -> str:
        return f"the {self.reference} backbone" + (" + whitening" if self.whitened_reference_test is not None else "")

    def _whitening_chain(self) -> str:
        """The test chain where measured: pretrained X -> pretrained + whitening Y [-> trained Z]."""
        if self.test is None or self.whitened_reference_test is None:
            return ""
        steps = [
            f"{self.reference} {self.test.before:.3f}",
            f"{self.reference} + whitening {self.whitened_reference_test:.3f}",
        ]
        if not self.kept_reference:
            steps.append(f"trained {self.test.after:.3f}")
        return "; test MAP@R on the test classes, which chose nothing: " + " -> ".join(steps)


def _percent(interval: GainInterval, value: float) -> str:
    relative = interval.relative(value)
    return f"{relative * 100:+.0f} %" if relative is not None else f"{value:+.3f}"


def _gain(interval: GainInterval) -> str:
    """``+1 %, interval -4 % to +6 %``."""
    low, high = _percent(interval, interval.low), _percent(interval, interval.high)
    return f"{_percent(interval, interval.gain)}, interval {low} to {high}"


def _change(interval: GainInterval) -> str:
    """``0.681 -> 0.750 (+10 %, interval +4 % to +16 %)``."""
    return f"{interval.before:.3f} -> {interval.after:.3f} ({_gain(interval)})"
