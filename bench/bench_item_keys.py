"""Item keys on the files backend: what a key lookup, an upsert and the old-index migration cost.

On an index of N random vectors (flat kinds, written like ``retrieval index build``; every item keyed
``sku-I``), with automatic compaction off, it times (median of repeats):
``ids_of_keys`` of 1 and of 1,000 keys (the UNIQUE index of ``items.sqlite``), an add of one new keyed
item beside a replace of one keyed item (``add(..., replace=True)``: the delete and the insert in one
transaction, one delta segment), and on a copy of the index whose item table has no ``key`` column (as
written before keys existed) the first keyed add (which adds the column and its unique index) beside
the next one.

    python bench/bench_item_keys.py                  # 20k items, 256-d: under a minute
    python bench/bench_item_keys.py --size 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_index_updates import fake_export, random_unit
from quick_mode import parse_quick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    return parse_quick(parser, size=500, dim=16, repeats=3)


def median_ms(action: Callable[[int], Any], repeats: int) -> float:
    times = []
    for step in range(repeats):
        started = time.perf_counter()
        action(step)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def keyed(start: int, stop: int, prefix: str = "sku") -> list[Any]:
    from retrieval.indexing.data.records import ImageRecord

    return [ImageRecord(Path(f"/bench/{i}.jpg"), f"c{i % 1000}", key=f"{prefix}-{i}") for i in range(start, stop)]


def main() -> None:
    import numpy as np

    from retrieval.indexing.store.build.builder import write_index
    from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
    from retrieval.indexing.store.files.index_store import IndexStore
    from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy

    args = parse_args()
    rng = np.random.default_rng(0)
    root = Path(tempfile.mkdtemp(prefix="bench-keys-"))
    try:
        out = root / "index"
        kinds = (float_kind("flat"), binary_kind("flat"))
        vectors = random_unit(rng, args.size, args.dim)
        write_index(out, fake_export(root / "export", args.dim), keyed(0, args.size), vectors, kinds)  # type: ignore[arg-type]
        never = CompactionPolicy(
            max_delta_segments=10**6, max_delta_fraction=10**6, max_tombstone_fraction=1, min_rows=10**12
        )
        shutil.copytree(out, root / "old")
        rows = []
        with IndexStore.open(out) as store:
            store.compact(policy=never)
            picks = rng.integers(0, args.size, size=1000)
            rows.append(("ids_of_keys, 1 key", median_ms(lambda s: store.ids_of_keys([f"sku-{picks[s]}"]), 200)))
            many = [f"sku-{i}" for i in picks]
            rows.append(("ids_of_keys, 1000 keys", median_ms(lambda s: store.ids_of_keys(many), 20)))
            one = random_unit(rng, 1, args.dim)
            added = median_ms(lambda s: store.add(keyed(10**7 + s, 10**7 + s + 1), one), args.repeats)
            rows.append(("add 1 new keyed item", added))
            replaced = median_ms(lambda s: store.add(keyed(s, s + 1), one, replace=True), args.repeats)
            rows.append(("replace 1 keyed item", replaced))
        table = sqlite3.connect(root / "old" / "items.sqlite")
        table.executescript("DROP INDEX items_key; ALTER TABLE items DROP COLUMN key; VACUUM;")
        table.close()
        with IndexStore.open(root / "old") as store:
            store.compact(policy=never)
            first = median_ms(lambda s: store.add(keyed(s, s + 1, "new"), random_unit(rng, 1, args.dim)), 1)
            rows.append(("first keyed add on an old table (adds the column)", first))
            rows.append(("next keyed add", median_ms(lambda s: store.add(keyed(10 + s, 11 + s, "new"), one), 10)))
        print(f"{args.size} items, {args.dim}-d, load average {os.getloadavg()[0]:.1f}\n")
        print("| operation | median ms |\n|---|---|")
        print("\n".join(f"| {name} | {ms:.3f} |" for name, ms in rows))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
