"""Write a synthetic ImageFolder dataset for demos, tests and CI (no download needed).

Each class is a visual concept (shape x colour x texture, see ``synth_concepts``); each
image is drawn by ``synth_render`` from a generator seeded by (seed, class, image), so the
output is byte-identical for a seed and any image can be regenerated on its own. The tree
is written to a temporary sibling folder and renamed into place at the end, so a crash
never leaves a half-written dataset.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import PIL
from PIL import Image
from tqdm import tqdm

from retrieval.indexing.common.atomic_write import atomic_directory
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.synth.concepts import Concept, choose_concepts, class_folder_name
from retrieval.indexing.data.synth.render import render_image

MARKER = "SOURCE.md"
SOURCE_HEADING = "# Synthetic dataset written by `retrieval data synth`\n"
MIN_SIZE = 16


@dataclass(frozen=True)
class SynthSummary:
    out: Path
    classes: int
    per_class: int
    size: int
    seed: int
    images: int
    seconds: float
    class_names: list[str]

    def line(self) -> str:
        return (
            f"wrote {self.images} images ({self.classes} classes x {self.per_class}, {self.size} px, "
            f"seed {self.seed}) to {self.out} in {self.seconds:.1f} s"
        )


def generate_synthetic_dataset(
    out: Path,
    *,
    classes: int,
    per_class: int,
    size: int = 64,
    seed: int = 0,
    progress: bool = True,
    overwrite: bool = False,
) -> SynthSummary:
    """Write ``out/<class>/<nnnn>.png`` plus ``out/SOURCE.md``; returns what was written.

    Refuses a non-empty ``out`` unless ``overwrite`` is set, and even then only replaces a
    folder that this function wrote before (it has the ``SOURCE.md`` marker).
    """
    _check_arguments(classes, per_class, size)
    concepts = choose_concepts(classes, seed)
    out = Path(out).expanduser().absolute()
    _check_target(out, overwrite)
    names = [class_folder_name(index, concept, classes) for index, concept in enumerate(concepts)]
    started = time.perf_counter()
    with atomic_directory(out) as staging:  # an old tree is moved aside, then deleted
        _write_images(staging, concepts, names, per_class, size, seed, progress)
        (staging / MARKER).write_text(source_markdown(classes, per_class, size, seed, names), encoding="utf-8")
    return SynthSummary(out, classes, per_class, size, seed, classes * per_class, time.perf_counter() - started, names)


def render_png(concept: Concept, size: int, seed: int, class_index: int, image_index: int) -> bytes:
    """The PNG bytes of one image; pure function of its arguments."""
    rng = np.random.default_rng([seed, class_index, image_index])
    buffer = io.BytesIO()
    Image.fromarray(render_image(concept, size, rng)).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _check_arguments(classes: int, per_class: int, size: int) -> None:
    if classes < 1 or per_class < 1:
        raise DataError(f"classes and per_class must be at least 1, got {classes} and {per_class}")
    if size < MIN_SIZE:
        raise DataError(f"size must be at least {MIN_SIZE} pixels for the shapes to be recognisable, got {size}")


def _check_target(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise DataError(f"{out} exists and is not a folder; choose another output path")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise DataError(f"{out} is not empty; choose a new folder or pass --overwrite to replace it")
    if not _written_by_synth(out):
        raise DataError(
            f"{out} is not empty and its {MARKER} does not say it was written by `retrieval data synth`; "
            "refusing to replace it even with --overwrite"
        )


def _written_by_synth(out: Path) -> bool:
    """Only a folder whose SOURCE.md starts with our heading may be replaced."""
    try:
        return (out / MARKER).read_text(encoding="utf-8").startswith(SOURCE_HEADING)
    except (OSError, UnicodeDecodeError):
        return False


def _write_images(
    folder: Path, concepts: list[Concept], names: list[str], per_class: int, size: int, seed: int, progress: bool
) -> None:
    with tqdm(total=len(concepts) * per_class, desc="drawing", unit="img", disable=not progress) as bar:
        for class_index, (concept, name) in enumerate(zip(concepts, names)):
            (folder / name).mkdir()
            for image_index in range(per_class):
                data = render_png(concept, size, seed, class_index, image_index)
                (folder / name / f"{image_index:04d}.png").write_bytes(data)
                bar.update()


def source_markdown(classes: int, per_class: int, size: int, seed: int, names: list[str]) -> str:
    """The ``SOURCE.md`` text: how to regenerate this folder and what each class shows."""
    rows = "\n".join(f"| {name} |" for name in names)
    return (
        f"{SOURCE_HEADING}\n"
        "Generated by the `retrieval` project (not downloaded); regenerate it with the command below "
        f"(byte for byte with the same library versions: NumPy {np.__version__}, Pillow {PIL.__version__}):\n\n"
        f"```\nretrieval data synth OUT --classes {classes} --per-class {per_class} "
        f"--size {size} --seed {seed}\n```\n\n"
        "Each class is one visual concept, named `c<index>-<shape>-<colour>-<texture>`; within a class the "
        "rotation, scale, position, background gradient, distractor blobs, colour jitter and pixel noise vary. "
        "Concepts are a seeded shuffle of all shape x colour x texture combinations, so the sorted-class "
        "train/test split mixes attributes in both halves.\n\n"
        f"| class |\n|---|\n{rows}\n"
    )
