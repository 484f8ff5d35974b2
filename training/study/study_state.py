"""The study's output directory: what defines a study (``StudySpec``), its state file, resuming.

    OUT/
      study.json        the spec (the command line that made it) and the progress of every loss
      optuna.db         the searches (SQLite optuna storage, one optuna study per loss)
      search/           fine-tuning only: one run directory per trial and fold (checkpoints removed when done)
      final/LOSS/       seed_S.json per finished final run (k fold models: validation and test metrics);
                        fine-tuning also keeps seed_S/fold_I/ run directories with the best checkpoint
      features/         --cached-features: pooled backbone features, KEY.npy + KEY.json
      study.md, study.csv, study.png   the report

Rerunning the same command continues the study; a different one is refused unless ``--overwrite``
(which deletes everything above except the feature cache, which is keyed by its content).
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.option_vocabulary import keyword_layer
from retrieval.training.config.train_config import merge_dicts

STATE_FILE = "study.json"
OPTUNA_DB = "optuna.db"
REPORT_FILES = ("study.md", "study.csv", "study.png")
STUDY_DIRS = ("search", "final")
FEATURES_DIR = "features"
_OPTION_NAMES = {"overrides": "set"}  # spec field -> its command-line option


class StudySpec(BaseModel):
    """Everything on the command line that shapes the results (not --quiet or --overwrite)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str
    losses: list[str] = Field(min_length=1)
    folds: int = Field(4, ge=2)
    trials: int = Field(20, ge=1)
    seeds: int = Field(3, ge=1)
    seed: int = 0
    cached_features: bool = False
    options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="the config layer of the options that stand for config keys (--epochs: trainer.epochs), "
        "as `retrieval train` reads them",
    )
    overrides: list[str] = Field(default_factory=list, description="--set KEY=VALUE, in order")

    @classmethod
    def from_keywords(cls, **values: Any) -> StudySpec:
        """The spec from its own fields and options named after config keys (``epochs=4`` is
        ``trainer.epochs``; ``keyword_layer``), as the Python API's ``study()`` takes them."""
        own = {key: value for key, value in values.items() if key in cls.model_fields}
        layer = keyword_layer({key: value for key, value in values.items() if key not in cls.model_fields})
        return cls(**own, options=merge_dicts(own.pop("options", {}), layer))

    @property
    def protocol(self) -> str:
        return "cached-features" if self.cached_features else "fine-tune"

    def command(self, out: Path) -> str:
        """The ``retrieval study`` command line that makes (and continues) this study."""
        tokens = ["retrieval", "study", "--data", self.data, "--losses", ",".join(self.losses), "--out", str(out)]
        tokens += ["--folds", str(self.folds), "--trials", str(self.trials), "--seeds", str(self.seeds)]
        tokens += ["--seed", str(self.seed)] + (["--cached-features"] if self.cached_features else [])
        for section, values in self.options.items():
            for key, value in values.items():
                tokens += ["--set", f"{section}.{key}={json.dumps(value)}"]
        for assignment in self.overrides:
            tokens += ["--set", assignment]
        return shlex.join(tokens)


def resumable_state(out: Path, spec: StudySpec, *, overwrite: bool) -> dict[str, Any] | None:
    """The saved state of the same study in ``out`` to continue, None to start afresh (``start_study``);
    refuses another study's directory. Writes nothing, so it can run before the images are read."""
    path = Path(out) / STATE_FILE
    saved = None if overwrite else _read_state(path)
    if saved is not None:
        differences = _differences(saved.get("spec", {}), spec.model_dump(mode="json"))
        if differences:
            raise ConfigError(
                f"{out} holds a study made with other options ({'; '.join(differences)}); rerun the same command "
                "to continue it, choose another --out, or pass --overwrite to replace it"
            )
        return saved
    if not overwrite and (Path(out) / OPTUNA_DB).exists():
        raise ConfigError(f"{out} holds an optuna.db but no {STATE_FILE}; choose another --out or pass --overwrite")
    return None


def start_study(out: Path, spec: StudySpec) -> dict[str, Any]:
    """A fresh state in ``out``, replacing any earlier study's files there."""
    clear_study_dir(Path(out))
    state: dict[str, Any] = {"spec": spec.model_dump(mode="json"), "protocol": spec.protocol, "losses": {}}
    write_state(Path(out), state)
    return state


def clear_study_dir(out: Path) -> None:
    """Remove a study's files (never the feature cache, nor anything else in ``out``)."""
    for name in (STATE_FILE, OPTUNA_DB, *REPORT_FILES):
        (out / name).unlink(missing_ok=True)
    for name in STUDY_DIRS:
        shutil.rmtree(out / name, ignore_errors=True)


def write_state(out: Path, state: dict[str, Any]) -> None:
    atomic_write_text(Path(out) / STATE_FILE, json.dumps(state, indent=2) + "\n")


def _read_state(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        loaded = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        raise ConfigError(f"{path} is not a readable study state; pass --overwrite to start the study again") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path} is not a study state; pass --overwrite to start the study again")
    return loaded


def _differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """'--trials 5 (saved: 3)' for each option that differs."""
    return [
        f"--{_OPTION_NAMES.get(key, key.replace('_', '-'))} {current.get(key)!r} (saved: {saved.get(key)!r})"
        for key in sorted(set(saved) | set(current))
        if saved.get(key) != current.get(key)
    ]
