"""Embed images with an exported ONNX model (``model.onnx`` + ``model.json``), without torch.

Used by the index builder, offline evaluation and the search service. Decoding and
preprocessing run in a small thread pool one batch ahead of inference (Pillow and
onnxruntime both release the GIL), so the two overlap.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image
from pydantic import ValidationError
from tqdm import tqdm

from retrieval.indexing.common.artifact_names import MODEL_MANIFEST_NAME
from retrieval.indexing.common.errors import ConfigError, DataError, IndexFormatError, RetrievalError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.cpu_kind import int8_cpu_warning
from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256
from retrieval.indexing.exported_model.preprocess import preprocess_batch, preprocess_image

log = logging.getLogger(__name__)

PROVIDER_CHOICES = ("auto", "cpu", "cuda")
_CUDA = "CUDAExecutionProvider"
_CPU = "CPUExecutionProvider"


@dataclass
class EmbedResult:
    """Embeddings of the paths that could be read; ``ok[i]`` is the path index of row ``i``."""

    embeddings: np.ndarray
    ok: list[int] = field(default_factory=list)
    failures: list[tuple[Path, str]] = field(default_factory=list)


def load_model_manifest(export_dir: Path) -> ModelManifest:
    """Read ``model.json`` or raise one sentence saying what is wrong with it."""
    path = Path(export_dir) / MODEL_MANIFEST_NAME
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; point --model at a directory written by `retrieval export`")
    try:
        return ModelManifest.load(Path(export_dir))
    except (ValidationError, ValueError) as error:
        reason = str(error).splitlines()[0]
        raise IndexFormatError(f"{path} is not a valid model manifest ({reason}); re-export the model") from None


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))


def graph_input_problem(session: ort.InferenceSession, manifest: ModelManifest) -> str | None:
    """Why the images ``model.json``'s preprocessing makes cannot feed the graph (its input name, or a
    fixed input shape other than (n, 3, crop, crop)); None when they fit. Checked when a model loads, so
    that a changed ``crop`` is refused once instead of failing every search."""
    inputs = {graph_input.name: graph_input.shape for graph_input in session.get_inputs()}
    if manifest.input_name not in inputs:
        return f"the graph has no input {manifest.input_name!r} (it has {', '.join(map(repr, inputs))})"
    shape = list(inputs[manifest.input_name])
    crop = manifest.preprocessing.crop
    wanted = [None, 3, crop, crop]
    fixed = len(shape) == 4 and all(
        not isinstance(have, int) or want is None or have == want for have, want in zip(shape, wanted, strict=True)
    )
    if not fixed:
        shown = " x ".join(str(size) for size in shape)
        return f"its preprocessing makes 3 x {crop} x {crop} images (crop {crop}) but the graph takes {shown}"
    return None


def _choose_providers(providers: str) -> list[str]:
    if providers not in PROVIDER_CHOICES:
        raise ConfigError(f"unknown providers {providers!r}; choose one of {', '.join(PROVIDER_CHOICES)}")
    wants_cuda = providers == "cuda" or (providers == "auto" and _CUDA in ort.get_available_providers())
    return [_CUDA, _CPU] if wants_cuda else [_CPU]


class OnnxEmbedder:
    """An onnxruntime session plus the preprocessing its ``model.json`` prescribes.

    Not thread-safe to construct concurrently; ``embed_*`` calls may run from several
    threads (onnxruntime sessions are thread-safe for ``run``).
    """

    def __init__(
        self, export_dir: Path, *, threads: int | None = None, providers: str = "auto", spin_wait: bool = True
    ) -> None:
        self.export_dir = Path(export_dir)
        self.manifest = load_model_manifest(self.export_dir)
        onnx_path = self.export_dir / self.manifest.onnx_file
        if not onnx_path.is_file():
            raise ConfigError(f"{onnx_path} does not exist; re-export the model with `retrieval export`")
        self.model_sha256 = file_sha256(onnx_path)
        if self.model_sha256 != self.manifest.onnx_sha256:
            raise IndexFormatError(
                f"{onnx_path} has sha256 {self.model_sha256[:12]} but model.json expects "
                f"{self.manifest.onnx_sha256[:12]}; the export is corrupt or mixed, re-export the model"
            )
        if warning := int8_cpu_warning(self.manifest.quantization):
            log.warning("%s: %s", self.export_dir, warning)
        self.threads = threads
        self._session: ort.InferenceSession | None = self._create_session(onnx_path, threads, providers, spin_wait)
        self.providers = self._session.get_providers()
        problem = graph_input_problem(self._session, self.manifest)
        if problem:
            raise IndexFormatError(
                f"{self.export_dir / MODEL_MANIFEST_NAME} does not fit {onnx_path.name}: {problem}; restore the "
                "model.json the model was exported with, or re-export the model"
            )

    @staticmethod
    def _create_session(onnx_path: Path, threads: int | None, providers: str, spin_wait: bool) -> ort.InferenceSession:
        """``spin_wait=False``: the intra-op threads sleep between operators instead of spinning, which
        leaves the cores to other work of the same process (the search service decodes images meanwhile)."""
        chosen = _choose_providers(providers)
        options = ort.SessionOptions()
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_wait else "0")
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(onnx_path), options, providers=chosen)
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own non-standard exception types
            raise IndexFormatError(
                f"{onnx_path} cannot be loaded by onnxruntime ({error}); re-export the model"
            ) from None
        if providers == "cuda" and _CUDA not in session.get_providers():
            raise ConfigError(
                "CUDA was requested but onnxruntime fell back to the CPU; install onnxruntime-gpu "
                "with working CUDA libraries or use providers='cpu'"
            )
        return session

    @property
    def dim(self) -> int:
        return self.manifest.embedding_dim

    def embed_arrays(self, batch: np.ndarray) -> np.ndarray:
        """Preprocessed (n, 3, crop, crop) float32 -> L2-normalised (n, d) float32 embeddings."""
        if len(batch) == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        session = self._session
        if session is None:
            raise RetrievalError("this model was closed (the service reloaded it); send the request again")
        feeds = {self.manifest.input_name: np.ascontiguousarray(batch, dtype=np.float32)}
        (output,) = session.run([self.manifest.output_name], feeds)
        if output.ndim != 2 or output.shape[1] != self.dim:
            raise IndexFormatError(
                f"the ONNX model returned shape {output.shape} but model.json says embedding_dim="
                f"{self.dim}; re-export the model"
            )
        return l2_normalize(output)

    def close(self) -> None:
        """Release the onnxruntime session (its weights and arenas); a call already running finishes."""
        self._session = None

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """PIL images (any mode is converted to RGB) -> (n, d) float32, L2-normalised."""
        return self.embed_arrays(preprocess_batch(list(images), self.manifest.preprocessing))

    def embed_paths(self, paths: Sequence[Path], *, batch_size: int = 32, progress: bool = True) -> EmbedResult:
        """Embed image files; unreadable ones are listed in ``failures`` and skipped, never raised."""
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        chunks, ok, failures = [], [], []
        with tqdm(total=len(paths), desc="embedding", unit="img", disable=not progress) as bar:
            for indices, arrays, errors in self._decoded_batches(list(paths), batch_size):
                failures.extend(errors)
                if arrays:
                    chunks.append(self.embed_arrays(np.stack(arrays)))
                    ok.extend(indices)
                bar.update(len(indices) + len(errors))
        embeddings = np.concatenate(chunks) if chunks else np.empty((0, self.dim), dtype=np.float32)
        return EmbedResult(embeddings=embeddings, ok=ok, failures=failures)

    def _decode(self, path: Path) -> np.ndarray | str:
        try:
            return preprocess_image(open_rgb(Path(path)), self.manifest.preprocessing)
        except RetrievalError as error:
            return str(error)
        except Exception as error:  # noqa: BLE001 - one bad file must never stop a gallery build
            return f"cannot read image {path}: {type(error).__name__}: {error}"

    def _decoded_batches(
        self, paths: list[Path], batch_size: int
    ) -> Iterator[tuple[list[int], list[np.ndarray], list[tuple[Path, str]]]]:
        """Yield (ok indices, arrays, failures) per batch while the next batch is being decoded."""
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="decode") as pool:

            def submit(start: int) -> list[Future]:
                return [pool.submit(self._decode, path) for path in paths[start : start + batch_size]]

            pending = submit(0)
            for start in range(0, len(paths), batch_size):
                current, pending = pending, submit(start + batch_size)
                yield _split_outcomes(paths, start, [future.result() for future in current])


def embed_records(
    embedder: OnnxEmbedder, records: Sequence[ImageRecord], *, batch_size: int = 32, progress: bool = True
) -> tuple[list[ImageRecord], np.ndarray, list[tuple[Path, str]]]:
    """(records that could be read, their embeddings, failures); a DataError if none could be read.
    The one way a list of records is embedded (index build, eval --model, embed, the Python API)."""
    result = embedder.embed_paths([r.path for r in records], batch_size=batch_size, progress=progress)
    if records and not result.ok:
        raise DataError(f"none of the {len(records)} images could be read (first: {result.failures[0][1]})")
    return [records[i] for i in result.ok], result.embeddings, result.failures


def _split_outcomes(
    paths: list[Path], start: int, outcomes: list[np.ndarray | str]
) -> tuple[list[int], list[np.ndarray], list[tuple[Path, str]]]:
    indices, arrays, failures = [], [], []
    for offset, outcome in enumerate(outcomes):
        if isinstance(outcome, str):
            failures.append((Path(paths[start + offset]), outcome))
        else:
            indices.append(start + offset)
            arrays.append(outcome)
    return indices, arrays, failures
