"""Config loading: unknown keys named, layers override in order, recipes are valid configs."""

from pathlib import Path

import pytest

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config import TrainConfig, build_config, read_yaml
from retrieval.training.recipes import recipe, recipe_names


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
    names = recipe_names()
    assert {"normsoftmax", "triplet", "multi_similarity", "proxy_anchor"} <= set(names)
    for name in names:
        cfg = build_config([(name, recipe(name))])
        assert isinstance(cfg, TrainConfig)
    assert build_config([("r", recipe("normsoftmax"))]).loss.params["temperature"] == 0.05
    assert build_config([("r", recipe("triplet"))]).loss.params["margin"] == 0.1


def test_unknown_recipe_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown recipe 'tripplet'; known recipes: .*triplet"):
        recipe("tripplet")


def test_config_hash_ignores_data_path_but_not_model() -> None:
    a = build_config([("a", {"data": {"path": "/x"}})])
    b = build_config([("b", {"data": {"path": "/y"}})])
    c = build_config([("c", {"model": {"embedding_dim": 64}})])
    assert a.config_hash() == b.config_hash() != c.config_hash()
