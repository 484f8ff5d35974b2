"""What a search reads from the model behind an index, once per loaded model rather than once per request:
its score calibration (``probability``: a score's chance of sharing the query's class, kept in the index
manifest) and its measured ``copy_threshold`` (in ``model.json``, read on first use and kept)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from retrieval.indexing.common.score_calibration import ScoreCalibration
from retrieval.indexing.exported_model.onnx_embedder import load_model_manifest
from retrieval.indexing.exported_model.resolution import resolve_query_model
from retrieval.indexing.search.copy_thresholds import copy_thresholds
from retrieval.indexing.store.shared.store_protocol import Store


@dataclass
class ModelTraits:
    """The model's ``calibration`` (None: it has none) and, on demand, its copy threshold (``copy_threshold``)."""

    index_dir: Path
    model_dir: str
    model_sha256: str
    calibration: ScoreCalibration | None
    _copy_threshold: float | None = field(default=None, repr=False)

    @classmethod
    def of(cls, store: Store) -> ModelTraits:
        """The traits of the model of ``store`` (the same object for every search of that loaded model)."""
        manifest = store.manifest
        model_dir = str(manifest.model_dir)
        traits = _traits(Path(store.index_dir), model_dir, manifest.model_sha256)
        traits.calibration = manifest.model.calibration
        return traits

    def copy_threshold(self) -> float:
        """The cosine similarity above which two items are copies: the model's measured one (model.json)."""
        if self._copy_threshold is None:
            model_dir = resolve_query_model(self.index_dir, self.model_dir)
            self._copy_threshold = copy_thresholds(load_model_manifest(model_dir).duplicates, None).cosine
        return self._copy_threshold


@lru_cache(maxsize=64)
def _traits(index_dir: Path, model_dir: str, model_sha256: str) -> ModelTraits:
    return ModelTraits(index_dir, model_dir, model_sha256, None)
