"""The page that learns, in a real browser: "More like this" / "Less like this" on a hit searches again with
the examples so far (the same hits as ``POST /search`` by those examples), and the state is the URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_fixtures import CHROMIUM
from serving_fixtures import running_server
from test_browser import _url, _wait_query, api_ids, offline_page, shown_ids

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install -y chromium)"),
]


@pytest.fixture(scope="module")
def base_url(tiny_index_template: Path):
    with running_server(tiny_index_template, show_paths=True) as base:
        yield base


def test_more_and_less_like_this_learn_and_the_url_keeps_the_state(browser, base_url: str) -> None:
    page = offline_page(browser)
    try:
        page.goto(f"{base_url}/?item=5&k=4")
        _wait_query(page, "item:5")
        first, second = shown_ids(page)[:2]
        page.click(f"#results .hit[data-id='{first}'] .more-like")
        _wait_query(page, f"examples:5,{first}|")
        assert _url(page) == f"/?positive=5%2C{first}&k=4"
        wanted = api_ids(base_url, "/search", params={"k": 4}, data={"positive": ["5", str(first)]})
        assert shown_ids(page) == wanted and not {5, first} & set(wanted)  # the examples are not shown
        shown = shown_ids(page)
        page.click(f"#results .hit[data-id='{shown[0]}'] .less-like")
        _wait_query(page, f"examples:5,{first}|{shown[0]}")
        data = {"positive": ["5", str(first)], "negative": [str(shown[0])]}
        assert shown_ids(page) == api_ids(base_url, "/search", params={"k": 4}, data=data)
        url = _url(page)
        page.goto(base_url + url)  # the URL alone restores the search
        _wait_query(page, f"examples:5,{first}|{shown[0]}")
        assert shown_ids(page) == api_ids(base_url, "/search", params={"k": 4}, data=data)
        page.go_back()
        _wait_query(page, f"examples:5,{first}|")
        assert page.blocked == [] and second is not None
    finally:
        page.close()
