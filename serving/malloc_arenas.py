"""A cap on glibc's malloc arenas for the service process.

glibc gives each thread that allocates its own arena, up to 8 per core, and memory freed in one arena
is not reused by the others: a service whose threads come and go (a store thread and an onnxruntime
thread pool per loaded snapshot, decode and embed worker threads under load) fragments its heap,
and its RSS creeps up with every reload and under sustained load even though nothing leaks
(bench/bench_soak.py: +48 % over 900 reloads with glibc's default, flat with 2 arenas;
bench_serving_load.py --overload: still rising after 60 s at 4x saturation, flat after 10 s with 2).
``mallopt(M_ARENA_MAX)`` at start-up caps the arenas created from then on; elsewhere than glibc it
does nothing.
"""

from __future__ import annotations

import ctypes

M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_malloc_arenas(count: int) -> bool:
    """Let the process create at most ``count`` malloc arenas; False where malloc has no such setting."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, count))
