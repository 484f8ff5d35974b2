"""The web page and the API docs in a real browser (Debian's chromium through Playwright), offline.

Every request to a host other than this server is aborted and recorded, so a page that needs a
CDN shows up as a failure here, as it would for a user without internet.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import httpx
import numpy as np
import pytest
from browser_fixtures import CHROMIUM
from index_fixtures import make_image
from PIL import Image
from serving_fixtures import GALLERY_SIZE, running_server

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.store.files.index_store import IndexStore

if TYPE_CHECKING:
    from playwright.sync_api import FileChooser

SCREENSHOTS = Path(os.environ.get("RETRIEVAL_SCREENSHOT_DIR", "/tmp"))
VIEWPORTS = {
    "desktop": {"width": 1280, "height": 800},
    "phone": {"width": 390, "height": 844},
    "small phone": {"width": 320, "height": 640},
}
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
REDOC_BADGE = "https://cdn.redoc.ly/redoc/logo-mini.svg"
ALL_LOADED = "[...document.querySelectorAll('#results img')].every(i => i.complete && i.naturalWidth > 0)"
# each text node of an element and the lines it spans (a word broken inside spans two), and its height
LINES_PER_WORD = """(e) => {
    const words = [];
    for (const node of e.childNodes) {
        if (node.nodeType !== Node.TEXT_NODE) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        words.push([node.textContent, new Set([...range.getClientRects()].map(r => Math.round(r.top))).size]);
    }
    return [words, e.getClientRects()[0].height];
}"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install -y chromium)"),
]


@pytest.fixture(scope="module")
def base_url(tiny_index_template: Path):
    with running_server(tiny_index_template, show_paths=True) as base:
        yield base


