"""``retrieval search``: many images in one batched call, by stored item, as JSON / CSV / an aligned table."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import serving_client
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing.common.errors import ConfigError, DataError, ItemNotFoundError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder
from retrieval.indexing.store.build.builder import build_index
from retrieval.indexing.store.files.index_store import IndexStore

runner = CliRunner()
LONG = "Black-footed Albatross of the North Pacific, juvenile plumage"


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def flat_index(tiny_model_dir: Path, gallery_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flat (exact) index of the 30-image gallery; class_1's label is long."""
    records = [
        ImageRecord(path=path, label=LONG if path.parent.name == "class_1" else path.parent.name)
        for path in sorted(gallery_dir.glob("*/*.png"))
    ]
    out = tmp_path_factory.mktemp("search") / "index"
    build_index(tiny_model_dir, records, out, progress=False)
    return out


def brute_force(query: np.ndarray, gallery: np.ndarray, ids: np.ndarray, k: int, exclude: int | None = None):
    scores = gallery @ query
    order = [i for i in np.argsort(-scores, kind="stable") if ids[i] != exclude][:k]
    return ids[order].tolist(), scores[order]


def test_many_images_in_one_call_as_json(flat_index: Path, gallery_dir: Path, tiny_model_dir: Path, tmp_path: Path):
    queries = [gallery_dir / "class_2" / "img_3.png", gallery_dir / "class_4" / "img_0.png"]
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG nope")
    result = invoke("search", flat_index, queries[0], broken, queries[1], "-k", 4, "--json", "--batch-size", 1)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["k"], document["index_kind"], document["score_kind"]) == (4, "float", "cosine")
    assert [q["query"] for q in document["queries"]] == [str(q) for q in queries]  # the broken file is left out
    assert [u["path"] for u in document["unreadable"]] == [str(broken)]
    assert "skipped 1 unreadable image(s)" in result.stderr
    embedder = OnnxEmbedder(tiny_model_dir)
    with IndexStore.open(flat_index) as store:
        items = store.all_items()
    ids = np.array([item.id for item in items])
    gallery = embedder.embed_paths([Path(item.path) for item in items], progress=False).embeddings
    for query, answer in zip(queries, document["queries"]):
        expected_ids, expected_scores = brute_force(
            embedder.embed_paths([query], progress=False).embeddings[0], gallery, ids, 4
        )
        assert [r["id"] for r in answer["results"]] == expected_ids
        np.testing.assert_allclose([r["score"] for r in answer["results"]], expected_scores, atol=1e-5)
        assert [r["rank"] for r in answer["results"]] == [1, 2, 3, 4]
        assert answer["results"][0]["path"] == str(query)


def test_csv_to_a_file_matches_the_json(flat_index: Path, gallery_dir: Path, tmp_path: Path) -> None:
    queries = [gallery_dir / "class_0" / "img_1.png", gallery_dir / "class_1" / "img_2.png"]
    as_json = json.loads(invoke("search", flat_index, *queries, "-k", 3, "--binary", "--json").stdout)
    assert as_json["score_kind"] == "hamming"
    out = tmp_path / "hits.csv"
    done = invoke("search", flat_index, *queries, "-k", 3, "--binary", "--out", out)  # format from the suffix
    assert done.exit_code == 0 and done.stdout == ""
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0]) == ["query", "query_id", "rank", "id", "key", "score", "probability", "label", "path"]
    expected = [(q["query"], r["rank"], r["id"], r["label"]) for q in as_json["queries"] for r in q["results"]]
    assert [(r["query"], int(r["rank"]), int(r["id"]), r["label"]) for r in rows] == expected
    assert {r["label"] for r in rows if r["query"].endswith("img_2.png")} >= {LONG}  # long labels stay whole


