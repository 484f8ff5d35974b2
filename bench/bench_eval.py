"""Evaluation time and peak memory: retrieval's evaluate_retrieval vs pytorch-metric-learning.

Cases (clustered synthetic embeddings: class centre + noise, L2-normalised):
  a) N=60,000, d=512, 12,000 classes of 5   b) N=8,000, d=2048, 100 classes of 80
Each evaluator runs in its own child process, so ru_maxrss (peak resident memory) of one does
not contaminate the other; both children get the same environment (OPENBLAS_CORETYPE, and the
`retrieval` command's thread settings, cli/thread_env.py, unless ``--no-thread-env``).
k-NN metrics (P@1, R-precision, MAP@R, same-set protocol, pml k="max_bin_count") are timed
WITHOUT NMI in both; NMI (faiss k-means, one cluster per class) is timed separately, with
faiss's default k-means seed (1234, what pml's FaissKMeans uses) so both cluster identically.

The machine is shared: each cell runs ``--repeat`` times, ours and pml alternating, and the
table gives the median wall time, the speed-up of the medians with the range of the per-pair
ratios, and the median CPU seconds (user + system of the child, all threads), which other jobs
on the machine disturb less than wall time. "equal" compares the values to 1e-6 (pml scores in
float32 torch).

    python bench/bench_eval.py                # full run (several minutes, ~8 GiB for pml on case a)
    python bench/bench_eval.py --cases b --repeat 5 --no-nmi
    python bench/bench_eval.py --quick        # small N, smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
from openblas_core import AUTO, resolve_coretype
from quick_mode import parse_quick

from retrieval.cli.thread_env import THREAD_ENV_DEFAULTS, apply_thread_env_defaults

CASES = {"a": (60_000, 512, 5), "b": (8_000, 2048, 80)}
QUICK_CASES = {"a": (6_000, 512, 5), "b": (2_000, 2048, 80)}
NOISE = {"a": 2.2, "b": 4.5}
"""Noise scale per case, chosen so P@1 and MAP@R are far from 0 and 1 (high-d centres separate easily)."""
METRIC_NAMES = ("precision_at_1", "r_precision", "map_at_r")
FAISS_KMEANS_SEED = 1234
"""faiss.Kmeans's default seed, which pml's FaissKMeans(niter=20) leaves unchanged."""
EQUAL_TOLERANCE = 1e-6


def clustered_embeddings(
    n: int, dim: int, per_class: int, noise: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Class centre + ``noise`` x Gaussian noise (centres are standard normal), normalised; float32."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n // per_class), per_class)
    centres = rng.standard_normal((n // per_class, dim), dtype=np.float32)
    vectors = centres[labels]
    vectors += noise * rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, labels


def run_ours(vectors: np.ndarray, labels: np.ndarray, task: str) -> dict:
    from retrieval.indexing.eval.metrics import evaluate_retrieval
    from retrieval.indexing.eval.nmi import nmi_kmeans

    if task == "nmi":
        return {"nmi": nmi_kmeans(vectors, labels, seed=FAISS_KMEANS_SEED, niter=20)}
    metrics = evaluate_retrieval(vectors, labels, ks=(1,), compute_nmi=False)
    return {name: getattr(metrics, name) for name in METRIC_NAMES}


def run_pml(vectors: np.ndarray, labels: np.ndarray, task: str) -> dict:
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    include = ("NMI",) if task == "nmi" else ("precision_at_1", "r_precision", "mean_average_precision_at_r")
    calculator = AccuracyCalculator(include=include, k="max_bin_count", device=torch.device("cpu"))
    result = calculator.get_accuracy(vectors, labels)
    if task == "nmi":
        return {"nmi": result["NMI"]}
    return {
        "precision_at_1": result["precision_at_1"],
        "r_precision": result["r_precision"],
        "map_at_r": result["mean_average_precision_at_r"],
    }


def child(evaluator: str, case: str, quick: bool, task: str) -> None:
    """Run one evaluator once and print one JSON line: seconds, peak RSS, values."""
    import retrieval.indexing.search.knn  # noqa: F401  (import faiss before timing, as pml does at import)

    n, dim, per_class = (QUICK_CASES if quick else CASES)[case]
    vectors, labels = clustered_embeddings(n, dim, per_class, NOISE[case])
    run = run_ours if evaluator == "ours" else run_pml
    if evaluator == "pml":
        import pytorch_metric_learning.utils.accuracy_calculator  # noqa: F401  (imports outside the timing)
    before, cpu_before = _current_rss_bytes(), _cpu_seconds()
    start = time.perf_counter()
    values = run(vectors, labels, task)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_before
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak": peak, "before": before, "values": values}))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _current_rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(evaluator: str, case: str, quick: bool, task: str, env: dict) -> dict:
    command = [sys.executable, __file__, "--child", evaluator, "--case", case, "--task", task]
    command += ["--quick"] if quick else []
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def gib(value: int) -> str:
    return f"{value / 2**30:.2f}"


def median(values: list[float]) -> float:
    return float(np.median(values))


def values_equal(ours: dict, pml: dict) -> str:
    diff = max(abs(ours["values"][name] - pml["values"][name]) for name in ours["values"])
    return f"{'yes' if diff <= EQUAL_TOLERANCE else 'NO'} ({diff:.0e})"


def table_row(case: str, task: str, ours: list[dict], pml: list[dict], sizes: dict) -> str:
    """One markdown row from the repeated runs of both evaluators (medians; ratio range over pairs)."""
    n, dim, per_class = sizes[case]
    label = f"{case}) N={n:,} d={dim} {n // per_class:,} classes of {per_class}"
    ours_s, pml_s = median([r["seconds"] for r in ours]), median([r["seconds"] for r in pml])
    ours_cpu, pml_cpu = median([r["cpu"] for r in ours]), median([r["cpu"] for r in pml])
    ratios = [p["seconds"] / o["seconds"] for o, p in zip(ours, pml)]
    peak_o, peak_p = max(r["peak"] for r in ours), max(r["peak"] for r in pml)
    fmt = lambda v: " / ".join(f"{x:.4f}" for x in v["values"].values())  # noqa: E731
    return (
        f"| {label} | {task} | {ours_s:.2f} | {pml_s:.2f} | **{pml_s / ours_s:.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}) "
        f"| {ours_cpu:.2f} | {pml_cpu:.2f} | {pml_cpu / ours_cpu:.2f}x | {gib(peak_o)} | {gib(peak_p)} "
        f"| {values_equal(ours[0], pml[0])} | {fmt(ours[0])} | {fmt(pml[0])} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="ab", help="which cases to run, e.g. 'b'")
    parser.add_argument("--repeat", type=int, default=3, help="runs per evaluator and cell, alternating")
    parser.add_argument("--no-nmi", action="store_true", help="skip the separate NMI timing")
    parser.add_argument(
        "--coretype", default=AUTO, help="OPENBLAS_CORETYPE for both children: auto (follows this CPU), a value, or ''"
    )
    parser.add_argument(
        "--no-thread-env",
        action="store_true",
        help="leave OMP_WAIT_POLICY / OPENBLAS_THREAD_TIMEOUT unset (default: the `retrieval` command's, for both)",
    )
    parser.add_argument("--child", choices=("ours", "pml"), help=argparse.SUPPRESS)
    parser.add_argument("--case", choices=tuple(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--task", choices=("knn", "nmi"), default="knn", help=argparse.SUPPRESS)
    args = parse_quick(parser, cases="b", repeat=1)  # --quick: small N too (QUICK_CASES)
    if args.child:
        child(args.child, args.case, args.quick, args.task)
        return
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    coretype, why = resolve_coretype(args.coretype)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    if not args.no_thread_env:
        apply_thread_env_defaults(env)
    thread_env = ", ".join(f"{name}={env.get(name, '(unset)')}" for name in THREAD_ENV_DEFAULTS)
    sizes = QUICK_CASES if args.quick else CASES
    print(
        f"OPENBLAS_CORETYPE={coretype or '(unset)'} ({why}), {thread_env}; {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.1f} at the start; {args.repeat} runs per cell, ours and pml alternating; "
        "peak = largest ru_maxrss of the child processes, GiB\n"
    )
    print(
        "| case | metrics | ours s | pml s | speed-up (range) | ours CPU s | pml CPU s | CPU ratio "
        "| ours peak GiB | pml peak GiB | values equal (max diff) | ours values | pml values |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    tasks = ("knn",) if args.no_nmi else ("knn", "nmi")
    for case in args.cases:
        for task in tasks:
            ours, pml = [], []
            for _ in range(args.repeat):
                ours.append(measure("ours", case, args.quick, task, env))
                pml.append(measure("pml", case, args.quick, task, env))
            print(table_row(case, task, ours, pml, sizes), flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