def offline_page(browser, viewport: dict | None = None):
    """A page that can reach only this machine; ``page.blocked`` lists what it tried to fetch elsewhere."""
    page = browser.new_page(viewport=viewport or VIEWPORTS["desktop"])
    page.blocked = []

    def only_local(route) -> None:
        if urlparse(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            page.blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    return page


def query_file(tmp_path: Path) -> Path:
    path = tmp_path / "query.png"
    make_image(2, 321, size=(96, 80)).save(path)
    return path


def open_search_page(browser, base_url: str, viewport: dict | None = None):
    page = offline_page(browser, viewport)
    page.goto(base_url + "/")
    page.wait_for_function("document.getElementById('status').textContent.includes('images indexed')")
    return page


def shown_ids(page) -> list[int]:
    return [int(i) for i in page.eval_on_selector_all("#results .hit", "els => els.map(e => e.dataset.id)")]


def api_ids(base_url: str, path: str, **kwargs) -> list[int]:
    method = "POST" if path == "/search" else "GET"
    response = httpx.request(method, base_url + path, timeout=30, **kwargs)
    response.raise_for_status()
    return [hit["id"] for hit in response.json()["results"]]


def contrast(first: str, second: str) -> float:
    """WCAG contrast ratio of two CSS ``rgb(...)`` colours."""

    def luminance(css: str) -> float:
        channels = np.array([float(v) for v in css[css.index("(") + 1 : -1].split(",")[:3]]) / 255
        linear = np.where(channels <= 0.03928, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
        return float(linear @ [0.2126, 0.7152, 0.0722])

    high, low = sorted([luminance(first), luminance(second)], reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize(
    ("page_path", "operation_selector", "outside"),
    [("/docs", ".opblock", set()), ("/redoc", "[id^='operation/']", {REDOC_BADGE})],
)
def test_api_docs_render_offline(
    browser, base_url: str, page_path: str, operation_selector: str, outside: set[str]
) -> None:
    operations = sum(len(item) for item in httpx.get(base_url + "/openapi.json").json()["paths"].values())
    page = offline_page(browser)
    try:
        page.goto(base_url + page_path)
        page.wait_for_function(f'document.querySelectorAll("{operation_selector}").length === {operations}')
        assert "/items/{item_id}/similar" in page.text_content("body")
        # ReDoc's "API docs by Redocly" badge is its one outside request; the badge removes itself
        # when the image cannot load, so nothing broken is left on the page.
        assert set(page.blocked) <= outside, "the docs page needs another host"
        page.wait_for_function(f"!document.querySelector(\"img[src='{REDOC_BADGE}']\")")
    finally:
        page.close()


def test_search_click_to_search_loading_and_index_switch(browser, base_url: str, tmp_path: Path) -> None:
    query = query_file(tmp_path)
    page = open_search_page(browser, base_url)
    try:
        parameters = httpx.get(base_url + "/openapi.json").json()["paths"]["/search"]["post"]["parameters"]
        default_k = next(p["schema"]["default"] for p in parameters if p["name"] == "k")
        assert page.input_value("#k") == str(default_k)  # the page starts from the API's default
        k = 6
        page.fill("#k", str(k))

        held = []  # the first search is held back so its loading state can be seen
        page.route("**/search?*", lambda route: held.append(route))
        page.set_input_files("input[type=file]", str(query))
        page.wait_for_function("document.getElementById('results-section').getAttribute('aria-busy') === 'true'")
        assert page.is_visible("#loading") and "Searching" in page.text_content("#loading")
        page.unroute("**/search?*")
        held[0].fallback()  # on to the offline guard, then the server
        page.wait_for_function("document.getElementById('results-section').getAttribute('aria-busy') === 'false'")
        assert page.is_hidden("#loading")
        page.wait_for_function(ALL_LOADED)

        expected = api_ids(base_url, "/search", params={"k": k}, files={"image": ("q.png", query.read_bytes())})
        assert shown_ids(page) == expected
        first = page.locator("#results .hit").first
        hit = httpx.get(f"{base_url}/items/{expected[0]}").json()
        assert first.locator(".item-id").text_content() == f"#{hit['id']}"
        assert first.locator(".label").text_content() == hit["label"]  # the whole label, wrapped, not cut
        assert first.locator(".meta dt").all_text_contents() == list(hit["metadata"])
        assert "query.png" in page.text_content("#timings")

        first.locator(".hit-button").click()  # click-to-search: the neighbours of that item
        page.wait_for_function(f"document.getElementById('results').dataset.query === 'item:{expected[0]}'")
        page.wait_for_function(ALL_LOADED)
        assert shown_ids(page) == api_ids(base_url, f"/items/{expected[0]}/similar", params={"k": k})
        assert expected[0] not in shown_ids(page)
        assert f"/items/{expected[0]}/thumbnail" in page.get_attribute("#preview", "src")
        assert f"item #{expected[0]}" in page.text_content("#timings")

        float_scores = page.eval_on_selector_all("#results .score", "els => els.map(e => e.textContent)")
        page.check("input[name=index][value=binary]")  # the same item query, now on the binary index
        page.wait_for_function("document.getElementById('results').dataset.index === 'binary'")
        page.wait_for_function(ALL_LOADED)
        binary = api_ids(base_url, f"/items/{expected[0]}/similar", params={"k": k, "index": "binary"})
        assert shown_ids(page) == binary and "binary" in page.text_content("#timings")
        binary_scores = page.eval_on_selector_all("#results .score", "els => els.map(e => e.textContent)")
        assert binary_scores != float_scores, "the binary index scores by Hamming similarity, not cosine"
        assert page.is_hidden("#error") and page.blocked == []
    finally:
        page.close()


def test_query_expansion_switch(browser, base_url: str, tmp_path: Path) -> None:
    """The switch sends postprocess=qe for uploads and item queries, and turning it off goes back."""
    query = query_file(tmp_path)
    page = open_search_page(browser, base_url)
    try:
        k = 5
        page.fill("#k", str(k))
        page.set_input_files("input[type=file]", str(query))
        page.wait_for_function("document.getElementById('results').dataset.postprocess === 'none'")
        upload = {"image": ("q.png", query.read_bytes())}
        plain = api_ids(base_url, "/search", params={"k": k}, files=upload)
        assert shown_ids(page) == plain
        assert page.get_attribute("#qe", "value") == "qe" and not page.is_checked("#qe")
        page.check("#qe")  # the same upload again, expanded
        page.wait_for_function("document.getElementById('results').dataset.postprocess === 'qe'")
        page.wait_for_function(ALL_LOADED)
        assert shown_ids(page) == api_ids(base_url, "/search", params={"k": k, "postprocess": "qe"}, files=upload)
        assert "with query expansion" in page.text_content("#timings")
        first = shown_ids(page)[0]
        page.locator("#results .hit").first.locator(".hit-button").click()  # an item query keeps the switch
        page.wait_for_function(f"document.getElementById('results').dataset.query === 'item:{first}'")
        page.wait_for_function(ALL_LOADED)
        similar = api_ids(base_url, f"/items/{first}/similar", params={"k": k, "postprocess": "qe"})
        assert shown_ids(page) == similar and first not in similar
        page.uncheck("#qe")
        page.wait_for_function("document.getElementById('results').dataset.postprocess === 'none'")
        assert shown_ids(page) == api_ids(base_url, f"/items/{first}/similar", params={"k": k})
        assert page.is_hidden("#error") and page.blocked == []
    finally:
        page.close()


def test_errors_name_the_file_and_clear_stale_results(browser, base_url: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"this is not a PNG at all")
    page = open_search_page(browser, base_url)
    try:
        page.set_input_files("input[type=file]", str(query_file(tmp_path)))
        page.wait_for_function("document.querySelectorAll('#results .hit').length > 0")

        page.set_input_files("input[type=file]", str(broken))
        page.wait_for_selector("#error:not([hidden])")
        error = page.text_content("#error")
        assert '"broken.png"' in error and "(400)" in error and "cannot read image" in error
        page.wait_for_function("document.getElementById('results-section').getAttribute('aria-busy') === 'false'")
        assert page.eval_on_selector_all("#results .hit", "els => els.length") == 0
        assert page.text_content("#timings") == ""  # no stale "N results ..." line
        assert page.is_hidden("#preview") and page.is_visible("#drop-hint")  # no broken-image preview

        page.set_input_files("input[type=file]", str(query_file(tmp_path)))  # a good file clears the error
        page.wait_for_function("document.querySelectorAll('#results .hit').length > 0")
        assert page.is_hidden("#error") and page.is_visible("#preview")
        page.fill("#k", "0")  # out of range: the server's problem detail shows up, naming the query
        page.dispatch_event("#k", "change")
        page.wait_for_selector("#error:not([hidden])")
        assert "k must be between 1 and" in page.text_content("#error") and "query.png" in page.text_content("#error")
        assert page.text_content("#timings") == "" and page.is_visible("#preview")  # the query itself was fine
    finally:
        page.close()


def test_keyboard_focus_and_contrast(browser, base_url: str, tmp_path: Path) -> None:
    page = open_search_page(browser, base_url)
    try:
        page.set_input_files("input[type=file]", str(query_file(tmp_path)))
        page.wait_for_function("document.querySelectorAll('#results .hit').length > 0")
        for _ in range(10):  # Tab from the top of the page to the hidden file input
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == "file":
                break
        ring = page.eval_on_selector(
            "#drop", "e => { const s = getComputedStyle(e); return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }"
        )
        paper = page.eval_on_selector("body", "e => getComputedStyle(document.documentElement).backgroundColor")
        assert ring[0] != "none" and float(ring[1].removesuffix("px")) >= 2 and contrast(ring[2], paper) >= 3

        def colour(selector: str, prop: str) -> str:
            return page.eval_on_selector(selector, f"e => getComputedStyle(e).{prop}")

        assert contrast(colour("footer a", "color"), paper) >= 4.5  # links
        assert contrast(colour(".status", "color"), paper) >= 4.5  # muted text
        assert contrast(colour(".hit .score", "color"), colour(".hit", "backgroundColor")) >= 4.5
        for control in ("#drop", "fieldset", "#k", ".hit"):  # borders of controls: 3:1 (WCAG 1.4.11)
            assert contrast(colour(control, "borderTopColor"), paper) >= 3, control
    finally:
        page.close()


@pytest.mark.parametrize("width_name", list(VIEWPORTS))
def test_result_grid_fits_desktop_and_phone(browser, base_url: str, tmp_path: Path, width_name: str) -> None:
    viewport = VIEWPORTS[width_name]
    page = open_search_page(browser, base_url, viewport)
    try:
        page.set_input_files("input[type=file]", str(query_file(tmp_path)))
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 10")
        _scroll_to_last_hit(page)
        page.wait_for_function(ALL_LOADED)
        boxes = [hit.bounding_box() for hit in page.locator("#results .hit").all()]
        assert all(box["width"] > 50 and box["height"] > 50 for box in boxes)
        assert all(box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"] for box in boxes)
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]  # no sideways scroll
        assert len({round(box["x"]) for box in boxes}) >= 2, "the grid has columns even on a phone"

        shot = SCREENSHOTS / f"retrieval-search-page-{width_name}.png"
        page.screenshot(path=str(shot), full_page=True)
        image = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float32)
        assert image.shape[1] == viewport["width"]
        grid = page.locator("#results").bounding_box()
        scroll = page.evaluate("window.scrollY")
        top, left = int(grid["y"] + scroll), int(grid["x"])
        region = image[top : top + int(grid["height"]), left : left + int(grid["width"])]
        assert region.size and region.std() > 20, "the grid area of the screenshot is blank"

        long_label = "Black_footed_Albatross_over_the_north_Pacific_at_dawn_" * 2  # wraps, is never cut
        label = page.locator("#results .hit .label").first
        label.evaluate("(e, text) => { e.textContent = text; }", long_label)
        size = label.evaluate(
            "e => [e.scrollWidth, e.clientWidth, e.clientHeight, parseFloat(getComputedStyle(e).fontSize)]"
        )
        assert size[0] <= size[1] and size[2] > 3 * size[3]  # no overflow; several lines tall
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    finally:
        page.close()


def _scroll_to_last_hit(page) -> None:
    """Thumbnails load lazily: on a small phone the last cards lie beyond the distance the browser loads ahead."""
    page.locator("#results .hit").last.scroll_into_view_if_needed()


def _url(page) -> str:
    return page.evaluate("location.pathname + location.search")


def _wait_query(page, query: str) -> None:
    page.wait_for_function(f"document.getElementById('results').dataset.query === '{query}'")
    page.wait_for_function("document.getElementById('results-section').getAttribute('aria-busy') === 'false'")


def test_keyboard_only_each_search_is_a_url_and_back_goes_back(browser, base_url: str, tmp_path: Path) -> None:
    """Tab to the file input, choose with Enter, Tab to a result, Enter: each search is a URL; the clicked result
    is gone with the old results, so the focus lands on the new results' summary (the next Tab is the first
    result), and Back and Forward step through the searches."""
    query = query_file(tmp_path)
    page = open_search_page(browser, base_url)
    choosers: list[FileChooser] = []
    page.on("filechooser", lambda chooser: choosers.append(chooser))  # intercepted once listened for: before any key
    try:
        for _ in range(12):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == "file":
                break
        assert page.evaluate("document.activeElement.id") == "file"
        _open_chooser_by_keyboard(page, choosers).set_files(str(query))
        _wait_query(page, "file")
        uploaded = shown_ids(page)
        assert uploaded == api_ids(
            base_url, "/search", params={"k": 10}, files={"image": ("q.png", query.read_bytes())}
        )
        assert _url(page) == "/?q=upload" and page.evaluate("document.activeElement.id") == "file"

        for _ in range(12):  # on through the options to the first result, then Enter searches by it
            page.keyboard.press("Tab")
            if page.evaluate("!!document.activeElement.closest('.hit')"):
                break
        assert page.evaluate("document.activeElement.closest('.hit').dataset.id") == str(uploaded[0])
        page.keyboard.press("Enter")
        _wait_query(page, f"item:{uploaded[0]}")
        assert _url(page) == f"/?item={uploaded[0]}" and page.evaluate("document.activeElement.id") == "timings"
        similar = shown_ids(page)
        page.keyboard.press("Tab")  # from the summary straight to the new first result
        assert page.evaluate("document.activeElement.closest('.hit').dataset.id") == str(similar[0])
        assert similar == api_ids(base_url, f"/items/{uploaded[0]}/similar", params={"k": 10})

        page.go_back()  # the upload search again, from the file this page still holds
        _wait_query(page, "file")
        assert _url(page) == "/?q=upload" and shown_ids(page) == uploaded and page.is_visible("#preview")
        page.go_forward()
        _wait_query(page, f"item:{uploaded[0]}")
        assert shown_ids(page) == similar

        page.reload()  # an upload cannot come back from a URL alone: the page says so
        page.go_back()
        page.wait_for_selector("#error:not([hidden])")
        assert "choose it again" in page.text_content("#error") and shown_ids(page) == []
        assert page.blocked == []
    finally:
        page.close()


def _open_chooser_by_keyboard(page, choosers: list[FileChooser], presses: int = 3) -> FileChooser:
    """Space on the focused file input opens its chooser; on a busy machine a press can be lost before the
    browser acts on it (a full run at load 3-5 once waited 30 s for one), so the key is pressed again, up to
    ``presses`` times, 20 s apart: still the keyboard alone, never a click or a direct set_input_files."""
    for _ in range(presses):
        page.keyboard.press("Space")  # a file input opens its chooser on Space (and Enter)
        for _ in range(200):
            if choosers:
                return choosers[0]
            page.wait_for_timeout(100)  # lets the page's events, the chooser among them, arrive
        assert page.evaluate("document.activeElement.id") == "file"  # the focus never left the input
    raise AssertionError(f"no file chooser opened after {presses} presses of Space on the file input")


def test_an_item_url_opens_its_search_with_its_options(browser, base_url: str) -> None:
    page = offline_page(browser)
    try:
        page.goto(f"{base_url}/?item=5&k=4&index=binary")
        _wait_query(page, "item:5")
        assert shown_ids(page) == api_ids(base_url, "/items/5/similar", params={"k": 4, "index": "binary"})
        assert page.input_value("#k") == "4" and page.is_checked("input[name=index][value=binary]")
        assert "item #5" in page.text_content("#query-name")
        assert page.get_attribute("#query-link", "href") == "/items/5/image" and page.is_visible("#query-link")
        entries = page.evaluate("history.length")
        page.fill("#k", "3")  # another option: the same search, the URL follows (no new history entry)
        page.dispatch_event("#k", "change")
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 3")
        assert _url(page) == "/?item=5&k=3&index=binary" and page.evaluate("history.length") == entries
    finally:
        page.close()


def test_filter_box_timings_and_the_full_image(browser, base_url: str, tmp_path: Path) -> None:
    query = query_file(tmp_path)
    upload = {"image": ("q.png", query.read_bytes())}
    page = open_search_page(browser, base_url)
    try:
        page.set_input_files("input[type=file]", str(query))
        _wait_query(page, "file")
        third = httpx.get(f"{base_url}/items/{shown_ids(page)[2]}").json()
        page.fill("#filter-label", third["label"])
        page.press("#filter-label", "Enter")
        page.wait_for_function("location.search.includes('label=')")
        page.wait_for_function("document.getElementById('results-section').getAttribute('aria-busy') === 'false'")
        where = json.dumps({"label": third["label"]})
        assert shown_ids(page) == api_ids(base_url, "/search", params={"k": 10, "filter": where}, files=upload)
        labels = page.eval_on_selector_all("#results .label", "els => els.map(e => e.textContent)")
        assert labels and set(labels) == {third["label"]}

        page.fill("#filter-meta", f"n={third['metadata']['n']}")  # a number matches the number stored
        page.press("#filter-meta", "Enter")
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 1")
        assert shown_ids(page) == [third["id"]] and "meta=n" in _url(page)
        page.fill("#filter-meta", "shop")  # not key=value: said at once, nothing sent
        page.press("#filter-meta", "Enter")
        page.wait_for_selector("#error:not([hidden])")
        assert "is not key=value" in page.text_content("#error")
        page.fill("#filter-meta", "")
        page.fill("#filter-label", "")
        page.press("#filter-label", "Enter")
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 10")

        upload_timings = page.text_content("#timings")
        assert "decode" in upload_timings and "embed" in upload_timings
        assert page.is_hidden("#query-link")  # an upload has no stored image to open
        first = page.locator("#results .hit").first
        link = first.locator(".open")
        hit = httpx.get(f"{base_url}/items/{shown_ids(page)[0]}").json()
        assert link.get_attribute("href") == hit["image_url"] and link.text_content() == Path(hit["path"]).name
        assert hit["path"] in link.get_attribute("title")
        full = httpx.get(base_url + hit["image_url"])
        assert full.status_code == 200 and full.content == Path(hit["path"]).read_bytes()

        first.locator(".hit-button").click()
        _wait_query(page, f"item:{hit['id']}")
        timings = page.text_content("#timings")  # an item query embeds nothing: only its search is timed
        assert "decode" not in timings and "embed" not in timings and "search" in timings
        assert not re.search(r"search 0(\.0)? ms", timings), timings
        assert page.is_hidden("#error") and page.blocked == []
    finally:
        page.close()


def test_labels_wrap_between_words_and_a_small_phone_reaches_every_control(
    browser, base_url: str, tmp_path: Path
) -> None:
    viewport = VIEWPORTS["small phone"]
    page = open_search_page(browser, base_url, viewport)
    try:
        page.set_input_files("input[type=file]", str(query_file(tmp_path)))
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 10")
        _scroll_to_last_hit(page)
        page.wait_for_function(ALL_LOADED)
        controls = ["#drop", "#k", "#filter-label", "#filter-meta", "#results .hit button", "#results .hit .open"]
        for selector in controls:
            box = page.locator(selector).first.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], selector
            assert box["height"] >= 18, selector  # big enough to tap
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]

        # a long label in a tile wraps only after its separators: no word is split across lines
        label = page.locator("#results .hit .label").first
        label.evaluate("e => e.replaceChildren(...labelPieces('001.Black_footed_Albatross_over_the_north_Pacific'))")
        words, height = label.evaluate(LINES_PER_WORD)
        fits = label.evaluate("e => e.scrollWidth <= e.clientWidth")
        assert [word for word, _ in words] == [
            "001.",
            "Black_",
            "footed_",
            "Albatross_",
            "over_",
            "the_",
            "north_",
            "Pacific",
        ]
        assert all(lines == 1 for _, lines in words), words  # each word on one line
        assert fits and height > 40  # wrapped over several lines, inside the tile
    finally:
        page.close()


