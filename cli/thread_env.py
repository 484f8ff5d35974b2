"""How idle worker threads wait, set for every ``retrieval`` command before numpy and faiss load.

Both libraries' thread pools busy-wait after their work by default, and on a machine with few or
shared cores the spinning threads take the cores from whatever runs next in the same process:

- OpenMP (faiss, onnxruntime's dependencies, torch) spins between parallel regions; under load a
  single binary query over 100k codes ran 60x slower (bench/bench_search.py). PASSIVE: they sleep.
- OpenBLAS (NumPy's matrix products) spins for 2^28 cycles (about 0.1 s) after each product. In
  exact k-NN, faiss's heap pass right after each product then shared the 2 cores with the spinning
  BLAS worker: 2^20 cycles (about 0.3 ms, still bridging back-to-back products) made N=8,000
  d=2048 same-set search 10-12 % faster (0.90-0.96 vs 0.98-1.09 s, alternating runs; docs/metrics.md).

Defaults only: a value already in the environment wins.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

THREAD_ENV_DEFAULTS: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "20"}


def apply_thread_env_defaults(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set each default in ``environ`` unless it is already set (call before numpy/faiss import)."""
    for name, value in THREAD_ENV_DEFAULTS.items():
        environ.setdefault(name, value)
