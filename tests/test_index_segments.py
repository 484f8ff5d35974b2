"""Segments: adds write deltas, removes leave tombstones, compaction folds them into a new base, and
every search equals the same search of a freshly built index over the same live items."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from reference_hamming import hamming_distances
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import IndexFormatError, IndexNotWritableError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.store.build.builder import write_index
from retrieval.indexing.store.files import store_updates
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.faiss_search import filtered_search, segment_searcher
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.shared.index_directory.compaction import CompactionPolicy
from retrieval.indexing.store.shared.items.item_filter import parse_filter

N, BASE, DIM, K = 400, 280, 64, 10
KINDS = [("flat", "flat"), ("hnsw", "hnsw"), ("ivf", "ivf")]
BASE_FILES = ("float.faiss", "binary.faiss", "embeddings.f16.npy")
NEVER = CompactionPolicy(max_delta_segments=100, max_delta_fraction=100, max_tombstone_fraction=1, min_rows=10**9)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    rng = np.random.default_rng(11)
    x = rng.normal(size=(N, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float16).astype(np.float32)  # what the index stores: every path sees the same numbers


@pytest.fixture(scope="module")
def embedder(tiny_model_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder(tiny_model_dir, threads=1)


def _records(positions: range | np.ndarray) -> list[ImageRecord]:
    return [ImageRecord(Path(f"/photos/{i}.jpg"), f"c{i % 7}", metadata={"odd": bool(i % 2)}) for i in positions]


def _write(out: Path, embedder: OnnxEmbedder, vectors: np.ndarray, positions: np.ndarray, kinds) -> None:
    write_index(out, embedder, _records(positions), vectors[positions], (float_kind(kinds[0]), binary_kind(kinds[1])))


def _updated(tmp_path: Path, embedder: OnnxEmbedder, vectors: np.ndarray, kinds) -> tuple[Path, np.ndarray]:
    """An index of BASE items, then three adds and removes from the base and from a delta; returns the
    directory and the positions (into ``vectors``) of the live items, ascending by item id."""
    out = tmp_path / "updated"
    _write(out, embedder, vectors, np.arange(BASE), kinds)
    with IndexStore.open(out) as store:
        store.compact(policy=NEVER)
        for start, stop in ((BASE, 330), (330, 370), (370, N)):
            store.add(_records(range(start, stop)), vectors[start:stop])
        removed = np.r_[0:N:17, 331:336]  # from the base and from every delta
        assert store.remove((removed + 1).tolist()) == len(removed)  # item ids are positions + 1
        assert store.segment_count == 4 and store.tombstone_count == len(removed)
    return out, np.setdiff1d(np.arange(N), removed)


def _fresh(tmp_path: Path, embedder: OnnxEmbedder, vectors: np.ndarray, live: np.ndarray, kinds) -> Path:
    out = tmp_path / "fresh"
    _write(out, embedder, vectors, live, kinds)
    return out


def _same_results(store: IndexStore, fresh: IndexStore, live: np.ndarray, queries: np.ndarray) -> None:
    """Float and re-ranked binary searches equal the fresh index's (its item j is our item live[j-1]+1);
    binary searches give the same Hamming scores, each the true score of the item returned."""
    to_ours = np.r_[-1, live + 1]
    for kwargs in ({}, {"kind": "binary", "rerank": N}):
        ours, theirs = store.search(queries, K, **kwargs), fresh.search(queries, K, **kwargs)
        np.testing.assert_array_equal(ours.ids, to_ours[theirs.ids])
        np.testing.assert_allclose(ours.scores, theirs.scores, atol=1e-5)
    ours, theirs = store.search(queries, K, kind="binary"), fresh.search(queries, K, kind="binary")
    np.testing.assert_array_equal(ours.scores, theirs.scores)  # ties may list different items
    codes = binarize(store.embeddings_of(store.ids()))
    distances = hamming_distances(binarize(queries), codes)
    position = {int(i): n for n, i in enumerate(store.ids())}
    true = np.take_along_axis(distances, np.vectorize(position.get)(ours.ids), 1)
    np.testing.assert_allclose(ours.scores, 1 - 2 * true / DIM, atol=1e-6)
    assert all(len(set(row)) == K for row in ours.ids.tolist())


@pytest.mark.parametrize("selectors", [False, True], ids=["small-exact", "selectors"])
@pytest.mark.parametrize("kinds", KINDS, ids=lambda kinds: "-".join(kinds))
def test_updated_index_searches_like_a_fresh_build_and_after_compaction(
    kinds, selectors: bool, vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path, monkeypatch
) -> None:
    if selectors:  # rows that meet tombstones go through the selectors, approximate kinds too (not exactly)
        monkeypatch.setattr(segment_searcher, "overfetch", lambda k, fraction: k)
        monkeypatch.setattr(filtered_search, "EXACT_SEARCH_ELEMENTS", 0)
    updated, live = _updated(tmp_path, embedder, vectors, kinds)
    queries = vectors[::9] + 0.02
    with IndexStore.open(_fresh(tmp_path, embedder, vectors, live, kinds)) as fresh, IndexStore.open(updated) as store:
        assert store.count == fresh.count == len(live)
        _same_results(store, fresh, live, queries)
        before = store.search(queries, K)
        result = store.compact()
        assert (result.segments_after, result.tombstones_after) == (1, 0) and result.segments_before == 4
        assert not (updated / "segments").exists() or not any((updated / "segments").iterdir())
        _same_results(store, fresh, live, queries)
    with IndexStore.open(updated) as reopened:
        assert reopened.segment_count == 1 and reopened.manifest.delta_segments == 0
        after = reopened.search(queries, K)
        np.testing.assert_array_equal(after.ids, before.ids)
        np.testing.assert_allclose(after.scores, before.scores, atol=1e-6)
        np.testing.assert_array_equal(reopened.embeddings_of(live + 1), vectors[live])


def test_filtered_search_over_segments_equals_brute_force(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    updated, live = _updated(tmp_path, embedder, vectors, ("flat", "flat"))
    queries = vectors[5:25] + 0.03
    with IndexStore.open(updated) as store:
        for where in ({"odd": True}, {"label": "c3"}):
            allowed = np.asarray([p for p in live if (p % 2 == 1 if "odd" in where else p % 7 == 3)])
            found = store.search(queries, K, where=parse_filter(where))
            similarity = queries @ vectors[allowed].T
            order = np.argsort(-similarity, axis=1, kind="stable")[:, :K]
            np.testing.assert_array_equal(found.ids, allowed[order] + 1)


def test_an_add_writes_only_its_delta_and_a_remove_no_faiss_file(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    out = tmp_path / "index"
    _write(out, embedder, vectors, np.arange(BASE), ("flat", "flat"))
    stamp = {name: (out / name).stat() for name in BASE_FILES}
    with IndexStore.open(out) as store:
        store.add(_records(range(BASE, BASE + 3)), vectors[BASE : BASE + 3])
        store.remove([1, 2, BASE + 1])
    for name in BASE_FILES:  # the base is neither rewritten nor replaced
        now = (out / name).stat()
        assert (now.st_ino, now.st_mtime_ns, now.st_size) == (
            stamp[name].st_ino,
            stamp[name].st_mtime_ns,
            stamp[name].st_size,
        )
    (delta,) = (out / "segments").iterdir()
    written = sum(f.stat().st_size for f in delta.iterdir())
    per_item = DIM * 2 + DIM * 4 + DIM // 8 + 8  # float16 row, float32 vector, code, id
    assert written < 3 * per_item + 4096  # O(added): headers aside, the three items only
    assert written * 20 < sum(s.st_size for s in stamp.values())


def test_crash_after_a_compactions_commit_is_finished_on_open(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path, monkeypatch
) -> None:
    updated, live = _updated(tmp_path, embedder, vectors, ("flat", "flat"))
    queries = vectors[::7]
    with IndexStore.open(updated) as store:
        before = store.search(queries, K)

        def killed(*args: object) -> bool:
            raise OSError("killed")

        monkeypatch.setattr(store_updates, "finish_base_swap", killed)
        with pytest.raises(IndexNotWritableError, match="killed"):
            store.compact()
    monkeypatch.undo()
    assert any(updated.glob(".base-*"))  # committed in SQLite, new base files not yet in place
    with IndexStore.open(updated) as store:  # reads the new base, moves it in place, saves the manifest
        assert store.segment_count == 1 and store.tombstone_count == 0 and store.count == len(live)
        assert store.manifest.generation == store._db.generation
        found = store.search(queries, K)
        np.testing.assert_array_equal(found.ids, before.ids)
    assert not any(updated.glob(".base-*"))
    assert not (updated / "segments").exists() or not any((updated / "segments").iterdir())


def test_crash_before_a_compactions_commit_leaves_the_old_state(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path, monkeypatch
) -> None:
    updated, live = _updated(tmp_path, embedder, vectors, ("hnsw", "ivf"))
    real = store_updates.write_merged

    def killed(*args, **kwargs):
        real(*args, **kwargs)
        raise OSError("killed")

    with IndexStore.open(updated) as store:
        before = store.search(vectors[:20], K)
        monkeypatch.setattr(store_updates, "write_merged", killed)
        with pytest.raises(IndexNotWritableError):
            store.compact()
    monkeypatch.undo()
    with IndexStore.open(updated) as store:
        assert store.segment_count == 4 and store.count == len(live)
        np.testing.assert_array_equal(store.search(vectors[:20], K).ids, before.ids)
        store.add(_records([0]), vectors[:1])  # the next writer deletes what the killed one left
    assert not any(updated.glob(".base-*"))


def test_automatic_compaction_merges_small_deltas_then_folds_into_the_base(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    out = tmp_path / "index"
    _write(out, embedder, vectors, np.arange(200), ("flat", "flat"))
    policy = CompactionPolicy(max_delta_segments=3, max_delta_fraction=0.5, max_tombstone_fraction=0.3, min_rows=0)
    counts = []
    with IndexStore.open(out) as store:
        store.compact(policy=policy)
        for start in range(200, 290, 10):
            store.add(_records(range(start, start + 10)), vectors[start : start + 10])
            counts.append(store.segment_count)
        assert max(counts) <= 1 + 3 and counts[-1] > 1  # minor merges kept at most 3 deltas
        store.add(_records(range(290, 310)), vectors[290:310])  # 110 delta rows > 0.5 * 200: major
        assert store.segment_count == 1
        store.remove(list(range(1, 101)))  # 100 of 310 rows: tombstones above 0.3 -> major
        assert store.tombstone_count == 0 and store.count == 210
        live = np.arange(100, 310)
        queries = vectors[::11] + 0.01
        similarity = queries @ vectors[live].T
        expected = live[np.argsort(-similarity, axis=1, kind="stable")[:, :K]] + 1
        np.testing.assert_array_equal(store.search(queries, K).ids, expected)


def test_compact_and_info_commands(vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path) -> None:
    updated, _ = _updated(tmp_path, embedder, vectors, ("flat", "flat"))
    runner = CliRunner()
    info = runner.invoke(app, ["index", "info", str(updated)])
    assert info.exit_code == 0, info.output
    assert "segments   4 (base + 3 deltas), 29 tombstones" in info.output
    done = runner.invoke(app, ["index", "compact", str(updated)])
    assert done.exit_code == 0, done.output
    assert "4 segments and 29 tombstones -> 1 segment" in done.output
    assert "segments   1 (base + 0 deltas), 0 tombstones" in runner.invoke(app, ["index", "info", str(updated)]).output
    shutil.rmtree(updated)
    missing = runner.invoke(app, ["index", "compact", str(updated)])
    assert isinstance(missing.exception, IndexFormatError) and "not an index directory" in str(missing.exception)


def test_every_segment_searches_through_its_own_gpu_searcher(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path, monkeypatch
) -> None:
    """The base and each delta get the searcher ``faiss_gpu.searcher`` makes (a GPU copy where faiss sees a
    GPU), made once per segment: an add makes one for its new delta and keeps the others'."""
    made: list[tuple[str, str]] = []

    def spy(kind, index, name):
        made.append((kind.value, name))
        used = []

        def search(data, k):
            used.append(k)
            return index.search(data, k)

        spies.append(used)
        return search

    spies: list[list[int]] = []
    monkeypatch.setattr(segment_searcher, "searcher", spy)
    out = tmp_path / "index"
    _write(out, embedder, vectors, np.arange(BASE), ("hnsw", "flat"))
    with IndexStore.open(out) as store:
        store.compact(policy=NEVER)
        store.add(_records(range(BASE, 300)), vectors[BASE:300])
        assert made == [("float", "hnsw"), ("binary", "flat"), ("float", "flat"), ("binary", "flat")]
        store.search(vectors[:3], K)
        store.search(vectors[:3], K, kind="binary")
        assert all(spies), "every segment's searcher was used for both kinds"


