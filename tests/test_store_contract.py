"""Both index backends pass the one ``Store`` contract (store_contract.py), each with its own fixtures,
plus what only one of them does (a files index compacts; a Milvus collection compacts itself)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from store_contract import COUNT, StoreContract

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.store.backends import BACKENDS, IndexTarget, index_target
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.store.files.index_store import IndexStore
from retrieval.indexing.store.milvus.milvus_build import MilvusTarget
from retrieval.indexing.store.shared.store_protocol import Store

HAS_MILVUS = importlib.util.find_spec("pymilvus") is not None and importlib.util.find_spec("milvus_lite") is not None


class FilesFixtures:
    @classmethod
    def target(cls, directory: Path) -> IndexTarget:
        return FilesTarget()


class MilvusFixtures:
    @classmethod
    def target(cls, directory: Path) -> IndexTarget:
        return MilvusTarget.of(str(directory / "milvus.db"), "contract", directory / "index")


class TestFilesStore(StoreContract, FilesFixtures):
    def test_opens_as_an_index_store_that_compacts(self, fresh: Store) -> None:
        assert isinstance(fresh, IndexStore)
        fresh.remove([1, 2])
        result = fresh.compact()
        assert (result.segments_after, result.tombstones_before, result.tombstones_after) == (1, 2, 0)
        assert fresh.count == COUNT - 2


@pytest.mark.skipif(not HAS_MILVUS, reason="pymilvus / milvus-lite are not installed (the milvus extra)")
class TestMilvusStore(StoreContract, MilvusFixtures):
    def test_compacting_is_milvus_own_business(self, store: Store) -> None:
        with pytest.raises(ConfigError, match="Milvus merges its own segments"):
            store.compact()


def test_the_registry_names_both_backends_and_checks_their_options(tmp_path: Path) -> None:
    assert BACKENDS.names() == ["files", "milvus"]
    assert isinstance(index_target("files", None, None, tmp_path / "index"), FilesTarget)
    target = index_target("milvus", str(tmp_path / "m.db"), None, tmp_path / "my index")
    assert isinstance(target, MilvusTarget) and target.collection == "retrieval_my_index"
    with pytest.raises(ConfigError, match="need --backend milvus"):
        index_target("files", str(tmp_path / "m.db"), None, tmp_path / "index")
    with pytest.raises(ConfigError, match="needs --milvus-uri"):
        index_target("milvus", None, None, tmp_path / "index")
    with pytest.raises(ConfigError, match="known index backends: files, milvus"):
        index_target("faiss", None, None, tmp_path / "index")
