"""``--model`` and ``--data`` as given, or neither: an exported random-weights stand-in (``stand_in_run.py``), for
the benchmarks that measure a trained model (``bench_postprocess.py``, ``bench_calibration.py``)."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def model_and_data(args: argparse.Namespace) -> Iterator[Path]:
    """Fill ``args.model`` and ``args.data`` with an exported stand-in run when neither is given (torch loads only
    then), and yield a scratch folder that lives as long as the context."""
    if (args.model is None) != (args.data is None):
        raise SystemExit("give --model and --data together (or neither: a random-weights stand-in)")
    with tempfile.TemporaryDirectory() as scratch:
        if args.model is None:
            from stand_in_run import NOTICE, stand_in_run

            from retrieval.training.export.run_export import export_run

            print(NOTICE)
            args.model, args.data = stand_in_run(Path(scratch) / "stand-in", args.quick)
            export_run(args.model)
        yield Path(scratch)
