"""INT8 exports on the CPU kinds onnxruntime tells apart: the same images embedded natively and under
QEMU's user-mode emulation of an older CPU (``-cpu Haswell``: AVX2, no AVX-512, no VNNI), where
onnxruntime's u8 x s8 kernels sum pairs of products in 16 bits (``indexing/exported_model/cpu_kind.py``).

For each model and kind: the mean and smallest cosine to the native fp32 embeddings, the largest
difference from the same model run natively, and MAP@R / P@1 of the images among themselves (every
image a query, the rest the gallery: ``evaluate_retrieval``). Emulation is slow (seconds per 224 px
image for INT8, far more for fp32, so the fp32 reference runs natively only); its numbers are exact,
not its speed. Needs Debian's ``qemu-user``.

    python bench/bench_int8_cpu_kinds.py --data ../shared/data/cars196 \\
        fp32=runs/cars196/export int8=runs/cars196/export_int8 int8-8bit=/tmp/old_int8
    python bench/bench_int8_cpu_kinds.py     # no models: a random-weights stand-in's fp32 and INT8 exports
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from quick_mode import parse_quick

from retrieval.indexing.data.sources import load_records
from retrieval.indexing.eval.metrics import evaluate_retrieval
from retrieval.indexing.exported_model.cpu_kind import cpu_kind
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "models", nargs="*", help="NAME=EXPORT_DIR; the first is the fp32 reference (none: a random-weights stand-in)"
    )
    parser.add_argument("--data", type=Path, help="an ImageFolder dataset (required with models)")
    parser.add_argument("--classes", type=int, default=8, help="the LAST N classes (a run's test half)")
    parser.add_argument("--per-class", type=int, default=6)
    parser.add_argument("--emulate", nargs="*", default=["Haswell"], help="QEMU CPU models to emulate")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # write embeddings here and exit
    return parse_quick(parser, classes=3, per_class=2)


def chosen_paths(data: Path, classes: int, per_class: int) -> tuple[list[Path], np.ndarray]:
    records = load_records(data)
    labels = sorted({r.label for r in records})[-classes:]
    picked = [r for label in labels for r in [x for x in records if x.label == label][:per_class]]
    return [r.path for r in picked], np.array([labels.index(r.label) for r in picked])


def embed_all(models: dict[str, Path], paths: list[Path], out: Path) -> None:
    """Each model's embeddings of ``paths`` to ``out/NAME.npy`` (one thread: the same sums everywhere)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, export in models.items():
        embedder = OnnxEmbedder(export, threads=1, providers="cpu")
        np.save(out / f"{name}.npy", embedder.embed_paths(paths, progress=False).embeddings)
        embedder.close()


def main() -> None:
    args = parse_args()
    if bool(args.models) != (args.data is not None):
        raise SystemExit("give models and --data together (or neither: a random-weights stand-in)")
    with tempfile.TemporaryDirectory() as scratch:
        if not args.models:
            from stand_in_run import NOTICE, stand_in_exports

            print(NOTICE)
            fp32, int8, args.data = stand_in_exports(Path(scratch), args.quick)
            args.models = [f"fp32={fp32}", f"int8={int8}"]
        compare(args)


def compare(args: argparse.Namespace) -> None:
    models = dict(item.split("=", 1) for item in args.models)
    models = {name: Path(path) for name, path in models.items()}
    paths, labels = chosen_paths(args.data, args.classes, args.per_class)
    if args.child:
        embed_all(models, paths, args.child)
        return
    work = Path(tempfile.mkdtemp(prefix="int8-kinds-"))
    kinds = {f"native ({cpu_kind()})": work / "native"}
    started = time.perf_counter()
    embed_all(models, paths, kinds[f"native ({cpu_kind()})"])
    print(f"native: {time.perf_counter() - started:.0f} s for {len(paths)} images x {len(models)} models")
    qemu = shutil.which("qemu-x86_64")
    for cpu in args.emulate if qemu else []:
        started = time.perf_counter()
        command = [qemu, "-cpu", cpu, sys.executable, __file__, *args.models[1:], "--data", str(args.data)]
        command += ["--classes", str(args.classes), "--per-class", str(args.per_class), "--child", str(work / cpu)]
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
        kinds[f"emulated {cpu}"] = work / cpu
        print(f"emulated {cpu}: {time.perf_counter() - started:.0f} s")
    if not qemu:
        print("qemu-x86_64 not found (apt-get install qemu-user): native kind only")
    print_table(models, kinds, labels)


def print_table(models: dict[str, Path], kinds: dict[str, Path], labels: np.ndarray) -> None:
    native = next(iter(kinds.values()))
    reference = np.load(native / f"{next(iter(models))}.npy")
    everyone = np.ones(len(labels), dtype=bool)
    print(f"\n{len(labels)} images, {len(set(labels.tolist()))} classes, every image a query\n")
    print("| model | CPU kind | cosine to fp32 mean | min | max diff vs native | MAP@R | P@1 |")
    print("|---|---|---|---|---|---|---|")
    for name in models:
        for kind, folder in kinds.items():
            if not (folder / f"{name}.npy").is_file():
                continue  # the fp32 reference is not emulated
            vectors = np.load(folder / f"{name}.npy")
            cosines = np.einsum("ij,ij->i", vectors, reference)
            drift = float(np.abs(vectors - np.load(native / f"{name}.npy")).max())
            metrics = evaluate_retrieval(vectors, labels, everyone, everyone)
            print(
                f"| {name} | {kind} | {cosines.mean():.4f} | {cosines.min():.4f} | {drift:.2e} "
                f"| {metrics.map_at_r:.4f} | {metrics.precision_at_1:.4f} |"
            )


if __name__ == "__main__":
    main()