def _options(page) -> list[str]:
    return page.eval_on_selector_all("#label-suggestions option", "els => els.map(e => e.value)")


def test_the_query_name_wraps_its_label_between_words_as_the_tiles_do(browser, base_url: str, tmp_path: Path) -> None:
    """After a click on a tile the query is named "item #ID · LABEL": on a small phone that label wraps
    after its separators, never inside a word (docs/serving.md), and no text on the page breaks anywhere."""
    page = open_search_page(browser, base_url, VIEWPORTS["small phone"])
    try:
        name = "item #12 · 001.Black_footed_Albatross_over_the_north_Pacific"
        page.evaluate("name => showPreview('', name, null)", name)
        words, height = page.eval_on_selector("#query-name", LINES_PER_WORD)
        assert "".join(word for word, _ in words) == name and words[-2:] == [["north_", 1], ["Pacific", 1]]
        assert all(lines == 1 for _, lines in words), words  # each word on one line
        assert height > 30  # wrapped over several lines
        anywhere = page.evaluate(
            "[...document.querySelectorAll('*')].filter(e => getComputedStyle(e).overflowWrap === 'anywhere')"
            ".map(e => e.id || e.className).filter(name => /query-name|error|label/.test(name))"
        )
        assert anywhere == []  # the error box names labels too
    finally:
        page.close()


