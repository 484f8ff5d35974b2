"""The benchmarks' OPENBLAS_CORETYPE follows the CPU they run on (SkylakeX on an AVX2-only CPU is SIGILL)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from openblas_core import coretype_for, resolve_coretype  # noqa: E402

AVX2_EPYC = frozenset({"sse4_2", "avx", "avx2", "fma"})
XEON = AVX2_EPYC | {"avx512f", "avx512bw", "avx512dq", "avx512vl"}


def test_skylake_x_only_where_avx512_is() -> None:
    assert coretype_for(XEON)[0] == "SkylakeX"
    assert coretype_for(AVX2_EPYC) == ("Haswell", "this CPU has AVX2 without AVX-512 (SkylakeX would die with SIGILL)")
    assert coretype_for(frozenset({"sse4_2"}))[0] == ""


def test_explicit_choices_win_and_none_unsets() -> None:
    assert resolve_coretype("Zen") == ("Zen", "as requested")
    assert resolve_coretype("none")[0] == resolve_coretype("")[0] == ""
    assert resolve_coretype("auto")[0] in {"SkylakeX", "Haswell", ""}


def test_the_chosen_coretype_runs_numpy_on_this_cpu() -> None:
    """The default must not kill a child process here (it did with SIGILL on an AVX2-only AMD EPYC)."""
    coretype, why = resolve_coretype("auto")
    env = {"OPENBLAS_CORETYPE": coretype} if coretype else {}
    code = "import numpy as np; a = np.ones((64, 64)); print(float((a @ a).sum()))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "262144.0", (coretype, why, done.stderr[-500:])
