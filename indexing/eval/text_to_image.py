"""The text -> image row of ``retrieval eval`` (issue 49): one prompt per evaluated class, made from its folder
name (``--prompt "a photo of a {label}"``; ``001.Black_footed_Albatross`` reads "black footed albatross"),
searched against the evaluated images by the model's text tower, and measured by ``metrics`` as any query is:
a prompt's relevant items are the gallery images of its class (MAP@R, R-precision, P@1, Recall@K)."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

import numpy as np

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.eval.metrics import RetrievalMetrics, evaluate_embeddings

DEFAULT_PROMPT = "a photo of a {label}"
_NUMBERED = re.compile(r"^\d+[\s._-]*")


def label_words(label: str) -> str:
    """A class folder's name as words: a numeric prefix dropped, ``_`` and ``-`` as spaces, lower case."""
    words = _NUMBERED.sub("", label).replace("_", " ").replace("-", " ")
    return " ".join(words.split()).lower() or label


def check_prompt(template: str) -> str:
    """``template`` when it names ``{label}`` and no other field; else a ConfigError saying how to write it."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise ConfigError(
            f"--prompt {template!r} is not a valid template ({error}); write e.g. {DEFAULT_PROMPT!r}"
        ) from None
    if fields != {"label"}:
        raise ConfigError(
            f"--prompt must contain {{label}} and no other field, e.g. {DEFAULT_PROMPT!r}; got {template!r}"
        )
    return template


def class_prompts(labels: Sequence[str], template: str) -> tuple[list[str], list[str]]:
    """(the classes, in sorted order, and the prompt of each)."""
    classes = sorted({str(label) for label in labels})
    return classes, [check_prompt(template).format(label=label_words(label)) for label in classes]


def text_to_image_metrics(
    prompt_vectors: np.ndarray,
    classes: Sequence[str],
    gallery: np.ndarray,
    gallery_labels: np.ndarray,
    ks: Sequence[int],
) -> RetrievalMetrics:
    """Each class's prompt (a row of ``prompt_vectors``) searched in ``gallery`` by cosine, measured with the
    one implementation of the metrics (its relevant items: the gallery images of its class)."""
    return evaluate_embeddings(
        np.asarray(prompt_vectors, np.float32),
        np.asarray(classes),
        np.asarray(gallery, np.float32),
        np.asarray(gallery_labels).astype(str),
        ks=ks,
        compute_nmi=False,
    )