def test_the_label_box_suggests_labels_as_one_types(browser, base_url: str) -> None:
    """The filter box's datalist holds the labels starting with what is typed (any case), as GET /labels
    counts them, most items first; picking one searches with it."""
    everything = httpx.get(base_url + "/labels").json()["values"]
    page = open_search_page(browser, base_url)
    try:
        page.click("#filter-label")  # focus alone: the most common labels
        page.wait_for_function(f"document.querySelectorAll('#label-suggestions option').length === {len(everything)}")
        assert _options(page) == [value["value"] for value in everything]
        label = everything[-1]["value"]
        page.type("#filter-label", label.upper())  # any case
        page.wait_for_function("document.querySelectorAll('#label-suggestions option').length === 1")
        option = page.locator("#label-suggestions option")
        count = next(value["count"] for value in everything if value["value"] == label)
        assert option.get_attribute("value") == label and option.get_attribute("label") == f"{count} items"
        page.fill("#filter-label", "no such label")
        page.wait_for_function("document.querySelectorAll('#label-suggestions option').length === 0")
        assert page.is_hidden("#error") and page.blocked == []
    finally:
        page.close()


def test_next_page_and_a_k_above_the_maximum(browser, base_url: str, tmp_path: Path) -> None:
    """Next / Previous page step through the ranking with offset (the API's pages, in the URL); a k above
    the server's k_max is capped in the field with a note, and the search runs instead of failing."""
    query = query_file(tmp_path)
    upload = {"image": ("q.png", query.read_bytes())}
    page = open_search_page(browser, base_url)
    try:
        assert page.is_hidden("#pager")
        page.fill("#k", "4")
        page.press("#k", "Tab")  # k's change event now, not when the click on Next page takes the focus
        page.set_input_files("input[type=file]", str(query))
        _wait_query(page, "file")
        first = shown_ids(page)
        assert first == api_ids(base_url, "/search", params={"k": 4}, files=upload)
        assert page.is_visible("#pager") and page.is_disabled("#prev-page") and page.is_enabled("#next-page")
        page.click("#next-page")
        page.wait_for_function("location.search.includes('offset=4')")
        page.wait_for_function("document.getElementById('page-info').textContent === 'results 5–8'")
        second = shown_ids(page)
        assert second == api_ids(base_url, "/search", params={"k": 4, "offset": 4}, files=upload)
        assert not set(first) & set(second) and page.is_enabled("#prev-page")
        page.click("#prev-page")
        page.wait_for_function("document.getElementById('page-info').textContent === 'results 1–4'")
        assert shown_ids(page) == first and "offset=" not in _url(page)

        k_max = httpx.get(base_url + "/readyz").json()["k_max"]
        page.click("#next-page")  # then a new k: the ranking from its first page again
        page.wait_for_function("document.getElementById('page-info').textContent === 'results 5–8'")
        page.fill("#k", "500")
        page.dispatch_event("#k", "change")
        page.wait_for_function(f"document.getElementById('k').value === '{k_max}'")
        expected = api_ids(base_url, "/search", params={"k": k_max}, files=upload)
        page.wait_for_function(f"document.querySelectorAll('#results .hit').length === {len(expected)}")
        assert shown_ids(page) == expected and len(expected) == min(k_max, GALLERY_SIZE)
        assert page.is_hidden("#error") and f"At most {k_max} results" in page.text_content("#k-note")
        assert page.is_disabled("#next-page")  # fewer than k: the last page
        page.fill("#k", "5")
        page.dispatch_event("#k", "change")
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 5")
        assert page.is_hidden("#k-note")

        page.goto(f"{base_url}/?item={first[0]}&k=500&offset=5")  # a URL's k is capped too, its page kept
        _wait_query(page, f"item:{first[0]}")
        assert page.input_value("#k") == str(k_max) and page.is_visible("#k-note")
        similar = api_ids(base_url, f"/items/{first[0]}/similar", params={"k": k_max, "offset": 5})
        assert shown_ids(page) == similar
        assert page.is_hidden("#error") and page.blocked == []
    finally:
        page.close()


