"""The OPENBLAS_CORETYPE a benchmark may set on the CPU it finds.

faiss's bundled OpenBLAS picked a slow kernel on the Xeon these benchmarks were first run on, and
``SkylakeX`` fixed that; forced on a CPU without AVX-512 (an AVX2-only AMD EPYC) the same setting
kills the process with SIGILL. So the default follows the CPU: SkylakeX with AVX-512, Haswell with
AVX2 alone, unset otherwise, and each benchmark prints which it chose and why.

The flags come from /proc/cpuinfo, not from ``retrieval.indexing.exported_model.cpu_kind``: that module imports
NumPy, whose own OpenBLAS reads the variable once, at import, and the benchmarks set it before.
"""

from __future__ import annotations

from pathlib import Path

AUTO = "auto"
_SKYLAKE_X_FLAGS = frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl"})


def coretype_for(flags: frozenset[str]) -> tuple[str, str]:
    """(OPENBLAS_CORETYPE or '' for unset, why) for a CPU with these lower-case feature flags."""
    if _SKYLAKE_X_FLAGS <= flags:
        return "SkylakeX", "this CPU has AVX-512"
    if "avx2" in flags:
        return "Haswell", "this CPU has AVX2 without AVX-512 (SkylakeX would die with SIGILL)"
    return "", "this CPU has no AVX2: OpenBLAS chooses its own kernel"


def resolve_coretype(requested: str) -> tuple[str, str]:
    """``--openblas-coretype`` -> (value or '' for unset, why): 'auto' follows this CPU, 'none'/'' leaves it unset."""
    if requested.lower() == AUTO:
        return coretype_for(_cpuinfo_flags())
    if requested.lower() in {"", "none"}:
        return "", "unset on request"
    return requested, "as requested"


def _cpuinfo_flags() -> frozenset[str]:
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text(errors="replace") if cpuinfo.is_file() else ""
    line = next((line for line in text.splitlines() if line.startswith("flags")), "flags:")
    return frozenset(line.split(":", 1)[1].split())
