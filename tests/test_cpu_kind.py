"""The CPU kind an INT8 model meets, and the warning when its retrieval check ran on another kind."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from retrieval.indexing.exported_model import cpu_kind as cpu
from retrieval.indexing.exported_model.model_manifest import Int8Check, ModelManifest, Quantization, manifest_json
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

AVX2_EPYC = frozenset({"sse4_2", "avx", "avx2", "fma", "bmi2"})  # an AMD EPYC of the cloud: no AVX-512, no VNNI
SKYLAKE_X = AVX2_EPYC | {"avx512f", "avx512bw", "avx512vl"}
ICE_LAKE = SKYLAKE_X | {"avx512_vnni"}
ALDER_LAKE = AVX2_EPYC | {"avx_vnni"}


@pytest.mark.parametrize(
    ("machine", "flags", "kind"),
    [
        ("x86_64", AVX2_EPYC, cpu.X86_AVX2),
        ("x86_64", SKYLAKE_X, cpu.X86_AVX512),
        ("x86_64", ICE_LAKE, cpu.X86_VNNI),
        ("AMD64", ALDER_LAKE, cpu.X86_VNNI),
        ("x86_64", frozenset({"sse4_2"}), cpu.X86_OLD),
        ("aarch64", frozenset({"asimd"}), "aarch64"),
    ],
)
def test_kinds_follow_the_instructions_onnxruntime_picks(machine: str, flags: frozenset[str], kind: str) -> None:
    assert cpu.kind_of_flags(machine, flags) == kind


def test_this_machine_has_a_kind() -> None:
    assert cpu.cpu_kind() in {cpu.X86_VNNI, cpu.X86_AVX512, cpu.X86_AVX2, cpu.X86_OLD} or "x86" not in cpu.cpu_kind()


def _quantization(*, checked_on: str | None, reduce_range: bool) -> Quantization:
    check = Int8Check(
        split="val",
        images=10,
        map_at_r_fp32=0.3,
        map_at_r_int8=0.3,
        recall_at_1_fp32=0.5,
        recall_at_1_int8=0.5,
        binary_map_at_r_fp32=0.3,
        binary_map_at_r_int8=0.3,
        max_map_drop=1.0,
        cpu=checked_on,
    )
    return Quantization(calibration_images=8, float_onnx_sha256="0" * 64, check=check, reduce_range=reduce_range)


def test_no_warning_on_the_kind_the_check_measured_or_for_a_float_model() -> None:
    assert cpu.int8_cpu_warning(_quantization(checked_on=cpu.X86_AVX2, reduce_range=True), cpu.X86_AVX2) is None
    assert cpu.int8_cpu_warning(None, cpu.X86_AVX2) is None


def test_another_kind_is_named_and_eight_bit_weights_are_told_to_re_export() -> None:
    seven_bit = cpu.int8_cpu_warning(_quantization(checked_on=cpu.X86_VNNI, reduce_range=True), cpu.X86_AVX2)
    assert seven_bit is not None and cpu.X86_AVX2 in seven_bit and cpu.X86_VNNI in seven_bit
    assert "not expected" in seven_bit and "re-export" not in seven_bit
    eight_bit = cpu.int8_cpu_warning(_quantization(checked_on=cpu.X86_VNNI, reduce_range=False), cpu.X86_AVX2)
    assert eight_bit is not None and "lose accuracy on CPUs without VNNI; re-export" in eight_bit
    older = cpu.int8_cpu_warning(_quantization(checked_on=None, reduce_range=False), cpu.X86_VNNI)
    assert older is not None and "recorded no CPU kind" in older


def test_an_older_int8_manifest_still_loads_as_eight_bit_and_unchecked_kind() -> None:
    record = Quantization.model_validate({"calibration_images": 8, "float_onnx_sha256": "0" * 64})
    assert record.reduce_range is False and record.check is None


def test_the_embedder_warns_when_it_loads_an_int8_model_checked_elsewhere(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    export = tmp_path / "export"
    shutil.copytree(tiny_model_dir, export)
    manifest = ModelManifest.load(export)
    elsewhere = cpu.X86_AVX2 if cpu.cpu_kind() != cpu.X86_AVX2 else cpu.X86_VNNI
    quantization = _quantization(checked_on=elsewhere, reduce_range=False)
    (export / "model.json").write_text(manifest_json(manifest.model_copy(update={"quantization": quantization})))
    with caplog.at_level(logging.WARNING, logger="retrieval.indexing.exported_model.onnx_embedder"):
        OnnxEmbedder(export, threads=1).close()
    assert any(elsewhere in r.getMessage() and "re-export" in r.getMessage() for r in caplog.records)
    caplog.clear()
    here = _quantization(checked_on=cpu.cpu_kind(), reduce_range=True)
    (export / "model.json").write_text(manifest_json(manifest.model_copy(update={"quantization": here})))
    with caplog.at_level(logging.WARNING, logger="retrieval.indexing.exported_model.onnx_embedder"):
        OnnxEmbedder(export, threads=1).close()
    assert not caplog.records
