"""A tiny text-capable export for the tests of text queries: the tiny image model of ``index_fixtures`` with a
tiny text tower beside it (``text.onnx`` + ``tokenizer.json`` + model.json's ``text``), built here without
``retrieval export`` (the one place to swap for the export's own tiny CLIP once it exists).

The text tower is an embedding table, a mean over the context and a linear map to the image model's
dimension; the tokenizer a ``tokenizers`` WordLevel vocabulary over ``WORDS`` that lower-cases, splits on
whitespace and punctuation, adds ``<start>``/``<end>`` and pads and truncates to ``CONTEXT_LENGTH``.
``reference_text_embeddings`` computes the same vectors with torch, independently of the product's
encoder. Also the index fixtures built on it: ``text_index`` (the generated gallery) and ``planted_text_index``
(plus one item per ``PLANTED`` text whose vector is that text's embedding, key ``planted-N``).
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from index_fixtures import TINY_DIM, export_tiny_model, make_gallery

from retrieval.indexing.exported_model.model_manifest import ModelManifest, file_sha256, manifest_json
from retrieval.indexing.exported_model.text_side import TextSide
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.usecases.vectors import add

CONTEXT_LENGTH = 8
SPECIALS = ("<pad>", "<unk>", "<start>", "<end>")
WORDS = (
    "a photo of the red green blue pickup truck cat dog bird black footed albatross yellow car boat "
    "class 0 1 2 3 4 5 small large"
).split()
PLANTED = ("red pickup truck", "a photo of a black footed albatross", "small blue boat")
"""Texts whose embeddings ``planted_text_index`` stores as items (keys planted-1, planted-2, ...)."""


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    vocab = {token: number for number, token in enumerate((*SPECIALS, *WORDS))}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<start> $A <end>", special_tokens=[("<start>", 2), ("<end>", 3)]
    )
    tokenizer.enable_truncation(max_length=CONTEXT_LENGTH)
    tokenizer.enable_padding(length=CONTEXT_LENGTH, pad_id=0, pad_token="<pad>")
    tokenizer.save(str(path))


def _text_tower(dim: int, seed: int):  # noqa: ANN202 - a torch module, torch imported here only
    import torch
    from torch import nn

    class TinyText(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(len(SPECIALS) + len(WORDS), 32, padding_idx=0)
            self.project = nn.Linear(32, dim, bias=False)

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.project(self.embed(input_ids).mean(dim=1))

    torch.manual_seed(seed)
    return TinyText().eval()


def add_tiny_text_side(export_dir: Path, dim: int = TINY_DIM, seed: int = 7) -> Path:
    """Write text.onnx + tokenizer.json into ``export_dir`` and record them in its model.json."""
    import torch

    tower = _text_tower(dim, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            tower,
            (torch.zeros(2, CONTEXT_LENGTH, dtype=torch.int64),),
            str(export_dir / "text.onnx"),
            dynamo=False,
            opset_version=17,
            input_names=["input_ids"],
            output_names=["text_embeddings"],
            dynamic_axes={"input_ids": {0: "batch"}, "text_embeddings": {0: "batch"}},
        )
    _tokenizer(export_dir / "tokenizer.json")
    side = TextSide(
        onnx_sha256=file_sha256(export_dir / "text.onnx"),
        tokenizer_sha256=file_sha256(export_dir / "tokenizer.json"),
        context_length=CONTEXT_LENGTH,
        embedding_dim=dim,
        logit_scale=100.0,
        source="tests/text_fixtures.py tiny text tower",
    )
    manifest = ModelManifest.load(export_dir).model_copy(update={"text": side})
    (export_dir / "model.json").write_text(manifest_json(manifest))
    return export_dir


def reference_text_embeddings(texts: list[str], dim: int = TINY_DIM, seed: int = 7) -> np.ndarray:
    """The tiny tower's L2-normalised embeddings of ``texts`` computed in torch (the tokenizer's ids)."""
    import torch
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory() as folder:
        _tokenizer(Path(folder) / "tokenizer.json")
        ids = [encoding.ids for encoding in Tokenizer.from_file(f"{folder}/tokenizer.json").encode_batch(texts)]
    with torch.no_grad():
        vectors = _text_tower(dim, seed)(torch.tensor(ids, dtype=torch.int64)).numpy()
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def export_tiny_text_model(export_dir: Path) -> Path:
    """The tiny image model with the tiny text tower beside it."""
    return add_tiny_text_side(export_tiny_model(export_dir))


@pytest.fixture(scope="session")
def tiny_text_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_tiny_text_model(tmp_path_factory.mktemp("text_model") / "export")


@pytest.fixture(scope="session")
def text_index_template(tmp_path_factory: pytest.TempPathFactory, tiny_text_model_dir: Path) -> Path:
    """An index of the generated gallery built with the text-capable tiny model, plus the ``PLANTED`` items."""
    root = tmp_path_factory.mktemp("text_index")
    build_index(tiny_text_model_dir, make_gallery(root / "gallery"), root / "index", progress=False)
    add(
        root / "index",
        reference_text_embeddings(list(PLANTED)),
        keys=[f"planted-{number}" for number in range(1, len(PLANTED) + 1)],
        labels="planted",
        metadata=[{"shop": "berlin" if number % 2 else "paris"} for number in range(1, len(PLANTED) + 1)],
    )
    return root / "index"


@pytest.fixture()
def text_index(text_index_template: Path, tmp_path: Path) -> Path:
    """A copy of ``text_index_template`` of the test's own."""
    return Path(shutil.copytree(text_index_template, tmp_path / "text_index"))