def test_a_compaction_renumbers_only_the_rows_that_move(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path, monkeypatch
) -> None:
    """A major merge writes the live items in id order from row 0: the base's rows before the first tombstone
    keep their numbers and only the items after it move (the item table is updated for those alone)."""
    out = tmp_path / "index"
    _write(out, embedder, vectors, np.arange(BASE), ("flat", "flat"))
    with IndexStore.open(out) as store:
        store.compact(policy=NEVER)
        store.add(_records(range(BASE, 330)), vectors[BASE:330])
        store.remove([301])  # position 300, in the delta: rows 0..299 stay, the delta's later items move up
        renumbered: list[list[int]] = []
        real = store._db.set_rows
        monkeypatch.setattr(store._db, "set_rows", lambda ids, rows: (renumbered.append(list(ids)), real(ids, rows)))
        store.compact()
    assert renumbered == [list(range(302, 331))]
    live = np.setdiff1d(np.arange(330), [300])
    with IndexStore.open(out) as reopened:  # rows as the item table holds them
        np.testing.assert_array_equal(reopened.embeddings_of(live + 1), vectors[live])
        found = reopened.search(vectors[live[::25]], 1)
        np.testing.assert_array_equal(found.ids[:, 0], live[::25] + 1)


def test_stored_vectors_read_by_ids_in_any_order_across_segments(
    vectors: np.ndarray, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """``embeddings_of`` copies ascending runs of rows as blocks and gathers any other order: both give each
    id its own vector (ids are positions + 1 here)."""
    updated, live = _updated(tmp_path, embedder, vectors, ("flat", "flat"))
    shuffled = np.random.default_rng(4).permutation(live)
    with IndexStore.open(updated) as store:
        assert store.segment_count == 4
        for order in (live, shuffled, live[::-1], live[100:160]):
            np.testing.assert_array_equal(store.embeddings_of(order + 1), vectors[order])
