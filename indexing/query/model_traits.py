"""What a search reads from the model behind an index, once per loaded model rather than once per request:
its score calibration (``probability``: a score's chance of sharing the query's class, kept in the index
manifest) and its measured ``copy_threshold`` (in ``model.json``, read on first use and kept)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from retrieval.indexing.common.score_calibration import ScoreCalibration
from retrieval.indexing.duplicates.copy_thresholds import NO_MODEL, NoCopyThresholdError, copy_thresholds
from retrieval.indexing.exported_model.no_model import has_model
from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.store.shared.store_protocol import Store


@dataclass
class ModelTraits:
    """The model's ``calibration`` (None: it has none) and, on demand, its copy threshold (``copy_threshold``)."""

    index_dir: Path
    model_dir: str
    model_sha256: str
    calibration: ScoreCalibration | None
    has_model: bool = True
    _copy_threshold: float | None = field(default=None, repr=False)

    @classmethod
    def of(cls, store: Store) -> ModelTraits:
        """The traits of the model of ``store`` (the same object for every search of that loaded model)."""
        manifest = store.manifest
        model_dir = str(manifest.model_dir)
        traits = _traits(Path(store.index_dir), model_dir, manifest.model_sha256)
        traits.calibration = manifest.model.calibration
        traits.has_model = has_model(manifest.model)
        return traits

    def copy_threshold(self) -> float:
        """The cosine similarity above which two items are copies: the model's measured one (model.json)."""
        if self._copy_threshold is None:
            self._copy_threshold = self._measured_copy_threshold()
        return self._copy_threshold

    def _measured_copy_threshold(self) -> float:
        try:
            if not self.has_model:
                return copy_thresholds(None, None, missing=NO_MODEL).cosine
            model_dir = resolve_query_model(self.index_dir, self.model_dir)
            return copy_thresholds(load_model_manifest(model_dir).duplicates, None).cosine
        except NoCopyThresholdError as error:
            raise NoCopyThresholdError(
                f"collapse_duplicates needs a copy threshold, and {error.reason}",
                "search without collapse_duplicates (the duplicates commands and GET /duplicates take a threshold)",
            ) from None


@lru_cache(maxsize=64)
def _traits(index_dir: Path, model_dir: str, model_sha256: str) -> ModelTraits:
    return ModelTraits(index_dir, model_dir, model_sha256, None)
