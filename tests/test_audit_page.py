"""The page's "Probably mislabelled" view in a real browser: a class_0 image planted under class_3 comes first,
with its suggested label and its nearest neighbours (the same rows as ``GET /audit``, the same neighbours as
``GET /items/{id}/similar``); reached by keyboard, paged, and its state is the URL."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest
from browser_fixtures import CHROMIUM
from serving_fixtures import GALLERY_SIZE, running_server
from test_browser import _url, api_ids, offline_page, query_file

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.store.files.index_store import IndexStore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install -y chromium)"),
]
ROWS = "els => els.map(e => Number(e.dataset.id))"
NEIGHBOURS_SHOWN = "[...document.querySelectorAll('#audit-rows .neighbours')].every(l => l.dataset.loaded === 'true')"


@pytest.fixture(scope="module")
def planted(tiny_index_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A copy of the tiny index with a copy of a class_0 image (its file and its vector) added under class_3."""
    root = tmp_path_factory.mktemp("audit_page")
    index = Path(shutil.copytree(tiny_index_template, root / "index"))
    with IndexStore.open(index) as store:
        original = next(item for item in store.all_items() if item.label == "class_0")
        shutil.copy(original.path, root / "planted.png")
        (planted_id,) = store.add([ImageRecord(root / "planted.png", "class_3")], store.embeddings_of([original.id]))
    return index, int(planted_id)


@pytest.fixture(scope="module")
def base_url(planted: tuple[Path, int]):
    with running_server(planted[0], show_paths=True) as base:
        yield base


def _wait_audit(page, offset: int) -> None:
    page.wait_for_function(
        f"document.getElementById('audit-rows').dataset.offset === '{offset}'"
        " && document.getElementById('audit-view').getAttribute('aria-busy') === 'false'"
    )
    page.wait_for_function(NEIGHBOURS_SHOWN)


def _api_rows(base_url: str, offset: int) -> dict:
    response = httpx.get(f"{base_url}/audit", params={"offset": offset, "limit": 10}, timeout=60)
    response.raise_for_status()
    return response.json()


def test_the_planted_item_comes_first_with_its_suggestion_and_neighbours(
    browser, base_url: str, planted: tuple[Path, int]
) -> None:
    _, planted_id = planted
    page = offline_page(browser)
    try:
        page.goto(base_url + "/")
        page.wait_for_function("document.getElementById('status').textContent.includes('images indexed')")
        page.focus("#show-audit")
        page.keyboard.press("Enter")  # keyboard only
        _wait_audit(page, 0)
        assert _url(page) == "/?view=audit"
        assert page.evaluate("document.activeElement.id") == "audit-title"
        expected = _api_rows(base_url, 0)
        assert expected["total"] == GALLERY_SIZE + 1 and expected["suspects"] >= 1
        shown = page.eval_on_selector_all("#audit-rows .suspect", ROWS)
        assert shown == [row["id"] for row in expected["rows"]] and shown[0] == planted_id
        first = "#audit-rows .suspect:first-child"
        assert page.text_content(f"{first} .given") == "class_3"
        assert page.text_content(f"{first} .suggested") == "probably class_0"
        assert f"score {expected['rows'][0]['score']:.3f}" in page.text_content(f"{first} .verdict")
        neighbours = page.eval_on_selector_all(f"{first} .neighbour", ROWS)
        assert neighbours == api_ids(base_url, f"/items/{planted_id}/similar", params={"k": 5})
        labels = page.eval_on_selector_all(f"{first} .neighbour .label", "els => els.map(e => e.textContent)")
        assert all(label.endswith("class_0") for label in labels)  # its neighbours all carry the suggestion
        loaded = f"{first} img"
        page.wait_for_function(
            f"[...document.querySelectorAll('{loaded}')].every(i => i.complete && i.naturalWidth > 0)"
        )

        page.focus("#audit-next")
        page.keyboard.press("Enter")  # the next page
        _wait_audit(page, 10)
        assert _url(page) == "/?view=audit&audit_offset=10"
        assert page.eval_on_selector_all("#audit-rows .suspect", ROWS) == [
            r["id"] for r in _api_rows(base_url, 10)["rows"]
        ]
        page.go_back()  # Back: the first page again
        _wait_audit(page, 0)
        assert page.eval_on_selector_all("#audit-rows .suspect", ROWS)[0] == planted_id
        page.goto(base_url + "/?view=audit&audit_offset=10")  # the URL alone opens the view at its page
        _wait_audit(page, 10)
        assert page.is_disabled("#audit-prev") is False and page.is_hidden("#show-audit")
        assert page.blocked == []
    finally:
        page.close()


def test_a_search_closes_the_view_and_a_tile_searches_its_item(
    browser, base_url: str, planted: tuple[Path, int], tmp_path: Path
) -> None:
    _, planted_id = planted
    page = offline_page(browser)
    try:
        page.goto(base_url + "/?view=audit")
        _wait_audit(page, 0)
        page.set_input_files("#file", str(query_file(tmp_path)))  # a search: its URL, and the view closes
        page.wait_for_function("document.getElementById('audit-view').hidden")
        assert _url(page).startswith("/?q=upload") and page.is_visible("#show-audit")
        page.go_back()
        _wait_audit(page, 0)
        page.click(f"#audit-rows .suspect[data-id='{planted_id}'] .audit-item a")
        page.wait_for_function(f"document.getElementById('results').dataset.query === 'item:{planted_id}'")
        assert _url(page) == f"/?item={planted_id}" and page.is_hidden("#audit-view")
        assert page.blocked == []
    finally:
        page.close()
