"""Measure a model's copy threshold: synthetic copies of images against distinct images of their class.

Each original is copied four ways (``COPY_KINDS``: re-encoded as a low-quality JPEG, shrunk, slightly
cropped, slightly recoloured) and the copy's similarity to its original is a positive; every pair of two
distinct originals of one class is a negative. The threshold sits midway between the score that keeps
``TARGET_COPY_RECALL`` of the copies and the one that admits at most ``MAX_DISTINCT_RATE`` of the distinct
pairs when the two do not cross; when they do, the copies' score wins (copies are what is looked for) and
the rate it admits is recorded as it is. Float (cosine), binary (sign codes) and the pixel check
(``data.copy_signature``'s correlation, which ``copy_verifier`` applies to the embedding's candidates) are
measured alike, except that the pixel check's threshold sits at the copies' end of the gap, not midway: it
judges only pairs the embedding already found alike (two photos of one car model in one pose), far more
alike in their pixels than two random images of a class, so the random pairs' 1 % mark would be too lenient.
With the pixel check behind it, the embedding only proposes candidates: its candidate thresholds (float and
binary) sit at the distinct pairs' end, admitting the most copies the 1 % rule allows.
"""

from __future__ import annotations

import io
import random
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageEnhance

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.duplicates.copy_signature import copy_signature, signature_similarity
from retrieval.indexing.exported_model.copy_threshold import (
    MAX_DISTINCT_RATE,
    TARGET_COPY_RECALL,
    CopyThreshold,
    ThresholdRates,
)
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize, hamming_to_similarity

MAX_ORIGINALS = 120
PER_CLASS = 6
BATCH = 32


def synthetic_copies(image: Image.Image, rng: random.Random) -> list[Image.Image]:
    """The four copies of ``image``: JPEG at quality 50-80, shrunk to 50-80 %, 1-4 % cropped off each
    side, brightness and saturation changed by up to 10 %."""
    encoded = io.BytesIO()
    image.save(encoded, format="JPEG", quality=rng.randint(50, 80))
    jpeg = Image.open(io.BytesIO(encoded.getvalue())).convert("RGB")
    scale = rng.uniform(0.5, 0.8)
    small = image.resize((max(8, round(image.width * scale)), max(8, round(image.height * scale))))
    w, h = image.size
    box = [rng.uniform(0.01, 0.04) for _ in range(4)]
    cropped = image.crop((round(w * box[0]), round(h * box[1]), round(w * (1 - box[2])), round(h * (1 - box[3]))))
    recoloured = ImageEnhance.Color(ImageEnhance.Brightness(image).enhance(rng.uniform(0.9, 1.1)))
    return [jpeg, small, cropped, recoloured.enhance(rng.uniform(0.9, 1.1))]


