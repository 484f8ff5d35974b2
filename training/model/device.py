"""Device and mixed-precision choices: CUDA when present, else CPU; bf16 or fp16 autocast on GPU only."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from retrieval.indexing.common.errors import ConfigError


@dataclass(frozen=True)
class Precision:
    enabled: bool
    dtype: torch.dtype
    use_grad_scaler: bool


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda was asked for but no CUDA GPU is visible; use --device auto or cpu")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def resolve_precision(device: torch.device, amp: str) -> Precision:
    """``auto``: bf16 where the GPU supports it, else fp16 with a gradient scaler; off on the CPU.

    CPU autocast in bf16 is accurate enough but slower than fp32 on CPUs without AMX,
    so ``auto`` keeps fp32 there; ask for ``bf16`` explicitly to try it.
    """
    if amp == "off" or (amp == "auto" and device.type != "cuda"):
        return Precision(False, torch.float32, False)
    if amp == "auto":
        amp = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 autocast needs a CUDA GPU; use amp: bf16 or off on the CPU")
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return Precision(True, dtype, amp == "fp16")
