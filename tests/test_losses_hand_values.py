"""Loss values recomputed by hand with explicit loops over a handful of 2-D points."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses as pml

from retrieval.training.losses import NormalizedSoftmaxLoss, build_loss

ANGLES = [0.0, 20.0, 45.0, 70.0, 100.0, 130.0, 200.0, 260.0]
LABELS = [0, 0, 0, 1, 1, 1, 2, 2]


def _points() -> list[tuple[float, float]]:
    return [(math.cos(math.radians(a)), math.sin(math.radians(a))) for a in ANGLES]


def _tensors() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(_points(), dtype=torch.float64), torch.tensor(LABELS)


def _dist(a, b) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def _mean_nonzero(values: list[float]) -> float:
    kept = [v for v in values if v > 0]
    return sum(kept) / len(kept) if kept else 0.0


def test_contrastive_by_hand():
    pts, n = _points(), len(LABELS)
    pos, neg = [], []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            d = _dist(pts[i], pts[j])
            if LABELS[i] == LABELS[j]:
                pos.append(max(0.0, d - 0.1))
            else:
                neg.append(max(0.0, 0.9 - d))
    expected = _mean_nonzero(pos) + _mean_nonzero(neg)
    loss = build_loss("contrastive", num_classes=3, embedding_dim=2, params={"pos_margin": 0.1, "neg_margin": 0.9})
    assert loss(*_tensors()).item() == pytest.approx(expected, rel=1e-5)


def _triplets():
    pts, n = _points(), len(LABELS)
    for a in range(n):
        for p in range(n):
            if p == a or LABELS[p] != LABELS[a]:
                continue
            for q in range(n):
                if LABELS[q] != LABELS[a]:
                    yield _dist(pts[a], pts[p]), _dist(pts[a], pts[q])


@pytest.mark.parametrize("mining", ["all", "semihard", "hard"])
def test_triplet_by_hand(mining: str):
    margin = 0.3
    losses = []
    for d_ap, d_an in _triplets():
        gap = d_an - d_ap
        chosen = {"all": True, "semihard": 0 < gap <= margin, "hard": gap <= 0}[mining]
        if chosen:
            losses.append(max(0.0, d_ap - d_an + margin))
    expected = _mean_nonzero(losses)
    assert expected > 0
    loss = build_loss("triplet", num_classes=3, embedding_dim=2, params={"margin": margin, "mining": mining})
    assert loss(*_tensors()).item() == pytest.approx(expected, rel=1e-5)


def _normalized_softmax_by_hand(points, labels, weights, temperature, classes) -> float:
    total = 0.0
    for x, y in zip(points, labels):
        logits = {}
        for c in classes:
            w = weights[c]
            cos = (x[0] * w[0] + x[1] * w[1]) / (math.hypot(*x) * math.hypot(*w))
            logits[c] = cos / temperature
        total += -(logits[y] - math.log(sum(math.exp(v) for v in logits.values())))
    return total / len(labels)


WEIGHTS = [(2.0, 0.5), (-0.3, 1.0), (-1.0, -2.0), (0.7, -0.7), (0.1, 3.0)]


def _softmax_loss(class_ratio: float, weights=WEIGHTS) -> NormalizedSoftmaxLoss:
    loss = NormalizedSoftmaxLoss(len(weights), 2, temperature=0.5, class_ratio=class_ratio)
    with torch.no_grad():
        loss.weight.copy_(torch.tensor(weights))  # deliberately not unit norm
    return loss


def test_normalized_softmax_by_hand_with_all_classes():
    points = [(1.0, 0.2), (-0.5, 0.9), (0.3, -1.0), (0.0, 1.0)]
    labels = [0, 1, 2, 4]
    expected = _normalized_softmax_by_hand(points, labels, WEIGHTS, 0.5, range(len(WEIGHTS)))
    loss = _softmax_loss(1.0)
    value = loss(F.normalize(torch.tensor(points), dim=1), torch.tensor(labels))
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_normalized_softmax_with_class_ratio_one_equals_full_softmax_and_pml():
    generator = torch.Generator().manual_seed(0)
    embeddings = F.normalize(torch.randn(12, 8, generator=generator), dim=1)
    labels = torch.randint(0, 30, (12,), generator=generator)
    ours = NormalizedSoftmaxLoss(30, 8, temperature=0.05, class_ratio=1.0)
    full = F.cross_entropy(F.normalize(embeddings) @ F.normalize(ours.weight, dim=1).T / 0.05, labels)
    reference = pml.NormalizedSoftmaxLoss(30, 8, temperature=0.05)
    with torch.no_grad():
        reference.W.copy_(ours.weight.T)
    torch.testing.assert_close(ours(embeddings, labels), full)
    torch.testing.assert_close(ours(embeddings, labels), reference(embeddings, labels))


def test_class_subsampling_keeps_batch_classes_and_samples_the_right_number_of_others():
    loss = NormalizedSoftmaxLoss(20, 4, class_ratio=0.25)
    labels = torch.tensor([7, 1, 5, 1, 7, 7])
    seen_others: set[int] = set()
    for _ in range(40):
        classes = loss.scored_classes(labels).tolist()
        assert classes[:3] == [1, 5, 7]
        others = classes[3:]
        assert len(others) == math.ceil(0.25 * 17) == len(set(others))
        assert not set(others) & {1, 5, 7} and all(0 <= c < 20 for c in others)
        seen_others.update(others)
    assert seen_others == set(range(20)) - {1, 5, 7}  # the sample is random, not fixed
    loss.eval()
    assert loss.scored_classes(labels).tolist() == [1, 5, 7] + sorted(set(range(20)) - {1, 5, 7})


def test_subsampled_loss_by_hand_uses_exactly_the_scored_classes():
    weights = [(math.cos(k), math.sin(k)) for k in range(10)]
    loss = _softmax_loss(0.3, weights)
    points = [(1.0, 0.0), (0.6, 0.8), (-0.8, 0.6)]
    labels = [3, 8, 3]
    torch.manual_seed(11)
    classes = loss.scored_classes(torch.tensor(labels)).tolist()
    assert len(classes) == 2 + math.ceil(0.3 * 8)
    expected = _normalized_softmax_by_hand(points, labels, weights, 0.5, classes)
    torch.manual_seed(11)
    value = loss(torch.tensor(points), torch.tensor(labels))
    assert value.item() == pytest.approx(expected, rel=1e-5)
    full = _normalized_softmax_by_hand(points, labels, weights, 0.5, range(10))
    assert value.item() < full  # fewer negatives in the denominator


def _npairs_by_hand(points, labels, temperature: float) -> float:
    """Sohn's N-pairs as pml pairs it: per class, the first image is the anchor and the second its
    positive; each anchor's softmax runs over the N positives' dot products / temperature."""
    members: dict[int, list[int]] = {}
    for i, y in enumerate(labels):
        members.setdefault(y, []).append(i)
    pairs = [(m[0], m[1]) for _, m in sorted(members.items()) if len(m) >= 2]
    total = 0.0
    for k, (anchor, _) in enumerate(pairs):
        logits = [sum(a * b for a, b in zip(points[anchor], points[p])) / temperature for _, p in pairs]
        total += -(logits[k] - math.log(sum(math.exp(v) for v in logits)))
    return total / len(pairs)


@pytest.mark.parametrize("temperature", [1.0, 0.1])
def test_npairs_by_hand(temperature: float):
    expected = _npairs_by_hand(_points(), LABELS, temperature)
    loss = build_loss("npairs", num_classes=3, embedding_dim=2, params={"temperature": temperature})
    assert loss(*_tensors()).item() == pytest.approx(expected, rel=1e-5)


def test_npairs_temperature_lets_perfect_clusters_reach_zero_loss():
    # four classes on orthogonal axes, two identical images each: nothing left to learn
    embeddings = torch.eye(4, dtype=torch.float64).repeat_interleave(2, dim=0)
    labels = torch.arange(4).repeat_interleave(2)
    points, label_list = embeddings.tolist(), labels.tolist()

    def value(temperature: float) -> float:
        loss = build_loss("npairs", num_classes=4, embedding_dim=4, params={"temperature": temperature})
        return loss(embeddings, labels).item()

    unscaled = value(1.0)  # pml's N-pairs on unit vectors: log(1 + 3 / e) however good the clusters
    assert unscaled == pytest.approx(math.log(1 + 3 / math.e), rel=1e-6)  # losses run in fp32
    assert unscaled == pytest.approx(_npairs_by_hand(points, label_list, 1.0), rel=1e-6)
    values = [value(t) for t in (1.0, 0.5, 0.2, 0.1)]
    assert values == sorted(values, reverse=True)
    default = build_loss("npairs", num_classes=4, embedding_dim=4)(embeddings, labels).item()
    assert default == pytest.approx(_npairs_by_hand(points, label_list, 0.05), abs=1e-7)
    assert default < 1e-6


# 3-D points: the SNR distance divides by the anchor's variance over its components
SNR_POINTS = [
    (0.9, 0.1, -0.4),
    (0.8, 0.3, -0.5),
    (-0.2, 0.9, 0.4),
    (-0.1, 0.7, 0.7),
    (0.3, -0.8, 0.5),
    (0.5, -0.6, 0.6),
]
SNR_LABELS = [0, 0, 1, 1, 2, 2]


def _variance(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)  # unbiased, like torch.var


def _snr_contrastive_by_hand(points, labels, pos_margin: float, neg_margin: float) -> float:
    pos, neg = [], []
    for i, x in enumerate(points):
        for j, y in enumerate(points):
            if i == j:
                continue
            snr = _variance([a - b for a, b in zip(x, y)]) / _variance(list(x))
            if labels[i] == labels[j]:
                pos.append(max(0.0, snr - pos_margin))
            else:
                neg.append(max(0.0, neg_margin - snr))
    return _mean_nonzero(pos) + _mean_nonzero(neg)


@pytest.mark.parametrize("weight", [0.0, 0.3])
def test_snr_with_the_zero_mean_regulariser_by_hand(weight: float):
    points = [tuple(v / math.sqrt(sum(c * c for c in p)) for v in p) for p in SNR_POINTS]
    zero_mean = sum(abs(sum(p)) for p in points) / len(points)  # Yuan et al.: mean over the batch of |sum of h|
    expected = _snr_contrastive_by_hand(points, SNR_LABELS, 0.0, 1.0) + weight * zero_mean
    loss = build_loss("snr", num_classes=3, embedding_dim=3, params={"zero_mean_weight": weight})
    value = loss(torch.tensor(points, dtype=torch.float64), torch.tensor(SNR_LABELS)).item()
    assert zero_mean > 0.1 and value == pytest.approx(expected, rel=1e-6)


# class 0 has 4 images (2 support, 2 queries), classes 1 and 2 have 2 (1 + 1), class 3 one (left out)
PROTO_POINTS = [(1.0, 0.1), (0.3, 0.9), (0.9, -0.2), (0.8, 0.5), (-0.7, 0.6), (-0.9, 0.1), (0.2, -1.0), (-0.1, -0.8)]
PROTO_POINTS += [(0.6, 0.6)]
PROTO_LABELS = [0, 2, 0, 1, 2, 1, 0, 0, 3]


def _prototypical_by_hand(points, labels, temperature: float) -> float:
    members: dict[int, list[tuple[float, float]]] = {}
    for p, y in zip(points, labels):
        members.setdefault(y, []).append(p)
    episode = {y: ps for y, ps in members.items() if len(ps) >= 2}
    prototypes, queries = {}, []
    for y, ps in episode.items():
        support = ps[: len(ps) // 2]
        prototypes[y] = (sum(p[0] for p in support) / len(support), sum(p[1] for p in support) / len(support))
        queries += [(q, y) for q in ps[len(ps) // 2 :]]
    total = 0.0
    for q, y in queries:
        logits = {k: -((q[0] - c[0]) ** 2 + (q[1] - c[1]) ** 2) / temperature for k, c in prototypes.items()}
        total += -(logits[y] - math.log(sum(math.exp(v) for v in logits.values())))
    return total / len(queries)


@pytest.mark.parametrize("temperature", [1.0, 0.2])
def test_prototypical_by_hand(temperature: float):
    expected = _prototypical_by_hand(PROTO_POINTS, PROTO_LABELS, temperature)
    loss = build_loss("prototypical", num_classes=4, embedding_dim=2, params={"temperature": temperature})
    value = loss(torch.tensor(PROTO_POINTS, dtype=torch.float64), torch.tensor(PROTO_LABELS))
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_prototypical_ignores_the_image_of_a_single_image_class():
    loss = build_loss("prototypical", num_classes=4, embedding_dim=2)
    with_single = loss(torch.tensor(PROTO_POINTS), torch.tensor(PROTO_LABELS))
    without = loss(torch.tensor(PROTO_POINTS[:-1]), torch.tensor(PROTO_LABELS[:-1]))
    torch.testing.assert_close(with_single, without)


PROXIES = [(2.0, 0.5), (-0.3, 1.0), (-1.0, -2.0), (0.7, -0.7)]


def _proxy_triplet_by_hand(points, labels, proxies, margin: float) -> float:
    unit = [(p[0] / math.hypot(*p), p[1] / math.hypot(*p)) for p in proxies]
    total = 0.0
    for x, y in zip(points, labels):
        positive = _dist(x, unit[y])
        hardest = min(_dist(x, p) for k, p in enumerate(unit) if k != y)
        total += max(0.0, positive - hardest + margin)
    return total / len(labels)


@pytest.mark.parametrize("margin", [0.1, 0.5])
def test_proxy_triplet_by_hand(margin: float):
    points = [(1.0, 0.0), (0.6, 0.8), (-0.8, 0.6), (0.0, -1.0), (0.8, -0.6)]
    labels = [0, 1, 1, 2, 0]
    expected = _proxy_triplet_by_hand(points, labels, PROXIES, margin)
    assert expected > 0
    loss = build_loss("proxy_triplet", num_classes=4, embedding_dim=2, params={"margin": margin})
    with torch.no_grad():
        loss.proxies.copy_(torch.tensor(PROXIES))  # deliberately not unit norm
    value = loss(torch.tensor(points, dtype=torch.float64), torch.tensor(labels))
    assert value.item() == pytest.approx(expected, rel=1e-5)