def test_the_k_cap_is_the_servers_k_max(browser, tiny_index_template: Path, tmp_path: Path) -> None:
    """The page learns k_max from /readyz: a server with k_max 7 caps the field at 7, also for a URL's k."""
    with running_server(tiny_index_template, k_max=7) as base:
        page = offline_page(browser)
        try:
            first = api_ids(
                base, "/search", params={"k": 7}, files={"image": ("q.png", query_file(tmp_path).read_bytes())}
            )
            page.goto(f"{base}/?item={first[0]}&k=50")
            _wait_query(page, f"item:{first[0]}")
            page.wait_for_function("document.getElementById('k').value === '7'")
            assert shown_ids(page) == api_ids(base, f"/items/{first[0]}/similar", params={"k": 7})
            assert "At most 7 results" in page.text_content("#k-note") and page.is_hidden("#error")
            assert page.blocked == []
        finally:
            page.close()


def test_a_hit_shows_its_key(browser, tiny_index_template: Path, tmp_path: Path) -> None:
    """An item added with the user's own key shows it under its label; keyless items show none."""
    index = tmp_path / "keyed"
    shutil.copytree(tiny_index_template, index)
    with IndexStore.open(index) as store:
        (keyed,) = store.add(
            [ImageRecord(tmp_path / "sku.png", "class_0", key="SKU-0042/blue")], store.embeddings_of([1])
        )
    with running_server(index) as base:
        page = offline_page(browser)
        try:
            page.goto(f"{base}/?item=1&k=5")
            _wait_query(page, "item:1")
            assert shown_ids(page)[0] == keyed  # the copy of item 1 comes first
            keys = page.eval_on_selector_all(
                "#results .hit", "els => els.map(e => e.querySelector('.item-key')?.textContent ?? null)"
            )
            assert keys == ["SKU-0042/blue"] + [None] * (len(keys) - 1)
            assert page.blocked == []
        finally:
            page.close()