def measure_copy_threshold(
    embedder: OnnxEmbedder, records: Sequence[ImageRecord], *, described_as: str = "", seed: int = 0
) -> CopyThreshold:
    """The copy threshold of ``embedder`` measured on (a sample of) ``records``; at least two classes of
    two readable images each are needed, or a DataError says so."""
    originals, images = _readable(_sample(records, seed))
    rng = random.Random(seed)
    copies = [copy for image in images for copy in synthetic_copies(image, rng)]
    vectors = _embed(embedder, images + copies)
    source = np.repeat(np.arange(len(images)), len(copies) // len(images))
    first, second = _same_class_pairs([record.label for record in originals])
    codes = binarize(vectors, embedder.manifest.binarization_threshold)
    bits = vectors.shape[1]
    copy_rows = np.arange(len(images), len(vectors))
    float_scores = _cosine(vectors, source, copy_rows), _cosine(vectors, first, second)
    binary_scores = _code_similarity(codes, source, copy_rows, bits), _code_similarity(codes, first, second, bits)
    signatures = [copy_signature(image) for image in images + copies]
    pixel_rates = choose_threshold(
        _signature_similarity(signatures, source, copy_rows),
        _signature_similarity(signatures, first, second),
        at=COPIES_END,  # it judges the pairs the embedding found alike, harder than random same-class pairs
    )
    return CopyThreshold(
        float_threshold=choose_threshold(*float_scores),
        binary_threshold=choose_threshold(*binary_scores),
        pixel_threshold=pixel_rates,
        candidate_threshold=choose_threshold(*float_scores, at=DISTINCT_END),
        candidate_binary_threshold=choose_threshold(*binary_scores, at=DISTINCT_END),
        images=len(images),
        copies=len(copies),
        distinct_pairs=len(first),
        measured_on=described_as,
    )


MIDWAY, COPIES_END, DISTINCT_END = "midway", "copies", "distinct"


def choose_threshold(copy_scores: np.ndarray, distinct_scores: np.ndarray, *, at: str = MIDWAY) -> ThresholdRates:
    """The threshold between what keeps ``TARGET_COPY_RECALL`` of the copies and what admits at most
    ``MAX_DISTINCT_RATE`` of the distinct pairs (see the module docstring), with both rates; ``at`` the
    copies' end of that gap (the highest threshold that keeps ``TARGET_COPY_RECALL`` of them) or the distinct
    pairs' end (the lowest that admits at most ``MAX_DISTINCT_RATE`` of them) instead of midway. When the two
    cross, the copies' score either way."""
    keep_copies = float(np.quantile(copy_scores, 1.0 - TARGET_COPY_RECALL, method="lower"))
    above_distinct = float(np.nextafter(np.quantile(distinct_scores, 1.0 - MAX_DISTINCT_RATE, method="higher"), 2))
    gap = {MIDWAY: (keep_copies + above_distinct) / 2, COPIES_END: keep_copies, DISTINCT_END: above_distinct}[at]
    threshold = gap if above_distinct < keep_copies else keep_copies
    threshold = float(np.clip(threshold, -1.0, 1.0))
    return ThresholdRates(
        threshold=threshold,
        copy_recall=float(np.mean(copy_scores >= threshold)),
        distinct_rate=float(np.mean(distinct_scores >= threshold)),
    )


def _sample(records: Sequence[ImageRecord], seed: int) -> list[ImageRecord]:
    """Up to ``PER_CLASS`` images of as many classes as fit in ``MAX_ORIGINALS``, in a seeded order."""
    by_class: dict[str, list[ImageRecord]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.label, str(r.path))):
        by_class[record.label].append(record)
    classes = [label for label, members in sorted(by_class.items()) if len(members) >= 2]
    if len(classes) < 2:
        raise DataError("measuring the copy threshold needs two classes of two images or more")
    rng = random.Random(seed)
    rng.shuffle(classes)
    chosen: list[ImageRecord] = []
    for label in classes[: max(2, MAX_ORIGINALS // PER_CLASS)]:
        chosen += rng.sample(by_class[label], min(PER_CLASS, len(by_class[label])))
    return chosen


def _readable(records: list[ImageRecord]) -> tuple[list[ImageRecord], list[Image.Image]]:
    """The records whose image decodes, with their images (an unreadable one is left out)."""
    kept, images = [], []
    for record in records:
        try:
            images.append(open_rgb(record.path))
        except DataError:
            continue
        kept.append(record)
    if len(kept) < 2:
        raise DataError("measuring the copy threshold needs two readable images or more")
    return kept, images


def _embed(embedder: OnnxEmbedder, images: list[Image.Image]) -> np.ndarray:
    return np.concatenate([embedder.embed_images(images[i : i + BATCH]) for i in range(0, len(images), BATCH)])


def _same_class_pairs(labels: list[str]) -> tuple[np.ndarray, np.ndarray]:
    array = np.asarray(labels)
    first, second = np.nonzero(np.triu(array[:, None] == array[None, :], k=1))
    return first, second


def _cosine(vectors: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", vectors[first], vectors[second])


def _signature_similarity(signatures: list[np.ndarray], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.array([signature_similarity(signatures[a], signatures[b]) for a, b in zip(first, second)], np.float32)


def _code_similarity(codes: np.ndarray, first: np.ndarray, second: np.ndarray, bits: int) -> np.ndarray:
    distance = np.unpackbits(codes[first] ^ codes[second], axis=1).sum(axis=1)
    return hamming_to_similarity(distance, bits)
