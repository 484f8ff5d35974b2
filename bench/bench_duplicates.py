"""Near-copy detection: time, peak memory, recall and precision of ``retrieval``'s self-join against
scikit-learn's brute-force ``NearestNeighbors`` (how FiftyOne finds near duplicates) and imagehash's
perceptual hash (the classic tool), on planted copies.

``scale``: random 2048-bit codes with planted copies (a copy is its original with 5 % of the bits flipped,
similarity 0.9; distinct codes sit near 0). Each method runs in its own process, so its peak RSS is its own.
scikit-learn searches the same codes as +-1 float vectors by cosine (the same similarity), at the sizes given by
``--sklearn-sizes``; its time at the other sizes is projected from its measured growth (``t ~ n^p``).

``images``: real photos with planted copies of each kind (JPEG re-encoded, resized, slightly cropped,
slightly recoloured: ``search.copy_calibration.synthetic_copies``, other parameters than the calibration's
seed). A found pair that holds a planted copy is right when its other image is that copy's original or another
copy of it; pairs of two original images are not scored (the data's own copies are unknown). ``retrieval`` runs
twice: the embedding alone (``verify=False``, its midway copy threshold) and the default (candidates from the
candidate threshold, then the pixel check: ``search.copy_verifier``). imagehash's pHash (64 bits) is scored at
every Hamming threshold 0-24 and reported at its best F1.

    python bench/bench_duplicates.py scale --sizes 100000 --sklearn-sizes 10000,20000
    python bench/bench_duplicates.py scale --sizes 100000,300000 --sklearn-sizes '' --full-sizes 100000
    python bench/bench_duplicates.py scale --sizes 1000000 --sklearn-sizes ''     # the 1M target, codes only
    python bench/bench_duplicates.py images --data ../shared/data/cub50 --model OUT/model --plants 100
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BITS = 2048
FLIP = 0.05
THRESHOLD = 0.8  # code similarity: copies at 0.9, distinct codes at 0 +- 0.02


def planted_codes(n: int, seed: int = 0) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """``n`` random codes, the last 1 % copies of earlier ones with ``FLIP`` of their bits flipped."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 256, (n, BITS // 8), dtype=np.uint8)
    copies = max(1, n // 100)
    sources = rng.integers(0, n - copies, copies)
    flips = np.packbits(rng.random((copies, BITS)) < FLIP, axis=1, bitorder="little")
    codes[n - copies :] = codes[sources] ^ flips
    truth = {(int(s), n - copies + i) for i, s in enumerate(sources)}
    by_source: dict[int, list[int]] = {}
    for i, s in enumerate(sources.tolist()):
        by_source.setdefault(s, []).append(n - copies + i)
    truth |= {(a, b) for rows in by_source.values() for a in rows for b in rows if a < b}  # two copies of one
    return codes, truth


def scored(found: set[tuple[int, int]], truth: set[tuple[int, int]]) -> tuple[float, float]:
    hit = len(found & truth)
    return hit / max(1, len(truth)), hit / max(1, len(found))


def run_ours(n: int, search_bits: int | None = None) -> dict[str, float]:
    """The self-join; ``search_bits``: the bits its IVF index compares (default ``copy_join.SEARCH_BITS``;
    ``BITS``: the whole codes, the layout before the first-bits search)."""
    from retrieval.indexing.duplicates import copy_join
    from retrieval.indexing.duplicates.copy_join import near_copy_pairs

    copy_join.SEARCH_BITS = search_bits or copy_join.SEARCH_BITS
    codes, truth = planted_codes(n)
    start = time.perf_counter()
    pairs = near_copy_pairs(codes, BITS, THRESHOLD, progress=False)
    seconds = time.perf_counter() - start
    recall, precision = scored(set(zip(pairs.first.tolist(), pairs.second.tolist())), truth)
    return {"seconds": seconds, "recall": recall, "precision": precision}


def run_sklearn(n: int, k: int = 11) -> dict[str, float]:
    from sklearn.neighbors import NearestNeighbors

    codes, truth = planted_codes(n)
    vectors = np.unpackbits(codes, axis=1, bitorder="little").astype(np.float32) * 2 - 1
    del codes
    start = time.perf_counter()
    distance, neighbour = NearestNeighbors(n_neighbors=k, metric="cosine", algorithm="brute").fit(vectors).kneighbors()
    seconds = time.perf_counter() - start
    rows = np.arange(n)[:, None].repeat(neighbour.shape[1], axis=1)
    keep = 1 - distance >= THRESHOLD
    found = {(min(a, b), max(a, b)) for a, b in zip(rows[keep].tolist(), neighbour[keep].tolist())}
    recall, precision = scored(found, truth)
    return {"seconds": seconds, "recall": recall, "precision": precision}


def child(method: str, n: int) -> dict[str, float]:
    """Run one method at one size in a fresh process; its result with its peak RSS in MB."""
    code = f"import json,sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_duplicates as b; print(json.dumps(b._measured({method!r}, {n})))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _measured(method: str, n: int) -> dict[str, float]:
    result = run_ours(n) if method == "ours" else run_ours(n, BITS) if method == "ours_full" else run_sklearn(n)
    return {**result, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def scale(sizes: list[int], sklearn_sizes: list[int], full_sizes: list[int]) -> None:
    measured = {n: child("sklearn", n) for n in sklearn_sizes}
    for n, row in measured.items():
        print(_row("sklearn brute (cosine)", n, row, "measured"))
    power = None
    if len(measured) >= 2:
        (n1, r1), (n2, r2) = sorted(measured.items())[:2]
        power = float(np.log(r2["seconds"] / r1["seconds"]) / np.log(n2 / n1))
    for n in full_sizes:
        print(
            _row(
                "retrieval self-join, IVF over the whole 2,048-bit codes",
                n,
                child("ours_full", n),
                "the previous layout",
            )
        )
    for n in sizes:
        ours = child("ours", n)
        note = ""
        if measured:
            n0, r0 = max(measured.items())
            projected = r0["seconds"] * (n / n0) ** (power or 2.0)
            note = f"sklearn {'measured' if n in measured else f'projected (t ~ n^{power or 2.0:.2f})'}: {projected:.0f} s, {projected / ours['seconds']:.1f}x ours"
        print(_row("retrieval self-join", n, ours, note))


def _row(name: str, n: int, row: dict[str, float], note: str) -> str:
    return (
        f"| {name} | {n:,} | {row['seconds']:.1f} | {row['peak_mb']:.0f} | {row['recall']:.3f} | "
        f"{row['precision']:.3f} | {note} |"
    )


def images(data: Path, model: Path, plants: int, seed: int) -> None:
    """Planted copies of ``plants`` images of ``data``: ours at the model's threshold vs pHash at its best."""
    import imagehash

    from retrieval.indexing.data.image_io import open_rgb
    from retrieval.indexing.data.records import ImageRecord
    from retrieval.indexing.data.sources import load_records
    from retrieval.indexing.duplicates.copy_threshold_measure import synthetic_copies
    from retrieval.indexing.duplicates.dataset_duplicates import find_dataset_duplicates

    records = load_records(data)
    rng = random.Random(seed)
    originals = rng.sample(range(len(records)), plants)
    with tempfile.TemporaryDirectory() as tmp:
        extra, truth_of = [], {}
        for n, position in enumerate(originals):
            for kind, copy in zip(
                ("jpeg", "resize", "crop", "recolour"), synthetic_copies(open_rgb(records[position].path), rng)
            ):
                path = Path(tmp) / f"{n}_{kind}.png"
                copy.save(path)
                truth_of[len(records) + len(extra)] = position
                extra.append(ImageRecord(path=path, label=records[position].label))
        every = records + extra
        group = {i: truth_of.get(i, i) for i in range(len(every))}
        start = time.perf_counter()
        copies = find_dataset_duplicates(model, every, verify=False, progress=False)
        ours_s = time.perf_counter() - start
        position = {str(r.path): i for i, r in enumerate(every)}  # the copies' records are sorted by label
        at = [position[str(r.path)] for r in copies.records]
        ours = {(min(at[p.a], at[p.b]), max(at[p.a], at[p.b])) for p in copies.pairs}
        start = time.perf_counter()
        default = find_dataset_duplicates(model, every, progress=False)  # the pixel check, as the command runs it
        check_s = time.perf_counter() - start
        at = [position[str(r.path)] for r in default.records]
        checked = {(min(at[p.a], at[p.b]), max(at[p.a], at[p.b])) for p in default.pairs}
        start = time.perf_counter()
        hashes = [imagehash.phash(open_rgb(r.path)) for r in every]
        bits = np.array([h.hash.flatten() for h in hashes], dtype=np.uint8)
        distance = (bits[:, None, :] != bits[None, :, :]).sum(axis=2)
        hash_s = time.perf_counter() - start
    planted = {(min(group[c], c), max(group[c], c)) for c in truth_of} | {
        (a, b) for a in truth_of for b in truth_of if a < b and truth_of[a] == truth_of[b]
    }
    print(
        f"{data}: {len(records)} images + {len(extra)} planted copies of {plants}; threshold {copies.thresholds.source}"
    )
    print(_planted_row("retrieval, embedding alone (copy threshold)", ours, planted, truth_of, ours_s))
    print(f"default: {default.thresholds.source}; {default.checked}")
    print(
        _planted_row("retrieval, the default: embedding candidates + pixel check", checked, planted, truth_of, check_s)
    )
    best = max((_f1(_hash_pairs(distance, t), planted, truth_of), t) for t in range(25))
    print(
        _planted_row(
            f"imagehash pHash, best threshold {best[1]} bits", _hash_pairs(distance, best[1]), planted, truth_of, hash_s
        )
    )


def _hash_pairs(distance: np.ndarray, t: int) -> set[tuple[int, int]]:
    rows, cols = np.nonzero(np.triu(distance <= t, k=1))
    return set(zip(rows.tolist(), cols.tolist()))


def _scores(found: set[tuple[int, int]], planted: set[tuple[int, int]], copies: dict[int, int]) -> tuple[float, float]:
    judged = {pair for pair in found if pair[0] in copies or pair[1] in copies}
    right = len(judged & planted)
    return right / max(1, len(planted)), right / max(1, len(judged))


def _f1(found: set[tuple[int, int]], planted: set[tuple[int, int]], copies: dict[int, int]) -> float:
    recall, precision = _scores(found, planted, copies)
    return 2 * recall * precision / max(1e-9, recall + precision)


def _planted_row(
    name: str, found: set[tuple[int, int]], planted: set[tuple[int, int]], copies: dict[int, int], seconds: float
) -> str:
    recall, precision = _scores(found, planted, copies)
    return f"| {name} | {recall:.3f} | {precision:.3f} | {seconds:.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the scale mode at tiny sizes (the suite's smoke run)")
    sub = parser.add_subparsers(dest="mode")
    s = sub.add_parser("scale")
    s.add_argument("--sizes", default="100000")
    s.add_argument("--sklearn-sizes", default="10000,20000")
    s.add_argument("--full-sizes", default="", help="sizes to also join with the IVF over the whole codes")
    i = sub.add_parser("images")
    i.add_argument("--data", type=Path, required=True)
    i.add_argument("--model", type=Path, required=True, help="export directory (data duplicates writes OUT/model)")
    i.add_argument("--plants", type=int, default=100)
    i.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.mode is None and args.quick:
        args.mode, args.sizes, args.sklearn_sizes, args.full_sizes = "scale", "2000", "1000", "2000"
    elif args.mode is None:
        parser.error("choose a mode: scale or images (or --quick)")
    if args.mode == "scale":
        print("| method | items | seconds | peak MB | recall | precision | note |\n|---|---|---|---|---|---|---|")
        sizes = [[int(n) for n in text.split(",") if n] for text in (args.sizes, args.sklearn_sizes, args.full_sizes)]
        scale(*sizes)
    else:
        print("| method | recall | precision | seconds |\n|---|---|---|---|")
        images(args.data, args.model, args.plants, args.seed)


if __name__ == "__main__":
    main()
