"""Every benchmark in bench/ runs in its quick mode (tiny sizes, a few seconds), so a benchmark that breaks
fails the suite instead of rotting until someone next runs it.

Only that is asserted: the script exits 0 and prints its markdown table. The numbers belong to the
benchmarks, measured at full size (``make bench``); a quick run's are meaningless. A benchmark is a
``bench/*.py`` with a ``__main__`` block, found here by that, so a new one joins this test by existing and must
support ``--quick`` (``bench/quick_mode.py``). One whose prerequisite is absent here (QEMU, milvus-lite) exits
with ``SKIPPED`` and the reason, and is reported as skipped.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from quick_mode import SKIPPED, parse_quick  # noqa: E402

SCRIPTS = sorted(path.name for path in BENCH.glob("*.py") if 'if __name__ == "__main__":' in path.read_text())
MODES = [
    ("bench_serving_load.py", "--overload", "2"),
    ("bench_calibration.py", "--trials"),
    ("bench_calibration.py", "--few-classes", "2"),
]
"""Second modes of a script that run other code (overload_protocol.py, calibration_trials.py), each run once more."""
TABLE = re.compile(r"^\|[-|: ]*-{3}[-|: ]*\|$", re.MULTILINE)
"""A markdown table's separator row."""
TIMEOUT_S = 300
pytestmark = pytest.mark.slow  # runs every benchmark (still in CI: that is the point)


@pytest.mark.parametrize("command", [(script,) for script in SCRIPTS] + MODES, ids=" ".join)
def test_quick_run(command: tuple[str, ...], tmp_path: Path) -> None:
    script = command[0]
    env = dict(os.environ, TMPDIR=str(tmp_path))  # caches and scratch files die with the test
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *command[1:], "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if done.returncode == SKIPPED:
        pytest.skip(f"{script}: {(done.stdout.strip().splitlines() or ['no reason printed'])[-1]}")
    assert done.returncode == 0, output
    assert TABLE.search(done.stdout), f"{script} printed no table:\n{output}"


def test_every_benchmark_is_found() -> None:
    """The discovery above sees the benchmarks (a changed ``__main__`` idiom would silently empty it)."""
    assert {"bench_search.py", "bench_serving_load.py", "profile_search_request.py"} <= set(SCRIPTS)


def test_quick_replaces_defaults_but_not_given_options() -> None:
    def parser() -> argparse.ArgumentParser:
        made = argparse.ArgumentParser()
        made.add_argument("--size", type=int, default=100_000)
        made.add_argument("--dim", type=int, default=512)
        return made

    assert vars(parse_quick(parser(), [], size=10, dim=8)) == {"size": 100_000, "dim": 512, "quick": False}
    assert vars(parse_quick(parser(), ["--quick"], size=10, dim=8)) == {"size": 10, "dim": 8, "quick": True}
    assert vars(parse_quick(parser(), ["--quick", "--size", "7"], size=10, dim=8)) == {
        "size": 7,
        "dim": 8,
        "quick": True,
    }
