"""Config loading: unknown keys named, layers override in order, recipes are valid configs."""

from pathlib import Path

import pytest

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.recipes import recipe, recipe_registry
from retrieval.training.config.train_config import TrainConfig, build_config, read_yaml


def test_unknown_key_is_named_with_its_source(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("trainer:\n  epoch: 3\n")
    with pytest.raises(ConfigError, match=r"cfg.yaml: trainer.epoch: unknown key"):
        build_config([("recipe", {}), (str(config), read_yaml(config))])


def test_wrong_value_type_is_named() -> None:
    with pytest.raises(ConfigError, match=r"trainer.batch_size"):
        build_config([("cli", {"trainer": {"batch_size": "many"}})])


def test_later_layers_override_earlier_ones_key_by_key() -> None:
    cfg = build_config(
        [
            ("recipe", {"trainer": {"epochs": 5, "batch_size": 16}, "loss": {"name": "triplet"}}),
            ("cli", {"trainer": {"epochs": 2}}),
        ]
    )
    assert (cfg.trainer.epochs, cfg.trainer.batch_size, cfg.loss.name) == (2, 16, "triplet")


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_yaml(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("trainer: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_yaml(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        read_yaml(tmp_path / "list.yaml")


def test_every_recipe_builds_a_valid_config_for_its_loss() -> None:
    names = recipe_registry().names()
    assert {"normsoftmax", "triplet", "multi_similarity", "proxy_anchor"} <= set(names)
    for name in names:
        cfg = build_config([(name, recipe(name))])
        assert isinstance(cfg, TrainConfig)
    assert build_config([("r", recipe("normsoftmax"))]).loss.params["temperature"] == 0.05
    assert build_config([("r", recipe("triplet"))]).loss.params["margin"] == 0.1


def test_unknown_recipe_lists_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown recipe 'tripplet'; did you mean triplet.* known recipes: .*triplet"
    ):
        recipe("tripplet")


def test_config_hash_ignores_data_path_but_not_model() -> None:
    a = build_config([("a", {"data": {"path": "/x"}})])
    b = build_config([("b", {"data": {"path": "/y"}})])
    c = build_config([("c", {"model": {"embedding_dim": 64}})])
    assert a.config_hash() == b.config_hash() != c.config_hash()


def test_zhai_wu_recipe_is_the_papers_own_setup() -> None:
    # Zhai & Wu, BMVC 2019, section 5: ResNet50, a 2048-d layer after a LayerNorm without parameters,
    # temperature 0.05; one epoch training only the new parameters, then 30 epochs of everything at the
    # same learning rate (1e-2 for the BatchNorm ResNet50), SGD momentum 0.9, weight decay 1e-4, x0.1
    # at epoch 15; batches of 75 = 25 images of each of 3 classes (their Table 4's best).
    from retrieval.training.data_pipeline.batch_sampler import make_batch_sampler
    from retrieval.training.run.fitting.optim import lr_factor

    cfg = build_config([("recipe zhai_wu", recipe("zhai_wu"))])
    assert (cfg.model.backbone, cfg.model.embedding_dim, cfg.model.layer_norm) == ("resnet50", 2048, True)
    assert (cfg.loss.name, cfg.loss.params["temperature"], cfg.loss.params.get("class_ratio", 1.0)) == (
        "normalized_softmax",
        0.05,
        1.0,
    )
    optimizer = cfg.optimizer
    assert (optimizer.name, optimizer.momentum, optimizer.weight_decay) == ("sgd", 0.9, 1e-4)
    assert optimizer.lr == optimizer.head_lr == cfg.loss.lr == 1e-2  # "with the same learning rate"
    assert optimizer.grad_clip_norm is None
    assert (cfg.trainer.warm_start_epochs, cfg.trainer.epochs, cfg.trainer.batch_size) == (1, 31, 75)
    assert (cfg.data.sampler, cfg.data.images_per_class) == ("balanced", 25)
    sampler = make_batch_sampler(
        cfg.trainer.batch_size, cfg.data.images_per_class, [c for c in range(4) for _ in range(25)]
    )
    assert sampler.classes_per_batch == 3
    per_epoch = 2
    factors = [
        lr_factor(step, total_steps=31 * per_epoch, steps_per_epoch=per_epoch, cfg=cfg.schedule)
        for step in range(31 * per_epoch)
    ]
    epoch_factors = factors[::per_epoch]  # epoch 1 is the warm start, epochs 2..31 the paper's 30
    assert epoch_factors == pytest.approx([1.0] * 16 + [0.1] * 15)


def test_recipes_say_how_they_differ_from_the_paper() -> None:
    from retrieval.training.config.recipes import describe_recipe

    ours = describe_recipe("normsoftmax")
    assert ours == describe_recipe("normalized_softmax")
    assert all(word in ours for word in ("AdamW", "cosine", "zhai_wu", "shuffled"))
    assert "SGD" in describe_recipe("zhai_wu") and "75" in describe_recipe("zhai_wu")
    assert "multi_similarity" in describe_recipe("ms")
