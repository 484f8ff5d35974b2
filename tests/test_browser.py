"""The web page in a real browser: upload a query, see k thumbnails load, switch to the binary index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from index_fixtures import make_image
from serving_fixtures import running_server

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT = Path(os.environ.get("RETRIEVAL_SCREENSHOT", "/tmp/retrieval-search-page.png"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install -y chromium)"),
]


def _loaded_thumbnails(page) -> list[int]:
    return page.eval_on_selector_all("#results img", "imgs => imgs.map(img => img.complete ? img.naturalWidth : 0)")


def test_search_page_shows_results_and_switches_index(tiny_index_template, tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    query = tmp_path / "query.png"
    make_image(2, 321, size=(96, 80)).save(query)
    k = 6
    with running_server(tiny_index_template) as base, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            page.goto(base + "/")
            page.wait_for_function("document.getElementById('status').textContent.includes('images indexed')")
            page.fill("#k", str(k))
            page.set_input_files("input[type=file]", str(query))
            page.wait_for_function(f"document.querySelectorAll('#results img').length === {k}")
            page.wait_for_function(
                "[...document.querySelectorAll('#results img')].every(i => i.complete && i.naturalWidth > 0)"
            )
            assert len(_loaded_thumbnails(page)) == k and all(width > 0 for width in _loaded_thumbnails(page))
            assert page.get_attribute("#results", "data-index") == "float"
            assert page.eval_on_selector("#preview", "img => img.naturalWidth") == 96
            float_scores = page.eval_on_selector_all("#results .score", "els => els.map(e => e.textContent)")

            page.check("input[name=index][value=binary]")
            page.wait_for_function("document.getElementById('results').dataset.index === 'binary'")
            page.wait_for_function(
                "[...document.querySelectorAll('#results img')].every(i => i.complete && i.naturalWidth > 0)"
            )
            assert len(_loaded_thumbnails(page)) == k
            assert "binary" in page.text_content("#timings")
            binary_scores = page.eval_on_selector_all("#results .score", "els => els.map(e => e.textContent)")
            assert binary_scores != float_scores, "the binary index scores by Hamming similarity, not cosine"
            assert page.is_hidden("#error")
            page.screenshot(path=str(SCREENSHOT), full_page=True)

            page.fill("#k", "0")  # out of range: the server's problem detail shows up on the page
            page.dispatch_event("#k", "change")
            page.wait_for_selector("#error:not([hidden])")
            assert "k must be between 1 and" in page.text_content("#error")
        finally:
            browser.close()
