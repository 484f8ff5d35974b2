"""``index build --dba N``: the index stores augmented vectors, an add augments its new items from the raw
vectors, and a full compaction re-augments every item, each equal to alpha-DBA of the raw vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.search.postprocess import augment_database
from retrieval.indexing.search.postprocess_params import DbaParams, IndexPostprocess
from retrieval.indexing.store.build.builder import with_postprocess, write_index
from retrieval.indexing.store.files.faiss_kinds import binary_kind, float_kind
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.store.files.index_store import IndexStore

DBA = DbaParams(n=3, alpha=1.0)
NEVER = {"max_delta_segments": 100, "max_delta_fraction": 100.0, "max_tombstone_fraction": 1.0, "min_rows": 10**9}


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(8, 32))
    x = np.repeat(centres, 12, axis=0) + 0.8 * rng.normal(size=(96, 32))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16).astype(np.float32)


def _records(positions: range) -> list[ImageRecord]:
    return [ImageRecord(Path(f"/photos/{i}.jpg"), f"c{i // 12}") for i in positions]


def _build(out: Path, tiny_model_dir: Path, vectors: np.ndarray) -> None:
    target = FilesTarget(postprocess=IndexPostprocess(dba=DBA))
    kinds = (float_kind("flat"), binary_kind("flat"))
    write_index(
        out, OnnxEmbedder(tiny_model_dir, threads=1), _records(range(len(vectors))), vectors, kinds, target=target
    )


def test_build_add_and_compact_keep_alpha_dba(tiny_model_dir: Path, vectors: np.ndarray, tmp_path: Path) -> None:
    out = tmp_path / "dba"
    _build(out, tiny_model_dir, vectors[:80])
    with IndexStore.open(out) as store:
        assert store.manifest.postprocess.dba == DBA
        built = store.embeddings_of(store.ids())
        np.testing.assert_allclose(built, augment_database(vectors[:80], DBA).vectors, atol=2e-3)
        store.compact(policy=store.manifest.compaction.model_copy(update=NEVER))
        new_ids = store.add(_records(range(80, 96)), vectors[80:])
        # the new items: augmented among all 96 raw vectors; the old ones: as built
        everything = augment_database(vectors, DBA).vectors
        np.testing.assert_allclose(store.embeddings_of(new_ids), everything[80:], atol=2e-3)
        np.testing.assert_array_equal(store.embeddings_of(store.ids()[:80]), built)
        store.remove([1])  # item 1 is vector 0
        store.compact()
        live = np.arange(1, 96)
        np.testing.assert_allclose(
            store.embeddings_of(store.ids()), augment_database(vectors[live], DBA).vectors, atol=2e-3
        )
        found = store.search(augment_database(vectors[live], DBA).vectors[:5], 1)
        np.testing.assert_array_equal(found.ids[:, 0], live[:5] + 1)
    assert sorted(p.name for p in (out / "raw").iterdir()) == [
        f"g{store.manifest.generation:08d}.f16.npy",
        f"g{store.manifest.generation:08d}.ids.npy",
    ]


def test_dba_needs_the_files_backend() -> None:
    class Elsewhere:  # any target but the files backend's
        pass

    with pytest.raises(ConfigError, match="--dba and --postprocess-params need the files backend"):
        with_postprocess(Elsewhere(), IndexPostprocess(dba=DBA))  # type: ignore[arg-type]


def test_index_add_with_another_dba_is_refused(tiny_model_dir: Path, vectors: np.ndarray, tmp_path: Path) -> None:
    out = tmp_path / "dba"
    _build(out, tiny_model_dir, vectors[:40])
    result = CliRunner().invoke(app, ["index", "add", str(out), "--data", str(tmp_path), "--dba", "5"])
    assert result.exit_code != 0 and "was built with --dba 3" in str(result.exception)
    info = CliRunner().invoke(app, ["index", "info", str(out)])
    assert "vectors augmented (DBA n=3, alpha=1)" in info.output


def test_index_build_and_add_commands(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "index"
    params = '{"qe": {"n": 4, "alpha": 2}, "dba": {"alpha": 0}}'
    built = CliRunner().invoke(
        app,
        ["index", "build", "--model", str(tiny_model_dir), "--data", str(gallery_dir), "--out", str(out)]
        + ["--dba", "2", "--postprocess-params", params, "--quiet"],
    )
    assert built.exit_code == 0, built.output
    with IndexStore.open(out) as store:
        postprocess = store.manifest.postprocess
        assert postprocess.dba == DbaParams(n=2, alpha=0.0) and (postprocess.qe.n, postprocess.qe.alpha) == (4, 2.0)
        raw = np.load(out / "raw" / "g00000000.f16.npy").astype(np.float32)
        np.testing.assert_allclose(
            store.embeddings_of(store.ids()), augment_database(raw, postprocess.dba).vectors, atol=2e-3
        )
    added = CliRunner().invoke(app, ["index", "add", str(out), "--data", str(gallery_dir), "--quiet"])
    assert added.exit_code == 0, added.output
    assert "augmented with their top 2 neighbours (DBA)" in added.output and "retrieval index compact" in added.output


def test_an_upsert_keeps_the_id_and_a_full_compaction_uses_its_new_raw_vector(
    tiny_model_dir: Path, vectors: np.ndarray, tmp_path: Path
) -> None:
    out = tmp_path / "dba"
    _build(out, tiny_model_dir, vectors[:80])
    with IndexStore.open(out) as store:
        store.compact(policy=store.manifest.compaction.model_copy(update=NEVER))
        (kept,) = store.add([ImageRecord(Path("/photos/old.jpg"), "c0", key="k")], vectors[80:81])
        (again,) = store.add([ImageRecord(Path("/photos/new.jpg"), "c0", key="k")], vectors[81:82], replace=True)
        assert again == kept == 81
        store.compact()  # re-augments every item from its raw vector: the newest one for the kept id
        raw = np.concatenate([vectors[:80], vectors[81:82]])
        np.testing.assert_allclose(store.embeddings_of(store.ids()), augment_database(raw, DBA).vectors, atol=2e-3)
