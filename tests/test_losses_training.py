"""What the trainer relies on: gradients flow, fp32 under autocast, state_dict round trips."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F

from retrieval.training.losses import available_losses, build_loss, get_loss_spec

NAMES = [spec.name for spec in available_losses()]
NUM_CLASSES, DIM = 6, 16
PROXY_NAMES = ("proxy_nca", "proxy_anchor", "normalized_softmax", "cosface", "arcface", "soft_triple", "proxy_triplet")
WITH_PARAMETERS = [(name, {}) for name in PROXY_NAMES] + [
    ("margin", {}),
    ("margin", {"class_specific_beta": True}),
    ("group_loss", {}),
]
# pair losses that are not 0 on a batch without positives: these also push negative pairs apart on their own,
# and Group Loss adds its classifier head's cross-entropy
NONZERO_WITHOUT_POSITIVES = {"contrastive", "snr", "ranked_list", "group_loss"}


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """4 classes x 4 images, unit-norm embeddings loosely clustered by class.

    Clustered, because on purely random vectors every distance is about sqrt(2), and some
    losses are then flat in their parameters (the margin loss's beta gradient cancels).
    """
    generator = torch.Generator().manual_seed(seed)
    labels = torch.tensor([0, 2, 3, 5]).repeat_interleave(4)
    centres = torch.randn(NUM_CLASSES, DIM, generator=generator)
    noise = torch.randn(16, DIM, generator=generator)
    return F.normalize(centres[labels] + 1.5 * noise, dim=1), labels


@pytest.mark.parametrize("name", NAMES)
def test_forward_backward_gives_finite_nonzero_gradients(name: str):
    torch.manual_seed(0)
    loss = build_loss(name, num_classes=NUM_CLASSES, embedding_dim=DIM)
    embeddings, labels = _batch()
    embeddings.requires_grad_(True)
    value = loss(embeddings, labels)
    value.backward()
    assert value.ndim == 0 and torch.isfinite(value) and value.item() > 0
    assert torch.isfinite(embeddings.grad).all() and embeddings.grad.abs().sum() > 0
    for parameter in loss.loss_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all()
        assert parameter.grad.abs().sum() > 0


@pytest.mark.parametrize("name", [n for n in NAMES if get_loss_spec(n).family == "pair"])
def test_pair_losses_on_a_batch_without_positives_stay_finite(name: str):
    loss = build_loss(name, num_classes=NUM_CLASSES, embedding_dim=DIM)
    embeddings = _batch()[0][:6].clone().requires_grad_(True)
    value = loss(embeddings, torch.arange(6))  # every image its own class
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(embeddings.grad).all()
    if name not in NONZERO_WITHOUT_POSITIVES:
        assert value.item() == 0


def test_learnable_margin_beta_is_a_loss_parameter_with_gradient():
    loss = build_loss("margin", num_classes=NUM_CLASSES, embedding_dim=DIM, params={"nu": 0.1})
    (beta,) = loss.loss_parameters()
    embeddings, labels = _batch()
    torch.manual_seed(0)
    loss(embeddings, labels).backward()
    assert beta.grad is not None and beta.grad.abs().sum() > 0


@pytest.mark.parametrize("name", ["proxy_anchor", "normalized_softmax", "arcface", "soft_triple", "multi_similarity"])
def test_losses_compute_in_fp32_under_bf16_autocast(name: str):
    torch.manual_seed(0)
    loss = build_loss(name, num_classes=NUM_CLASSES, embedding_dim=DIM)
    layer = torch.nn.Linear(8, DIM)
    inputs = torch.randn(16, 8)
    labels = _batch()[1]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embeddings = layer(inputs)
        assert embeddings.dtype == torch.bfloat16  # what a model hands over under autocast
        value = loss(embeddings, labels)
    assert value.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in loss.loss_parameters())  # not cast in place
    expected = loss(embeddings.detach().float(), labels)
    torch.testing.assert_close(value.detach(), expected, rtol=1e-6, atol=1e-6)
    value.backward()
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()


def _value(loss, embeddings, labels) -> torch.Tensor:
    torch.manual_seed(5)  # same miner draws for both losses
    return loss(embeddings, labels).detach()


@pytest.mark.parametrize(("name", "params"), WITH_PARAMETERS, ids=[n + "-" + "-".join(p) for n, p in WITH_PARAMETERS])
def test_state_dict_round_trip(name: str, params: dict):
    embeddings, labels = _batch()
    torch.manual_seed(1)
    trained = build_loss(name, num_classes=NUM_CLASSES, embedding_dim=DIM, params=params)
    with torch.no_grad():  # move away from the initialisation, like a training step would
        for parameter in trained.loss_parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    buffer = io.BytesIO()
    torch.save(trained.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(2)
    resumed = build_loss(name, num_classes=NUM_CLASSES, embedding_dim=DIM, params=params)
    assert not torch.allclose(_value(resumed, embeddings, labels), _value(trained, embeddings, labels))
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    assert len(trained.state_dict()) == len(trained.loss_parameters())  # nothing but the parameters
    for key, tensor in trained.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], tensor)
    torch.testing.assert_close(_value(resumed, embeddings, labels), _value(trained, embeddings, labels))
