"""Tables written as Parquet (needs pyarrow, an optional extra) or CSV, atomically.

One writer for every table the command line produces: search results, exported embeddings,
evaluation neighbours. Columns are a mapping of name -> values in row order; a 2-D array
column (embeddings) becomes a fixed-size list column in Parquet, and is not allowed in CSV.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexing.common.atomic_write import atomic_write_text, atomic_write_with
from retrieval.indexing.common.errors import ConfigError

PARQUET = ".parquet"
CSV = ".csv"
TABLE_SUFFIXES = (PARQUET, CSV)
INSTALL_HINT = "pip install 'retrieval[parquet]' (or pyarrow)"

Columns = Mapping[str, Sequence[Any] | np.ndarray]


def table_suffix(path: Path, allowed: Sequence[str] = TABLE_SUFFIXES) -> str:
    """The lower-cased suffix of ``path`` if it is one of ``allowed``; for Parquet, pyarrow must be
    importable. Checked before any work, so a long embedding run never ends in a missing package."""
    suffix = Path(path).suffix.lower()
    if suffix not in allowed:
        raise ConfigError(f"cannot tell the format of {path}: name it *{' or *'.join(allowed)}")
    if suffix == PARQUET:
        require_pyarrow()
    return suffix


def require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ConfigError(f"writing Parquet needs pyarrow, which is not installed: {INSTALL_HINT}") from None


def write_table(path: Path, columns: Columns, *, metadata: Mapping[str, str] | None = None) -> None:
    """Write ``columns`` to ``path`` (.parquet or .csv by its suffix); ``metadata`` goes into the
    Parquet schema (CSV has no place for it)."""
    _check_lengths(columns)
    if table_suffix(path) == PARQUET:
        _write_parquet(Path(path), columns, metadata or {})
    else:
        atomic_write_text(Path(path), csv_text(columns))


def csv_text(columns: Columns) -> str:
    """The columns as CSV text with a header row; ``None`` becomes an empty cell."""
    for name, values in columns.items():
        if isinstance(values, np.ndarray) and values.ndim != 1:
            raise ConfigError(f"column {name!r} holds vectors, which CSV cannot; write .parquet or .npy")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(list(columns))
    cells = [_as_list(values) for values in columns.values()]
    writer.writerows(zip(*cells, strict=True))
    return buffer.getvalue()


def _write_parquet(path: Path, columns: Columns, metadata: Mapping[str, str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {name: _arrow_array(pa, values) for name, values in columns.items()}
    table = pa.table(arrays).replace_schema_metadata(dict(metadata))
    atomic_write_with(path, lambda tmp: pq.write_table(table, str(tmp)))


def _arrow_array(pa: Any, values: Sequence[Any] | np.ndarray) -> Any:
    if isinstance(values, np.ndarray) and values.ndim == 2:
        flat = pa.array(np.ascontiguousarray(values).reshape(-1))
        return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
    return pa.array(values.tolist() if isinstance(values, np.ndarray) else list(values))


def _as_list(values: Sequence[Any] | np.ndarray) -> list[Any]:
    cells = values.tolist() if isinstance(values, np.ndarray) else list(values)
    return ["" if cell is None else cell for cell in cells]


def _check_lengths(columns: Columns) -> None:
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"table columns differ in length: {lengths}")
