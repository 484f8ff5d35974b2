"""How fast the ``retrieval`` command answers: wall time of the console script for help and for argument
errors, median of N runs, plus the heavy packages (torch, fastapi, faiss) each left imported.

Targets (issue 35, an idle machine): ``retrieval --help`` and ``retrieval train --data /missing`` <= 0.5 s,
an unknown recipe or backbone <= 1 s; a dataset too small to split and ``retrieval backbones`` (issue 44)
answer without torch too. ``--baseline REF`` runs the same cases against a git revision checked
out into a temporary worktree (its own source on ``PYTHONPATH``), so before and after come from one machine
in one run. The load average is printed with the table: on a busy machine every number grows.

    python bench/bench_cli_startup.py                  # this tree, median of 5
    python bench/bench_cli_startup.py --baseline HEAD~3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quick_mode import parse_quick

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "fastapi", "faiss")
PROBE = (
    "import runpy, sys; sys.argv = ['retrieval', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('retrieval.cli.main', run_name='__main__')\n"
    "except SystemExit:\n    pass\n"
    f"sys.stderr.write('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules) + '\\n')\n"
    "sys.stderr.write('FROM=' + sys.modules['retrieval'].__file__ + '\\n')\n"
)


def cases(data: Path, existing: Path, small: Path) -> dict[str, list[str]]:
    missing = str(Path(tempfile.gettempdir()) / "no-such-dataset")
    new_run = str(Path(tempfile.gettempdir()) / "bench-cli-new-run")
    return {
        "retrieval --help": ["--help"],
        "retrieval train --help": ["train", "--help"],
        "retrieval train --data /missing": ["train", "--data", missing, "--out", new_run],
        "unknown --recipe": ["train", "--data", str(data), "--out", new_run, "--recipe", "normsoftmx"],
        "unknown --backbone": ["train", "--data", str(data), "--out", new_run, "--backbone", "resnt18"],
        "existing run directory": ["train", "--data", str(data), "--out", str(existing)],
        "too few classes to split": ["train", "--data", str(small), "--out", new_run],
        "retrieval backbones": ["backbones"],
        "retrieval index --help": ["index", "--help"],
        "retrieval serve --help": ["serve", "--help"],
    }


def timed(args: list[str], source: Path | None, runs: int) -> tuple[float, str, str]:
    """Median wall seconds of ``retrieval ARGS`` and the heavy packages it imported; ``source``: a package folder
    put first on the path (None: the installed ``retrieval``)."""
    env = {**os.environ, "COLUMNS": "120", **({"PYTHONPATH": str(source.parent)} if source else {})}
    times, heavy, answer = [], "", ""
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - started)
        lines = done.stderr.splitlines()
        heavy = next((line[6:] for line in lines if line.startswith("HEAVY=")), "?")
        answer = next((line for line in lines if line.startswith(("error", "Error"))), "help")
    return statistics.median(times), heavy or "none", answer[:70]


def _dataset(root: Path, classes: int = 8) -> None:
    """``classes`` classes of two small PNGs: 8 make a dataset the checks accept (so the name errors are what
    fails), 4 one too small for the class-disjoint split (both training classes would validate)."""
    from PIL import Image

    for label in "abcdefgh"[:classes]:
        (root / label).mkdir(parents=True)
        for number in range(2):
            Image.new("RGB", (64, 64), (number * 90, 40, 200)).save(root / label / f"{number}.png")


def tree_of(ref: str, into: Path) -> Path:
    """A git worktree of ``ref`` with a ``retrieval`` package folder laid out as the installed one."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into / "src"), ref], check=True)
    package = into / "pkg" / "retrieval"
    package.mkdir(parents=True)
    for folder in ("training", "indexing", "serving", "cli"):
        (package / folder).symlink_to(into / "src" / folder)
    for module in (into / "src" / "api").glob("*.py"):
        (package / module.name).symlink_to(module)
    return package


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", help="a git revision to time beside this tree")
    args = parse_quick(parser, runs=1)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        _dataset(folder / "data")
        _dataset(folder / "small", classes=4)
        existing = folder / "run"
        (existing / "checkpoints").mkdir(parents=True)
        trees: dict[str, Path | None] = {"this tree": None}
        if args.baseline:
            trees[args.baseline] = tree_of(args.baseline, folder / "baseline")
        try:
            _table(cases(folder / "data", existing, folder / "small"), trees, args.runs)
        finally:
            if args.baseline:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder / "baseline" / "src")]
                )


def _table(commands: dict[str, list[str]], trees: dict[str, Path | None], runs: int) -> None:
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, median of {runs}")
    print("| case | " + " | ".join(f"{name} (s) | heavy imports | answer" for name in trees) + " |")
    print("|---|" + "---:|---|---|" * len(trees))
    for label, command in commands.items():
        results = (timed(command, tree, runs) for tree in trees.values())
        cells = [f"{seconds:.2f} | {heavy} | {answer}" for seconds, heavy, answer in results]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
