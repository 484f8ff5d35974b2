"""Every benchmark in bench/ runs in its quick mode (tiny sizes, a few seconds), so a benchmark that breaks
fails the suite instead of rotting until someone next runs it.

Only that is asserted: the script exits 0 and prints its markdown table. The numbers belong to the
benchmarks, measured at full size (``make bench``); a quick run's are meaningless. A benchmark is a
``bench/*.py`` with a ``__main__`` block, found here by that, so a new one joins this test by existing and must
support ``--quick`` (``bench/quick_mode.py``). One whose prerequisite is absent here (QEMU, milvus-lite) exits
with ``SKIPPED`` and the reason, and is reported as skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from quick_mode import SKIPPED  # noqa: E402

SCRIPTS = sorted(path.name for path in BENCH.glob("*.py") if 'if __name__ == "__main__":' in path.read_text())
TIMEOUT_S = 180


@pytest.mark.parametrize("script", SCRIPTS)
def test_quick_run(script: str, tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))  # caches and scratch files die with the test
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if done.returncode == SKIPPED:
        pytest.skip(f"{script}: {done.stdout.strip().splitlines()[-1]}")
    assert done.returncode == 0, output
    assert "|---" in done.stdout, f"{script} printed no table:\n{output}"


def test_every_benchmark_is_found() -> None:
    """The discovery above sees the benchmarks (a changed ``__main__`` idiom would silently empty it)."""
    assert {"bench_search.py", "bench_serving_load.py", "profile_search_request.py"} <= set(SCRIPTS)
