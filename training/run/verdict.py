"""One plain sentence at the end of a run: did training beat the model it started from?

The starting model (the pretrained backbone's pooled features, or a random backbone's) is epoch 0,
a candidate like every trained epoch. When no trained epoch beats it on the validation classes, the
run keeps it and says so: nobody ships a model worse than what they started from without being told.
The sentence goes to the terminal, ``test_metrics.json`` and the exported ``model.json`` (shown by
``retrieval index info``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    reference: str  # "pretrained" or "untrained"
    epochs: int  # epochs the run was asked to train (0: none)
    best_epoch: int
    reference_val: float | None  # validation MAP@R of epoch 0
    best_val: float | None  # validation MAP@R of the chosen epoch
    reference_test: float | None = None  # test MAP@R, reported only, never used to choose
    trained_test: float | None = None
    whitened_reference_test: float | None = None  # the reference + the whitening stage (``whitening_stage``)

    @property
    def kept_reference(self) -> bool:
        return self.best_epoch == 0

    def sentence(self) -> str:
        if self.kept_reference:
            return self._kept_sentence() + self._whitening_chain()
        if self.reference_val is None or self.best_val is None:
            return f"trained model kept (epoch {self.best_epoch}); no validation classes to compare it on"
        chosen = (
            f"training improved validation MAP@R {_change(self.reference_val, self.best_val)} over the "
            f"{self.reference} backbone (epoch {self.best_epoch})"
        )
        if self.reference_test is None or self.trained_test is None:
            return chosen
        if self.whitened_reference_test is not None:
            return chosen + self._whitening_chain()
        return f"{chosen}; on the test classes, which chose nothing: {_change(self.reference_test, self.trained_test)}"

    def _kept_sentence(self) -> str:
        backbone = f"the {self.reference} backbone" + (" + whitening" if self.whitened_reference_test else "")
        if self.epochs == 0:
            return f"no training epoch ran: {backbone} is the run's model"
        return (
            f"training did not help: no epoch beat the {self.reference} backbone's validation MAP@R "
            f"{self.reference_val:.3f}, so {backbone} is kept as the run's model"
        )

    def _whitening_chain(self) -> str:
        """The test chain where measured: pretrained X -> pretrained + whitening Y [-> trained Z]."""
        if self.reference_test is None or self.whitened_reference_test is None:
            return ""
        steps = [f"{self.reference} {self.reference_test:.3f}"]
        steps.append(f"{self.reference} + whitening {self.whitened_reference_test:.3f}")
        if not self.kept_reference and self.trained_test is not None:
            steps.append(f"trained {self.trained_test:.3f}")
        return "; test MAP@R on the test classes, which chose nothing: " + " -> ".join(steps)

    def to_dict(self) -> dict[str, object]:
        return {"sentence": self.sentence(), "kept_reference": self.kept_reference, **self.__dict__}


def _change(before: float, after: float) -> str:
    relative = f" ({(after / before - 1) * 100:+.0f} %)" if before > 0 else ""
    return f"{before:.3f} -> {after:.3f}{relative}"
