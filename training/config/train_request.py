"""``TrainRequest``: one call of ``retrieval train`` or the Python API's ``train()``, in config terms.

The CLI and the Python API both describe what they were asked as a ``TrainRequest`` and hand it to
``config_resolver.resolve_config``; the layers and the rules between options are written here once.
Torch-free, so the CLI can refuse a bad key before torch loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.indexing.common.artifact_names import RUN_CONFIG_NAME
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import TrainConfig, parse_set, read_yaml


@dataclass(frozen=True)
class Spelling:
    """How an entry point writes the names in its error messages (``--final-fit`` or ``final_fit=True``)."""

    options: str  # the name of the options' layer in a validation error
    ensemble: str
    final_fit: str
    split_none: str
    run_dir: tuple[str, str] = ("--resume", "--overwrite")  # how to continue or replace an existing run


CLI = Spelling("command-line options", "--ensemble", "--final-fit", "--split none")
API = Spelling(
    "arguments", "train_ensemble()", "trainer.final_fit", "data.split='none'", ("resume=True", "overwrite=True")
)


@dataclass(frozen=True)
class TrainRequest:
    """What was asked, layer by layer; the recipe's layer goes under all of them (``resolve_config``).

    ``options`` is the layer of the options given, already in sections (``{"trainer": {"epochs": 3}}``);
    ``resume_from`` the run directory whose saved config.yaml is read under everything else on resume;
    ``ensemble``: the run trains an ensemble, which refuses ``final_fit`` and ``split none``.
    The run itself (``training.usecases.run_train``): ``out`` the run directory, ``overwrite`` replaces
    the run it holds, ``members`` the ensemble's size (``--ensemble``), ``config`` a whole ``TrainConfig``
    taken as it is instead of the layers (the Python API's ``train(cfg, ...)``).
    """

    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    recipe: str | None = None
    config_file: Path | None = None
    assignments: tuple[str, ...] = ()
    resume_from: Path | None = None
    ensemble: bool = False
    spelling: Spelling = CLI
    out: Path | None = None
    overwrite: bool = False
    members: int | None = None
    config: TrainConfig | None = None

    @property
    def resume(self) -> bool:
        return self.resume_from is not None

    def layers(self) -> list[tuple[str, dict[str, Any]]]:
        """The layers after the recipe, in order: a resumed run's saved config (a final-fit run's is its
        first fit's, which holds the request), the config file, the options, ``--set``."""
        layers: list[tuple[str, dict[str, Any]]] = []
        if self.resume_from is not None and (saved := saved_config(self.resume_from)) is not None:
            layers.append((str(saved), read_yaml(saved)))
        if self.config_file is not None:
            layers.append((str(self.config_file), read_yaml(self.config_file)))
        layers.append((self.spelling.options, self.options))
        if self.assignments:
            layers.append(("--set", parse_set(list(self.assignments))))
        return layers


def saved_config(run_dir: Path) -> Path | None:
    """The config.yaml a resumed run reads: a final-fit run's first fit's (``selection/``), else its own."""
    return next((p for p in (run_dir / "selection" / RUN_CONFIG_NAME, run_dir / RUN_CONFIG_NAME) if p.is_file()), None)


def refuse_conflicts(cfg: TrainConfig, *, ensemble: bool, spelling: Spelling = CLI) -> None:
    """The rules between options: an ensemble trains on the class-disjoint split, so not with final fit
    or ``split none``."""
    if ensemble and (cfg.trainer.final_fit or cfg.data.split == "none"):
        raise ConfigError(
            f"{spelling.ensemble} trains on the class-disjoint split; "
            f"leave out {spelling.final_fit} and {spelling.split_none}"
        )
