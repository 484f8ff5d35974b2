"""The kind of CPU an INT8 model meets, as far as onnxruntime's 8-bit kernels tell kinds apart.

onnxruntime (MLAS) multiplies uint8 activations by int8 weights with different instructions per CPU:
with VNNI (``vpdpbusd``, AVX-512 VNNI or AVX-VNNI) the products are summed in 32 bits; on AVX2 or
AVX-512 without VNNI (``vpmaddubsw``) two products are first summed in 16 bits, which saturate
when both are near 255 x 127. The same INT8 model then gives other embeddings on a CPU without VNNI
(measured: mean cosine to fp32 0.934 instead of 0.984, docs/results.md), unless its weights use 7 bits
(``reduce_range``: 255 x 64 x 2 fits 16 bits, so every kind computes the same sums).

``cpu_kind()`` names this machine's kind; ``int8_cpu_warning`` says when an INT8 model's retrieval check
did not run on that kind.
"""

from __future__ import annotations

import platform
from functools import cache
from pathlib import Path

from retrieval.indexing.exported_model.model_manifest import Quantization

try:
    from numpy._core._multiarray_umath import __cpu_features__  # numpy 2
except ImportError:  # pragma: no cover - numpy 1
    from numpy.core._multiarray_umath import __cpu_features__  # type: ignore[no-redef]

X86_VNNI = "x86-64 with VNNI"
X86_AVX512 = "x86-64 AVX-512 without VNNI"
X86_AVX2 = "x86-64 AVX2 without VNNI"
X86_OLD = "x86-64 without AVX2"

_VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})


def kind_of_flags(machine: str, flags: frozenset[str]) -> str:
    """The kind for a machine name (``platform.machine()``) and its lower-case CPU flags (/proc/cpuinfo's)."""
    if machine.lower() not in {"x86_64", "amd64"}:
        return machine.lower() or "unknown"
    if flags & _VNNI_FLAGS:
        return X86_VNNI
    if "avx512bw" in flags:
        return X86_AVX512
    return X86_AVX2 if "avx2" in flags else X86_OLD


@cache
def cpu_kind() -> str:
    """This machine's kind (from the CPUID features numpy reads, or /proc/cpuinfo where numpy lacks one)."""
    return kind_of_flags(platform.machine(), cpu_flags())


def int8_cpu_warning(quantization: Quantization | None, kind: str | None = None) -> str | None:
    """One sentence when an INT8 model runs on a CPU kind its retrieval check did not measure, else None."""
    if quantization is None:
        return None
    here = kind or cpu_kind()
    checked = quantization.check.cpu if quantization.check is not None else None
    if checked == here:
        return None
    measured = f"its retrieval check ran on an {checked} CPU" if checked else "its retrieval check recorded no CPU kind"
    risk = (
        "its 7-bit weights compute the same sums on every x86 kind, so a difference is not expected"
        if quantization.reduce_range
        else "it was quantized with 8-bit weights, which lose accuracy on CPUs without VNNI; re-export it"
    )
    return (
        f"this INT8 model's accuracy was not measured on this CPU ({here}): {measured}; {risk} "
        "(`retrieval export RUN --quantize int8` on this machine measures it here)"
    )


@cache
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags in lower case (numpy's CPUID names, ``avx512_vnni`` / ``avx_vnni`` as Linux spells them)."""
    flags = {name.lower() for name, present in __cpu_features__.items() if present}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():  # AVX-VNNI (without AVX-512) is missing from numpy's list
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("flags"):
                flags |= {"avx_vnni"} & set(line.split(":", 1)[1].split())
                break
    return frozenset(name.replace("avx512vnni", "avx512_vnni") for name in flags)