def test_the_page_says_why_a_filter_found_nothing(browser, base_url: str, tmp_path: Path) -> None:
    """No results under a label no item has: a note naming it and the labels that start with it; a metadata
    key no item has: the API's warning."""
    page = open_search_page(browser, base_url)
    try:
        page.set_input_files("input[type=file]", str(query_file(tmp_path)))
        _wait_query(page, "file")
        assert page.is_hidden("#filter-note")
        page.fill("#filter-label", "class")  # a prefix, not a label: the filter is exact
        page.press("#filter-label", "Enter")
        page.wait_for_selector("#filter-note:not([hidden])")
        assert shown_ids(page) == []
        expected = [v["value"] for v in httpx.get(base_url + "/labels", params={"prefix": "class"}).json()["values"]]
        note = page.text_content("#filter-note")
        assert (
            note
            == f'No item has the label "class" (the label must match exactly). Labels starting with it: {", ".join(expected[:5])}.'
        )
        page.fill("#filter-label", "")
        page.fill("#filter-meta", "colour=red")
        page.press("#filter-meta", "Enter")
        page.wait_for_function("document.getElementById('filter-note').textContent.includes('colour')")
        assert "no item has the metadata key 'colour'; the keys in use: n" in page.text_content("#filter-note")
        page.fill("#filter-meta", "")
        page.press("#filter-meta", "Enter")
        page.wait_for_function("document.querySelectorAll('#results .hit').length === 10")
        assert page.is_hidden("#filter-note") and page.is_hidden("#error") and page.blocked == []
    finally:
        page.close()


def test_a_text_box_beside_the_drop_zone_only_for_a_model_with_a_text_tower(
    browser, base_url: str, text_index_template: Path
) -> None:
    """Words typed in the text box search as POST /search with text does; the URL names them; a model
    without a text tower shows no box."""
    page = open_search_page(browser, base_url)
    try:
        assert page.is_hidden("#text-form")
    finally:
        page.close()
    with running_server(text_index_template) as base:
        page = open_search_page(browser, base)
        try:
            page.wait_for_selector("#text-form", state="visible")
            page.fill("#text-query", "red pickup truck")
            page.press("#text-query", "Enter")
            _wait_query(page, "text:red pickup truck")
            expected = api_ids(base, "/search", data={"text": "red pickup truck"})
            assert shown_ids(page) == expected
            assert "text=red+pickup+truck" in page.url and "embed" in page.text_content("#timings")
            assert page.is_hidden("#error") and page.blocked == []
        finally:
            page.close()
