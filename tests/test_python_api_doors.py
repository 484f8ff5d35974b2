"""The Python API covers what HTTP covers (#55, docs/CONTRACTS.md "What each door covers"): a search by a
stored item (``GET /items/{id}/similar``) and a delete by id or key (``DELETE /items/...``), through the same
use cases as the service."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import retrieval
from retrieval.indexing.common.errors import ItemNotFoundError
from retrieval.indexing.store.files.index_store import IndexStore


def test_a_stored_item_is_searched_by_its_own_vector_and_left_out(fresh_index: Path) -> None:
    with IndexStore.open(fresh_index) as store:
        ids, stored = store.ids(), store.embeddings_of(store.ids())
    (hits,) = retrieval.search(fresh_index, item_ids=[int(ids[2])], k=4)
    order = ids[np.argsort(-(stored @ stored[2]), kind="stable")]
    assert [hit.item.id for hit in hits] == [int(i) for i in order if i != ids[2]][:4]


def test_remove_deletes_by_id_and_by_key_and_an_unknown_one_removes_nothing(fresh_index: Path) -> None:
    with IndexStore.open(fresh_index) as store:
        ids, count, dim = store.ids(), store.count, store.dim
    retrieval.add(fresh_index, vectors=np.eye(1, dim)[0], keys=["k1"])
    assert retrieval.remove(fresh_index, [int(ids[0])], keys=["k1"]) == (2, count - 1)
    with pytest.raises(ItemNotFoundError):
        retrieval.remove(fresh_index, [int(ids[0])])
    with IndexStore.open(fresh_index) as store:
        assert store.count == count - 1 and int(ids[0]) not in store.ids().tolist()
