"""Embed texts with the text tower exported beside an image model (``model.json``'s ``text``), without torch.

``TextEncoder`` is an onnxruntime session of ``text.onnx`` and the ``tokenizers`` tokenizer of
``tokenizer.json`` (which already pads and truncates to the context length); both files are checked
against the sha256s ``model.json`` records, as ``OnnxEmbedder`` checks ``model.onnx``. Its vectors are
L2-normalised like the image embeddings, in the same space. ``text_encoder_of`` is the one way a search
gets one: the encoder of an export, or ``NoTextSideError`` with the sentence that says why there is none
and how to get one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from retrieval.indexing.common.errors import DataError, IndexFormatError, ModelMismatchError, RetrievalError
from retrieval.indexing.common.unicode_text import text_problem
from retrieval.indexing.data.records import is_invisible
from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256
from retrieval.indexing.exported_model.no_model import has_model, no_model_error
from retrieval.indexing.exported_model.onnx_embedder import l2_normalize
from retrieval.indexing.exported_model.text_side import TEXT_TOWERS, TextSide

TEXT_BACKBONES = tuple(TEXT_TOWERS)
"""The backbones whose training-free export carries a text tower: ``text_side.TEXT_TOWERS``' names."""
TEXT_RUN_COMMAND = (
    "retrieval train --data DIR --out RUN --epochs 0 --backbone clip_vitb32 --pretrained hub --allow-download"
)
TEXT_RUN_MB = 605  # clip_vitb32's hub weights (training.config.hub_access.HUB_WEIGHTS_MB; a test keeps them equal)


class NoTextSideError(ModelMismatchError):
    """A text query on an index whose model has no text tower (a 409 over HTTP, like ``NoModelError``)."""


def no_text_side_error(model: ModelManifest) -> RetrievalError:
    """The one sentence of every refusal of a text query: why this model has no text side, and the fix."""
    if not has_model(model):
        return no_model_error("texts")
    why = model.text_dropped or f"its backbone {model.backbone!r} has no text tower"
    return NoTextSideError(
        f"this index's model cannot embed texts: {why}; build the index with a training-free export of "
        f"{', '.join(TEXT_BACKBONES)}: `{TEXT_RUN_COMMAND}` (about {TEXT_RUN_MB} MB of weights, downloaded once), "
        "then `retrieval export RUN` (it writes text.onnx and tokenizer.json) and `retrieval index build --model RUN`"
    )


def checked_texts(texts: Sequence[str]) -> list[str]:
    """The texts of a query, each with something to search for; an empty or blank one is a DataError, as is
    one of nothing visible (zero-width characters, combining marks alone: the tokenizer makes arbitrary
    tokens of them) and one holding NUL or a lone surrogate (``text_problem``)."""
    if not texts:
        raise DataError("a text search needs at least one text")
    for number, text in enumerate(texts, start=1):
        which = "the text" if len(texts) == 1 else f"text {number} of {len(texts)}"
        if isinstance(text, str) and (problem := text_problem(text)) is not None:
            raise DataError(f"{which} {problem}")
        if not isinstance(text, str) or all(map(is_invisible, text)):
            raise DataError(f"{which} is empty (nothing but blanks, zero-width characters or marks); send some words")
    return list(texts)


class TextEncoder:
    """``text.onnx`` + ``tokenizer.json`` of an export directory: ``encode(texts)`` -> (n, d) float32,
    L2-normalised. ``run`` may be called from several threads (onnxruntime sessions allow it)."""

    def __init__(self, export_dir: Path, side: TextSide, *, threads: int | None = None) -> None:
        self.export_dir = Path(export_dir)
        self.side = side
        onnx_path = self._checked(side.onnx_file, side.onnx_sha256)
        tokenizer_path = self._checked(side.tokenizer_file, side.tokenizer_sha256)
        try:
            self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as error:  # noqa: BLE001 - tokenizers raises plain Exceptions for bad files
            raise IndexFormatError(f"{tokenizer_path} cannot be read by tokenizers ({error}); re-export") from None
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:
            self._session: ort.InferenceSession | None = ort.InferenceSession(
                str(onnx_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own non-standard exception types
            raise IndexFormatError(f"{onnx_path} cannot be loaded by onnxruntime ({error}); re-export") from None

    def _checked(self, name: str, sha256: str) -> Path:
        path = self.export_dir / name
        if not path.is_file():
            raise IndexFormatError(f"{path} does not exist but model.json names it; re-export the model")
        if (found := file_sha256(path)) != sha256:
            raise IndexFormatError(
                f"{path} has sha256 {found[:12]} but model.json expects {sha256[:12]}; the export is corrupt or "
                "mixed, re-export the model"
            )
        return path

    @property
    def dim(self) -> int:
        return self.side.embedding_dim

    def close(self) -> None:
        """Release the onnxruntime session; a call already running finishes."""
        self._session = None

    def token_ids(self, texts: Sequence[str]) -> np.ndarray:
        """(n, context_length) int64: the tokenizer's ids, padded and truncated as tokenizer.json says."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.asarray([encoding.ids for encoding in encodings], dtype=np.int64)
        if ids.ndim != 2 or ids.shape[1] != self.side.context_length:
            raise IndexFormatError(
                f"{self.export_dir / self.side.tokenizer_file} does not pad texts to the context length "
                f"{self.side.context_length} model.json records; re-export the model"
            )
        return ids

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Texts -> (n, d) float32 embeddings, L2-normalised (the image embedder's space)."""
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        session = self._session
        if session is None:
            raise RetrievalError("this text model was closed (the service reloaded it); send the request again")
        (output,) = session.run([self.side.output_name], {self.side.input_name: self.token_ids(texts)})
        if output.ndim != 2 or output.shape[1] != self.dim:
            raise IndexFormatError(
                f"text.onnx returned shape {output.shape} but model.json says embedding_dim={self.dim}; re-export"
            )
        return l2_normalize(output)


def text_encoder_of(export_dir: Path, model: ModelManifest, *, threads: int | None = None) -> TextEncoder:
    """The text encoder of an export (``model``: its ``model.json``), or the refusal that says why none."""
    if model.text is None or not has_model(model):
        raise no_text_side_error(model)
    if model.text.embedding_dim != model.embedding_dim:
        raise IndexFormatError(
            f"{export_dir}: model.json's text side has {model.text.embedding_dim} dimensions but its images "
            f"{model.embedding_dim}; they must share one space, re-export the model"
        )
    return TextEncoder(export_dir, model.text, threads=threads)
