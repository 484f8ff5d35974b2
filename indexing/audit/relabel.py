"""``retrieval data apply-relabel``: the ``relabel.csv`` of an audit, as its user edited it (``path``, ``label``,
``new_label``; an empty ``new_label`` keeps the image where it is), applied to a copy of an ImageFolder dataset:
every image is copied to ``OUT/<class>/``, its class the new label where one is given. The source is never
changed."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from tqdm import tqdm

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.sources import describe_layout, load_records

IMAGE_FOLDER = "ImageFolder"


def apply_relabel(data: Path, relabel: Path, out: Path, *, progress: bool = True) -> dict[str, int]:
    """Copy ``data`` to ``out`` with the moves of ``relabel``; the counts of copied and moved images."""
    if IMAGE_FOLDER.lower() not in describe_layout(data).lower():
        raise DataError(f"apply-relabel copies ImageFolder datasets (one folder per class); {data} is not one")
    if out.exists():
        raise DataError(f"{out} exists; give a new folder for the relabelled copy")
    moves = read_relabel(relabel)
    records = load_records(data)
    known = {str(record.path.resolve()) for record in records}
    unknown = [path for path in moves if path not in known]
    if unknown:
        raise DataError(f"{relabel} names {len(unknown)} images that are not in {data}, e.g. {unknown[0]}")
    moved = 0
    for record in tqdm(records, desc="copying", unit="img", disable=not progress):
        label = moves.get(str(record.path.resolve())) or record.label
        moved += label != record.label
        target = out / label / record.path.name
        if target.exists():
            target = target.with_name(f"{record.path.parent.name}_{record.path.name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(record.path, target)
    return {"copied": len(records), "moved": moved}


def read_relabel(relabel: Path) -> dict[str, str]:
    """Resolved image path -> its new label, for the rows whose ``new_label`` is not empty."""
    try:
        with open(relabel, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise DataError(f"there is no relabel file {relabel}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"cannot read {relabel} as a UTF-8 CSV ({error})") from None
    if rows and not {"path", "new_label"} <= set(rows[0]):
        raise DataError(f"{relabel} needs the columns path and new_label (as `retrieval data audit` writes it)")
    moves = {}
    for row in rows:
        label = (row.get("new_label") or "").strip()
        if label:
            if "/" in label or label in (".", ".."):
                raise DataError(f"{relabel}: {label!r} is not a class folder name")
            moves[str(Path(row["path"]).resolve())] = label
    return moves
