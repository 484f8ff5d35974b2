"""glibc's malloc, tuned for a long-running service: a cap on its arenas, and freed memory handed back.

glibc gives each thread that allocates its own arena, up to 8 per core, and memory freed in one arena
is not reused by the others: a service whose threads come and go (a store thread and an onnxruntime
thread pool per loaded snapshot, decode and embed worker threads under load) fragments its heap,
and its RSS creeps up with every reload and under sustained load even though nothing leaks
(bench/bench_soak.py: +48 % over 900 reloads with glibc's default, flat with 2 arenas;
bench_serving_load.py --overload: still rising after 60 s at 4x saturation, flat after 10 s with 2).
``mallopt(M_ARENA_MAX)`` at start-up caps the arenas created from then on. ``malloc_trim`` after a
reload hands the pages the retired model and index freed back to the system, so RSS shows what the
service holds (without it the same state measured 490 or 590 MB, depending on where the heap had its
holes). Elsewhere than glibc both do nothing.
"""

from __future__ import annotations

import ctypes
from typing import Any

M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_malloc_arenas(count: int) -> bool:
    """Let the process create at most ``count`` malloc arenas; False where malloc has no such setting."""
    mallopt = _libc_function("mallopt")
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, count))


def release_free_memory() -> bool:
    """Return the free pages of every arena to the system; False where malloc cannot."""
    malloc_trim = _libc_function("malloc_trim")
    return malloc_trim is not None and bool(malloc_trim(0))


def _libc_function(name: str) -> Any:
    try:
        return getattr(ctypes.CDLL(None), name)  # the process's own C library
    except (OSError, AttributeError):
        return None
