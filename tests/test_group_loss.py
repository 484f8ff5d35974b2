"""Group Loss (Elezi et al., ECCV 2020): the replicator step, the similarity, the loss and the recipe, by hand."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
import torch.nn.functional as F

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.recipes import describe_recipe, recipe
from retrieval.training.config.train_config import build_config
from retrieval.training.losses import build_loss, get_loss_spec
from retrieval.training.losses.native.group_loss import anchor_mask, pearson_similarity, replicator_step

W3 = [[0.0, 0.8, 0.1], [0.8, 0.0, 0.3], [0.1, 0.3, 0.0]]
X3 = [[1.0, 0.0], [0.5, 0.5], [0.3, 0.7]]  # sample 0 is an anchor of class 0


def _replicator_by_hand(w: list[list[float]], x: list[list[float]]) -> list[list[float]]:
    """x_il <- x_il * pi_il / sum_m x_im * pi_im, pi_il = sum_j w_ij x_jl (eq. 4 of the paper)."""
    n, m = len(x), len(x[0])
    support = [[sum(w[i][j] * x[j][lam] for j in range(n)) for lam in range(m)] for i in range(n)]
    rows = []
    for i in range(n):
        total = sum(x[i][mu] * support[i][mu] for mu in range(m))
        rows.append([x[i][lam] * support[i][lam] / total if total > 0 else x[i][lam] for lam in range(m)])
    return rows


def test_replicator_step_on_three_samples_by_hand():
    refined = replicator_step(torch.tensor(W3, dtype=torch.float64), torch.tensor(X3, dtype=torch.float64))
    expected = _replicator_by_hand(W3, X3)
    torch.testing.assert_close(refined, torch.tensor(expected, dtype=torch.float64))
    # written out: pi_1 = (0.8 + 0.3 * 0.3, 0.3 * 0.7) = (0.89, 0.21); x_1 * pi_1 = (0.445, 0.105)
    assert refined[1].tolist() == pytest.approx([0.445 / 0.55, 0.105 / 0.55])
    # pi_2 = (0.1 + 0.3 * 0.5, 0.3 * 0.5) = (0.25, 0.15); x_2 * pi_2 = (0.075, 0.105)
    assert refined[2].tolist() == pytest.approx([0.075 / 0.18, 0.105 / 0.18])
    assert refined[0].tolist() == [1.0, 0.0]  # a one-hot anchor stays one-hot
    assert refined.sum(dim=1).tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_a_row_without_support_keeps_its_assignment():
    w = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.5, 0.0]])
    x = torch.tensor(X3)
    refined = replicator_step(w, x)
    assert torch.isfinite(refined).all()
    assert refined[0].tolist() == X3[0]


def test_replicator_dynamics_increase_the_consistency_functional():
    """Baum-Eagon (paper eq. 8): F(X) = sum_ij sum_l w_ij x_il x_jl never decreases along the dynamics."""
    generator = torch.Generator().manual_seed(0)
    w = torch.rand(8, 8, generator=generator, dtype=torch.float64)
    w = (w + w.T) * (1 - torch.eye(8, dtype=torch.float64))
    x = torch.softmax(torch.randn(8, 3, generator=generator, dtype=torch.float64), dim=1)
    values = []
    for _ in range(6):
        values.append(float((w * (x @ x.T)).sum()))
        x = replicator_step(w, x)
    assert all(later >= earlier - 1e-12 for earlier, later in zip(values, values[1:]))
    assert values[-1] > values[0]


def _pearson(a: list[float], b: list[float]) -> float:
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    cov = sum((p - mean_a) * (q - mean_b) for p, q in zip(a, b))
    return cov / math.sqrt(sum((p - mean_a) ** 2 for p in a) * sum((q - mean_b) ** 2 for q in b))


EMBEDDINGS = [
    [0.9, 0.1, -0.3, 0.2],
    [0.8, 0.3, -0.4, 0.0],
    [0.7, -0.1, -0.2, 0.4],
    [-0.2, 0.9, 0.4, -0.1],
    [-0.1, 0.6, 0.7, 0.2],
    [0.1, 0.8, 0.3, -0.4],
]
LABELS = [0, 0, 0, 1, 1, 1]


def test_similarity_is_the_clamped_pearson_correlation_with_a_zero_diagonal():
    expected = [
        [0.0 if i == j else max(0.0, _pearson(a, b)) for j, b in enumerate(EMBEDDINGS)]
        for i, a in enumerate(EMBEDDINGS)
    ]
    similarity = pearson_similarity(torch.tensor(EMBEDDINGS, dtype=torch.float64))
    torch.testing.assert_close(similarity, torch.tensor(expected, dtype=torch.float64))
    assert any(_pearson(EMBEDDINGS[0], b) < 0 for b in EMBEDDINGS[3:])  # the clamp is exercised


def test_anchors_are_the_first_images_of_each_class_in_batch_order():
    labels = torch.tensor([3, 1, 3, 3, 1, 1, 5])
    assert anchor_mask(labels, 2).tolist() == [True, True, True, False, True, False, True]
    assert anchor_mask(labels, 0).tolist() == [False] * 7


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def _group_loss_by_hand(weight, bias, temperature, num_anchors, iterations, ce_weight) -> float:
    logits = [[sum(w * x for w, x in zip(row, e)) + b for row, b in zip(weight, bias)] for e in EMBEDDINGS]
    w = [
        [0.0 if i == j else max(0.0, _pearson(a, b)) for j, b in enumerate(EMBEDDINGS)]
        for i, a in enumerate(EMBEDDINGS)
    ]
    x, seen = [], {}
    for label, row in zip(LABELS, logits):
        seen[label] = seen.get(label, 0) + 1
        anchor = seen[label] <= num_anchors
        x.append([float(c == label) for c in range(len(bias))] if anchor else _softmax([v / temperature for v in row]))
    for _ in range(iterations):
        x = _replicator_by_hand(w, x)
    group = -sum(math.log(max(row[y], 1e-12)) for row, y in zip(x, LABELS)) / len(LABELS)
    head = -sum(math.log(_softmax(row)[y]) for row, y in zip(logits, LABELS)) / len(LABELS)
    return group + ce_weight * head


HEAD_WEIGHT = [[1.0, -0.5, 0.2, 0.0], [-0.3, 0.8, 0.1, 0.5], [0.2, 0.2, -0.6, 0.3]]
HEAD_BIAS = [0.1, 0.0, -0.2]


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 2.0, "num_anchors": 1, "iterations": 2, "ce_weight": 0.5},
        {"temperature": 24.0, "num_anchors": 2, "iterations": 1, "ce_weight": 1.0},
        {"temperature": 5.0, "num_anchors": 0, "iterations": 1, "ce_weight": 0.0},
    ],
)
def test_loss_value_on_a_tiny_batch_equals_a_straightforward_computation(params: dict):
    loss = build_loss("group_loss", num_classes=3, embedding_dim=4, params=params)
    with torch.no_grad():
        loss.head.weight.copy_(torch.tensor(HEAD_WEIGHT))
        loss.head.bias.copy_(torch.tensor(HEAD_BIAS))
    value = loss(torch.tensor(EMBEDDINGS), torch.tensor(LABELS))
    expected = _group_loss_by_hand(HEAD_WEIGHT, HEAD_BIAS, **params)
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_the_gradient_reaches_the_embeddings_through_the_similarity_and_the_priors():
    torch.manual_seed(0)
    loss = build_loss("group_loss", num_classes=3, embedding_dim=4, params={"ce_weight": 0.0, "temperature": 1.0})
    embeddings = F.normalize(torch.tensor(EMBEDDINGS), dim=1).requires_grad_(True)
    loss(embeddings, torch.tensor(LABELS)).backward()
    assert embeddings.grad is not None and embeddings.grad.abs().sum() > 0
    assert loss.head.weight.grad is not None and loss.head.weight.grad.abs().sum() > 0  # through the priors


def test_the_recipe_holds_the_authors_defaults_and_says_where_they_come_from():
    cfg = build_config([("recipe group_loss", recipe("group_loss"))])
    loss = build_loss(cfg.loss.name, num_classes=5, embedding_dim=8, params=cfg.loss.params)
    # dvl-tum/group_loss train.py, CUB-200: softmax_temperature 24, num_labeled_points_class 2, num_iter_gtg 1
    assert (loss.temperature, loss.num_anchors, loss.iterations, loss.ce_weight) == (24.0, 2, 1, 1.0)
    assert cfg.loss.lr == 1e-2 and type(loss).sampler == "balanced"
    described = describe_recipe("group_loss")
    for fact in ("dvl-tum/group_loss", "temperature 24", "2 anchors", "1 iteration", "6 classes x 9 images"):
        assert fact in described
    assert "Elezi" in get_loss_spec("group_loss").paper and "dvl-tum/group_loss" in get_loss_spec("group_loss").paper


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": 0.0}, "temperature must be > 0"),
        ({"num_anchors": -1}, "num_anchors must be an integer >= 0"),
        ({"iterations": 0}, "iterations must be an integer >= 1"),
        ({"ce_weight": -1.0}, "ce_weight must be >= 0"),
    ],
)
def test_bad_parameters_are_config_errors(params: dict, message: str):
    with pytest.raises(ConfigError, match=message):
        build_loss("group_loss", num_classes=3, embedding_dim=4, params=params)
