"""The page shows each hit's probability in words ("same class: 93 %") and its slider cuts the results as the
API's min_probability does (a real browser, as tests/test_browser.py runs it)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from browser_fixtures import CHROMIUM
from serving_fixtures import running_server
from test_browser import _wait_query, offline_page
from test_calibrated_search import calibrated_index  # noqa: F401  (the fixture)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install -y chromium)"),
]


def _api(base: str, path: str) -> dict:
    with urllib.request.urlopen(f"{base}{path}") as response:
        return json.load(response)


def test_the_page_shows_the_probability_and_its_slider_cuts_like_the_api(browser, calibrated_index: Path) -> None:  # noqa: F811
    with running_server(calibrated_index) as base:
        page = offline_page(browser)
        try:
            page.goto(f"{base}/?item=1&k=10")
            _wait_query(page, "item:1")
            words = page.eval_on_selector_all("#results .probability", "els => els.map(e => e.textContent)")
            expected = _api(base, "/items/1/similar?k=10")["results"]
            assert words == [f"same class: {round(hit['probability'] * 100)} %" for hit in expected]
            assert page.is_visible("#cutoff")
            cut = round(expected[4]["probability"] * 100) // 5 * 5  # the slider moves in steps of 5 %
            page.eval_on_selector(
                "#min-probability", f"el => {{ el.value = '{cut}'; el.dispatchEvent(new Event('change')); }}"
            )
            kept = _api(base, f"/items/1/similar?k=10&min_probability={cut / 100}")["results"]
            page.wait_for_function(f"document.querySelectorAll('#results .hit').length === {len(kept)}")
            shown = page.eval_on_selector_all("#results .hit", "els => els.map(e => Number(e.dataset.id))")
            assert shown == [hit["id"] for hit in kept] and len(kept) < 10
            assert page.blocked == []
        finally:
            page.close()
