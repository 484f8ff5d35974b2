"""Facility-location structured clustering loss (Oh Song et al., CVPR 2017), worked out by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.losses import build_loss
from retrieval.training.losses.native.facility_location import (
    augmented_greedy_medoids,
    pairwise_distances,
    refine_medoids,
)

# a, b of class 0 and c, d of class 1 on a line and just off it:
# d(a,b) = 2, d(a,c) = 3, d(a,d) = sqrt(10), d(b,c) = 1, d(b,d) = sqrt(2), d(c,d) = 1
POINTS = [(0.0, 0.0), (2.0, 0.0), (3.0, 0.0), (3.0, 1.0)]
LABELS = [0, 0, 1, 1]


def _dist(p, q) -> float:
    return math.hypot(p[0] - q[0], p[1] - q[1])


def _nmi(true: list[int], pred: list[int]) -> float:
    """2 I(Y; C) / (H(Y) + H(C)) from the counts (the definition in Oh Song et al.)."""
    n = len(true)

    def entropy(values):
        return -sum(values.count(v) / n * math.log(values.count(v) / n) for v in set(values))

    mutual = 0.0
    for y, c in itertools.product(set(true), set(pred)):
        joint = sum(1 for t, p in zip(true, pred) if t == y and p == c) / n
        if joint > 0:
            mutual += joint * math.log(joint / (true.count(y) / n * pred.count(c) / n))
    h_true, h_pred = entropy(true), entropy(pred)
    if h_true == 0 and h_pred == 0:
        return 1.0
    return 2 * mutual / (h_true + h_pred)


def _facility(points, medoids) -> float:
    return -sum(min(_dist(p, points[m]) for m in medoids) for p in points)


def _assignment(points, medoids) -> list[int]:
    # ties go to the earlier medoid; a medoid is its own cluster
    return [
        medoids.index(i) if i in medoids else min(range(len(medoids)), key=lambda k: _dist(p, points[medoids[k]]))
        for i, p in enumerate(points)
    ]


def _greedy_by_hand(points, labels, gamma) -> list[int]:
    chosen: list[int] = []
    for _ in set(labels):
        scores = {
            c: _facility(points, chosen + [c]) + gamma * (1 - _nmi(labels, _assignment(points, chosen + [c])))
            for c in range(len(points))
            if c not in chosen
        }
        chosen.append(max(scores, key=lambda c: (scores[c], -c)))  # first of equal scores, like argmax
    return chosen


def _refine_by_hand(points, labels, medoids, gamma, rounds) -> list[int]:
    """Per cluster (members fixed for the round), the member with the best within-cluster score + margin."""
    medoids = list(medoids)
    for _ in range(rounds):
        clusters = _assignment(points, medoids)
        for k in range(len(medoids)):
            members = [i for i, c in enumerate(clusters) if c == k]
            best, best_score = medoids[k], -math.inf
            for j in members:
                swapped = medoids[:k] + [j] + medoids[k + 1 :]
                score = -sum(_dist(points[i], points[j]) for i in members)
                score += gamma * (1 - _nmi(labels, _assignment(points, swapped)))
                if score > best_score:
                    best, best_score = j, score
            medoids[k] = best
    return medoids


def _loss_by_hand(points, labels, gamma, rounds=5) -> float:
    medoids = _refine_by_hand(points, labels, _greedy_by_hand(points, labels, gamma), gamma, rounds)
    truth = 0.0
    for label in set(labels):
        members = [p for p, y in zip(points, labels) if y == label]
        truth += max(-sum(_dist(p, m) for p in members) for m in members)
    augmented = _facility(points, medoids) + gamma * (1 - _nmi(labels, _assignment(points, medoids)))
    return max(0.0, augmented - truth)


def _loss(points, labels, gamma: float, rounds: int = 5) -> float:
    params = {"gamma": gamma, "pam_iterations": rounds}
    loss = build_loss("facility_location", num_classes=2, embedding_dim=2, params=params)
    return loss(torch.tensor(points, dtype=torch.float64), torch.tensor(labels)).item()


def test_greedy_loss_augmented_inference_worked_out():
    distances = pairwise_distances(torch.tensor(POINTS, dtype=torch.float64)).numpy()
    # step 1 (one cluster, NMI 0 for every candidate): F({b}) = -(2 + 1 + sqrt 2) is the largest
    # step 2: F({b, a}) = -(1 + sqrt 2) with clusters {a}, {b, c, d} (NMI 0.344) beats
    #         F({b, c}) = -3 with the true clusters (NMI 1): -2.414 + 0.656 > -3 + 0
    assert augmented_greedy_medoids(distances, np.array(LABELS), gamma=1.0) == [1, 0]
    assert _greedy_by_hand(POINTS, LABELS, 1.0) == [1, 0]


def test_greedy_inference_matches_the_hand_search_and_the_margin_changes_its_choice():
    generator = np.random.default_rng(0)
    labels = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    changed = 0
    for _ in range(10):
        points = [tuple(p) for p in generator.normal(size=(9, 2)).tolist()]
        distances = pairwise_distances(torch.tensor(points, dtype=torch.float64)).numpy()
        by_gamma = {}
        for gamma in (0.0, 3.0):
            by_gamma[gamma] = augmented_greedy_medoids(distances, np.array(labels), gamma)
            assert by_gamma[gamma] == _greedy_by_hand(points, labels, gamma)
            refined = refine_medoids(distances, np.array(labels), by_gamma[gamma], gamma, iterations=2)
            assert refined == _refine_by_hand(points, labels, by_gamma[gamma], gamma, 2)
        changed += by_gamma[0.0] != by_gamma[3.0]
    assert changed > 0  # the structured margin steers the search towards worse clusterings


def test_refinement_worked_out():
    distances = pairwise_distances(torch.tensor(POINTS, dtype=torch.float64)).numpy()
    # greedy [b, a]: clusters {b, c, d} and {a}. In the first, c scores -(1 + 0 + 1) + 0.656 and beats
    # b and d at -(1 + sqrt 2) + 0.656 (the clusters, hence the NMI, stay the same); {a} keeps a.
    assert refine_medoids(distances, np.array(LABELS), [1, 0], 1.0, iterations=5) == [2, 0]
    assert _refine_by_hand(POINTS, LABELS, [1, 0], 1.0, 5) == [2, 0]


@pytest.mark.parametrize(("rounds", "facility"), [(0, -(1 + math.sqrt(2))), (5, -2.0)])
def test_loss_value_by_hand(rounds: int, facility: float):
    # S* = [b, a] (greedy only) or [c, a] (refined), both clustering {a}, {b, c, d}: 1 - NMI = 0.656;
    # F~ = -(2 + 1): class 0's medoid a or b, class 1's c or d
    nmi = _nmi(LABELS, [0, 1, 1, 1])
    assert nmi == pytest.approx(0.3438, abs=1e-4)
    expected = facility + (1 - nmi) + 3
    assert expected == pytest.approx(_loss_by_hand(POINTS, LABELS, 1.0, rounds))
    assert _loss(POINTS, LABELS, 1.0, rounds) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 10.0])
def test_loss_equals_the_hand_computation_for_other_margins(gamma: float):
    assert _loss(POINTS, LABELS, gamma) == pytest.approx(_loss_by_hand(POINTS, LABELS, gamma), rel=1e-6)


def test_well_separated_classes_cost_nothing():
    points = [(0.0, 0.0), (0.1, 0.0), (5.0, 0.0), (5.0, 0.1), (0.0, 5.0), (0.1, 5.0)]
    labels = [0, 0, 1, 1, 2, 2]
    assert _loss(points, labels, 1.0) == 0.0
    assert _loss_by_hand(points, labels, 1.0) == 0.0


def test_gradient_flows_through_the_chosen_and_the_true_medoids():
    embeddings = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    loss = build_loss("facility_location", num_classes=2, embedding_dim=2)
    loss(embeddings, torch.tensor(LABELS)).backward()
    assert torch.isfinite(embeddings.grad).all() and embeddings.grad.abs().sum() > 0


def test_duplicate_embeddings_keep_the_gradient_finite():
    embeddings = torch.tensor([(1.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.6, 0.8)], requires_grad=True)
    loss = build_loss("facility_location", num_classes=2, embedding_dim=2)
    loss(embeddings, torch.tensor(LABELS)).backward()
    assert torch.isfinite(embeddings.grad).all()


def test_bad_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="gamma must be >= 0"):
        build_loss("facility_location", num_classes=2, embedding_dim=2, params={"gamma": -1.0})
    with pytest.raises(ConfigError, match="pam_iterations must be an integer >= 0"):
        build_loss("facility_location", num_classes=2, embedding_dim=2, params={"pam_iterations": -1})
