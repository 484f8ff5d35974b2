"""Where the last audit of a dataset is remembered, so that ``retrieval train`` can print its counts beside the
verdict: one small JSON per dataset folder (named by a hash of its resolved path) under ``$RETRIEVAL_AUDITS``
(default ``~/.cache/retrieval/audits``), holding the counts of ``audit.json``, the audit's folder and the number
of images it saw. Never required: a missing or unreadable record means no note."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from retrieval.indexing.common.atomic_write import atomic_write_text

AUDITS_VARIABLE = "RETRIEVAL_AUDITS"


def audits_dir() -> Path:
    return Path(os.environ.get(AUDITS_VARIABLE) or Path.home() / ".cache" / "retrieval" / "audits")


def _record_path(data: Path) -> Path:
    return audits_dir() / f"{hashlib.sha256(str(Path(data).resolve()).encode()).hexdigest()[:20]}.json"


def record_audit(data: Path, out: Path, counts: dict[str, Any]) -> None:
    """Remember the audit of ``data`` written to ``out`` (a cache: a failure to write is not an error)."""
    record = {"data": str(Path(data).resolve()), "out": str(Path(out).resolve()), **counts}
    try:
        _record_path(data).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(_record_path(data), json.dumps(record, indent=2) + "\n")
    except OSError:
        pass


def audit_note(data: Path | str | None) -> str | None:
    """The sentence ``retrieval train`` prints about the last audit of ``data``, or None when there is none."""
    if data is None:
        return None
    try:
        record = json.loads(_record_path(Path(data)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if record.get("data") != str(Path(data).resolve()):
        return None
    return (
        f"data audit of these images ({record['out']}): {record['suspects']} of {record['items']} probably "
        f"mislabelled, {record['outliers']} outliers; to train without them: --exclude on its --exclude-list"
    )