def test_search_by_id_leaves_the_item_out_like_the_http_api(flat_index: Path, tiny_index_template: Path) -> None:
    result = invoke("search", tiny_index_template, "--id", 7, "--id", 12, "-k", 5, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    with IndexStore.open(tiny_index_template) as store:
        ids = store.ids()
        stored = store.embeddings_of(ids)
        assert [q["query"] for q in document["queries"]] == [store.item(7).path, store.item(12).path]
    with serving_client(tiny_index_template) as client:
        for item_id, answer in zip((7, 12), document["queries"]):
            got = [r["id"] for r in answer["results"]]
            assert answer["query_id"] == item_id and item_id not in got and len(got) == 5
            assert got == [
                hit["id"] for hit in client.get(f"/items/{item_id}/similar", params={"k": 5}).json()["results"]
            ]
            expected, _ = brute_force(stored[list(ids).index(item_id)], stored, ids, 5, exclude=item_id)
            assert got == expected
    missing = invoke("search", tiny_index_template, "--id", 999)
    assert isinstance(missing.exception, ItemNotFoundError) and "no item 999" in str(missing.exception)


def test_the_table_stays_aligned_with_long_labels(flat_index: Path, gallery_dir: Path) -> None:
    queries = [gallery_dir / "class_1" / "img_0.png", gallery_dir / "class_3" / "img_0.png"]
    result = invoke("search", flat_index, *queries, "-k", 6)
    assert result.exit_code == 0, result.output
    blocks = result.stdout.strip().split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == [f"query: {q}" for q in queries]
    lines = [line for block in blocks for line in block.splitlines()[1:]]
    starts = {
        line.index("path") if line.lstrip().startswith("rank") else line.index(str(gallery_dir)) for line in lines
    }
    assert len(starts) == 1  # the path column starts at the same place in every row
    assert any("Black-footed Albatross …" in line for line in lines) and LONG not in result.stdout


def test_the_table_shows_item_keys_where_items_have_them(
    flat_index: Path, tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path
) -> None:
    paths = sorted(gallery_dir.glob("*/*.png"))
    records = [
        ImageRecord(path, path.parent.name, key=f"sku-{n:03d}" if n % 2 else None) for n, path in enumerate(paths)
    ]
    keyed = tmp_path / "keyed"
    build_index(tiny_model_dir, records, keyed, progress=False)
    result = invoke("search", keyed, paths[1], "-k", 30)
    assert result.exit_code == 0, result.output
    heading, *rows = result.stdout.strip().splitlines()
    assert heading.split()[:4] == ["rank", "id", "key", "score"]
    keys = {int(row.split()[1]): row.split()[2] for row in rows}
    assert keys == {n + 1: f"sku-{n:03d}" if n % 2 else "-" for n in range(len(paths))}  # ids 1.. in order
    assert len({row.index(str(gallery_dir)) for row in rows}) == 1  # still aligned
    plain = invoke("search", flat_index, paths[1], "-k", 3)
    assert "key" not in plain.stdout.splitlines()[0]  # no column where no item has a key


def test_a_wide_terminal_shows_long_labels_whole(flat_index: Path, gallery_dir: Path) -> None:
    queries = [str(gallery_dir / name / "img_0.png") for name in ("class_1", "class_3")]
    wide = runner.invoke(app, ["search", str(flat_index), *queries, "-k", "6"], env={"COLUMNS": "400"})
    assert wide.exit_code == 0, wide.output
    assert LONG in wide.stdout and "…" not in wide.stdout


def test_bad_arguments_are_one_sentence(flat_index: Path, gallery_dir: Path) -> None:
    image = gallery_dir / "class_0" / "img_0.png"
    for args, fragment in [
        ((), "give one or more query images, --id"),
        ((image, "--json", "--csv"), "choose one of --json and --csv"),
        ((image, "--out", "hits.txt"), "name it *.json or *.csv"),
    ]:
        result = invoke("search", flat_index, *args)
        assert isinstance(result.exception, ConfigError) and fragment in str(result.exception), result.output


@pytest.fixture(scope="module")
def tagged_index(tiny_model_dir: Path, gallery_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flat index of the gallery whose items carry metadata: even (image number) and shop (by class)."""
    records = [
        ImageRecord(
            path=path,
            label=path.parent.name,
            metadata={
                "even": int(path.stem.split("_")[1]) % 2 == 0,
                "shop": "berlin" if "_1" in path.parent.name else "paris",
            },
        )
        for path in sorted(gallery_dir.glob("*/*.png"))
    ]
    out = tmp_path_factory.mktemp("tagged") / "index"
    build_index(tiny_model_dir, records, out, progress=False)
    return out


def test_filter_keeps_only_matching_items_as_brute_force_does(tagged_index: Path, gallery_dir: Path) -> None:
    with IndexStore.open(tagged_index) as store:
        items = store.all_items()
        ids = np.array([item.id for item in items])
        stored = store.embeddings_of(ids)
    query = gallery_dir / "class_2" / "img_3.png"
    query_vector = OnnxEmbedder(tagged_index / "model").embed_paths([query], progress=False).embeddings[0]
    for where, keep in [
        ({"even": True}, lambda item: item.metadata["even"] is True),
        ({"label": "class_3"}, lambda item: item.label == "class_3"),
        ({"shop": "berlin", "even": False}, lambda item: item.metadata == {"even": False, "shop": "berlin"}),
    ]:
        result = invoke("search", tagged_index, query, "-k", 4, "--json", "--filter", json.dumps(where))
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["filter"] == where
        mask = np.array([keep(item) for item in items])
        assert 0 < mask.sum() < len(items)
        expected_ids, expected_scores = brute_force(query_vector, stored[mask], ids[mask], 4)
        got = document["queries"][0]["results"]
        assert [r["id"] for r in got] == expected_ids, where
        np.testing.assert_allclose([r["score"] for r in got], expected_scores, atol=2e-3)  # stored float16


def test_filter_with_id_and_binary_and_an_empty_match(tagged_index: Path) -> None:
    with IndexStore.open(tagged_index) as store:
        item = store.all_items()[0]
        shop_of = {i.id: i.metadata["shop"] for i in store.all_items()}
    where = json.dumps({"shop": item.metadata["shop"]})
    by_id = json.loads(invoke("search", tagged_index, "--id", item.id, "--binary", "--filter", where, "--json").stdout)
    found = [r["id"] for r in by_id["queries"][0]["results"]]
    assert found and item.id not in found and {shop_of[i] for i in found} == {item.metadata["shop"]}
    nothing = invoke("search", tagged_index, "--id", item.id, "--filter", '{"label": "no such class"}', "--json")
    assert nothing.exit_code == 0 and json.loads(nothing.stdout)["queries"][0]["results"] == []
    assert "no item of" in nothing.stderr and 'matches --filter {"label": "no such class"}' in nothing.stderr
    bad = invoke("search", tagged_index, "--id", item.id, "--filter", "[1, 2]")
    assert isinstance(bad.exception, DataError) and "--filter must be a JSON object" in str(bad.exception)


def test_offset_min_score_and_operators_in_the_cli_and_the_python_api(tagged_index: Path, gallery_dir: Path) -> None:
    from retrieval import search as api_search

    query = gallery_dir / "class_2" / "img_3.png"
    full = json.loads(invoke("search", tagged_index, query, "-k", 12, "--json").stdout)["queries"][0]["results"]
    paged = json.loads(invoke("search", tagged_index, query, "-k", 4, "--offset", 5, "--json").stdout)
    assert [(r["rank"], r["id"]) for r in paged["queries"][0]["results"]] == [(r["rank"], r["id"]) for r in full[5:9]]
    threshold = (full[6]["score"] + full[7]["score"]) / 2  # between two hits: rounding cannot move it
    cut = invoke("search", tagged_index, query, "-k", 10, "--min-score", threshold, "--json")
    document = json.loads(cut.stdout)
    assert [r["id"] for r in document["queries"][0]["results"]] == [
        r["id"] for r in full[:10] if r["score"] >= threshold
    ]
    below = sum(r["score"] < threshold for r in full[:10])
    assert document["queries"][0]["below_min_score"] == below and f"cut {below} of the 1 x 10 hits" in cut.stderr
    where = {"label": {"$in": ["class_1", "class_4"]}, "even": {"$ne": True}}
    filtered = json.loads(
        invoke("search", tagged_index, query, "-k", 30, "--json", "--filter", json.dumps(where)).stdout
    )
    with IndexStore.open(tagged_index) as store:
        expected = sorted(
            i.id for i in store.all_items() if i.label in ("class_1", "class_4") and not i.metadata["even"]
        )
    assert sorted(r["id"] for r in filtered["queries"][0]["results"]) == expected and filtered["filter"] == where
    warned = invoke("search", tagged_index, query, "--filter", '{"colour": "red"}')
    assert "warning: no item has the metadata key 'colour'; the keys in use: even, shop" in warned.stderr
    for args, message in (
        (["--min-score", 2], "min_score must be between -1 and 1"),
        (["--filter", '{"a": {"$x": 1}}'], "not an operator"),
    ):
        bad = invoke("search", tagged_index, query, *args)
        assert isinstance(bad.exception, DataError) and message in str(bad.exception)
    (hits,) = api_search(tagged_index, query, k=10, min_score=threshold)
    assert [item.id for item, _ in hits] == [r["id"] for r in document["queries"][0]["results"]]
    assert hits.below_min_score == below
    (page,) = api_search(tagged_index, query, k=4, offset=5, where=where)
    assert all(item.id in expected for item, _ in page)
    with pytest.warns(UserWarning, match="no item has the metadata key 'colour'"):
        api_search(tagged_index, query, k=2, where={"colour": {"$exists": True}})


def test_search_by_vector_file_ranks_the_stored_vectors(flat_index: Path, tmp_path: Path) -> None:
    with IndexStore.open(flat_index) as store:
        ids, stored = store.ids(), store.embeddings_of(store.ids())
    queries = stored[[4, 17]].astype(np.float32)
    np.save(tmp_path / "q.npy", queries)
    result = invoke("search", flat_index, "--vector", tmp_path / "q.npy", "-k", 3, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    for query, found in zip(queries, document["queries"], strict=True):
        wanted = ids[np.argsort(-(stored @ query), kind="stable")[:3]].tolist()
        assert [hit["id"] for hit in found["results"]] == wanted
    np.save(tmp_path / "short.npy", queries[:, :-1])
    short = invoke("search", flat_index, "--vector", tmp_path / "short.npy")
    assert isinstance(short.exception, DataError) and f"must hold {stored.shape[1]} numbers" in str(short.exception)
    missing = invoke("search", flat_index, "--vector", tmp_path / "none.npy")
    assert isinstance(missing.exception, DataError) and "there is no vector file" in str(missing.exception)
