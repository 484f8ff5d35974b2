"""``--quick``: every benchmark's smoke run, tiny sizes and a few seconds, which ``tests/test_bench_quick.py`` runs
so that a benchmark that breaks fails the suite. A quick run's numbers mean nothing; the full-size defaults are
what ``make bench`` runs.

A benchmark whose prerequisite is absent on this machine (QEMU, milvus-lite, a trained run it cannot make)
calls ``skip(reason)``: it prints the reason and exits with ``SKIPPED``, which the test and ``make bench`` report
as skipped, not failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

SKIPPED = 77
"""The exit status of a skipped benchmark (automake's convention for a skipped test)."""

QUICK_HELP = "tiny sizes, a few seconds: the test suite's smoke run (its numbers mean nothing)"


def parse_quick(parser: argparse.ArgumentParser, argv: list[str] | None = None, **quick: Any) -> argparse.Namespace:
    """Add ``--quick`` to ``parser`` and parse; with it, ``quick``'s values replace the full-size defaults
    (an option given on the command line still wins)."""
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    if "--quick" in (sys.argv[1:] if argv is None else argv):
        parser.set_defaults(**quick)
    return parser.parse_args(argv)


def skip(reason: str) -> NoReturn:
    """Exit as skipped: ``reason`` says which prerequisite is absent here."""
    print(f"skipped: {reason}", flush=True)
    raise SystemExit(SKIPPED)
