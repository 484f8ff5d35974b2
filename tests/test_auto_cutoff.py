"""``cutoff=auto`` (``indexing.probability.cutoff``): the count that maximises the expected F1, by hand."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.probability.cutoff import auto_cutoff, auto_cutoff_rows


def _expected_f1(p: list[float], n: int) -> float:
    return 2 * sum(p[:n]) / (n + sum(p))


def test_auto_keeps_the_count_with_the_best_expected_f1() -> None:
    p = [0.9, 0.8, 0.1, 0.05]
    # by hand: n=1 1.8/2.85 = 0.632, n=2 3.4/3.85 = 0.883, n=3 3.6/4.85 = 0.742, n=4 3.7/5.85 = 0.632
    assert max(range(1, 5), key=lambda n: _expected_f1(p, n)) == 2
    assert auto_cutoff(np.array(p)) == 2


def test_a_page_of_likely_hits_is_kept_whole_and_min_probability_is_its_floor() -> None:
    assert auto_cutoff(np.array([0.9, 0.9, 0.9])) == 3
    assert auto_cutoff(np.array([0.9, 0.8, 0.1, 0.05]), floor=0.85) == 1
    assert auto_cutoff(np.array([0.4, 0.3]), floor=0.5) == 0
    assert auto_cutoff(np.array([])) == 0


def test_rows_are_cut_each_by_its_own_profile() -> None:
    mask = auto_cutoff_rows(np.array([[0.9, 0.8, 0.1, 0.05], [0.9, 0.9, 0.9, 0.9]]))
    assert mask.sum(1).tolist() == [2, 4]
