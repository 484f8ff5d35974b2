"""A CLI that answers at once: ``retrieval --help``, a command's ``--help`` and every argument or name error
answer before torch, FastAPI or faiss is imported (timings: ``bench/bench_cli_startup.py``, not a test).

Each case runs the real entry point in a fresh interpreter and reads which heavy packages it left loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import timm
import torch
import typer
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.command_registry import COMMANDS, INDEX_COMMANDS
from retrieval.cli.help_display import UNLIMITED_WIDTH
from retrieval.cli.main import app
from retrieval.serving.settings import MIN_API_KEY_CHARS
from retrieval.training.config.hub_access import timm_repo
from retrieval.training.config.known_names import BACKBONE_NAMES, LOSS_NAMES, recipe_names
from retrieval.training.config.recipes import recipe_registry
from retrieval.training.losses import available_losses
from retrieval.training.model.trunks.backbone_facts import BACKBONE_FACTS, torch_hub_dir, weights_from
from retrieval.training.model.trunks.backbones import BACKBONES, get_backbone, outline_backbone, weights_origin
from retrieval.training.model.trunks.trunk_stages import trunk_stages

HEAVY = ("torch", "fastapi", "faiss")
PROBE = """
import json, sys
from retrieval.cli.main import main
sys.argv = ["retrieval", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print(json.dumps({"code": code, "heavy": [name for name in HEAVY if name in sys.modules]}))
""".replace("HEAVY", repr(HEAVY))


def _run(*args: str) -> tuple[int, list[str], str]:
    """Exit code, the heavy packages loaded, and stderr of ``retrieval ARGS``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True, timeout=120
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["code"] or 0, result["heavy"], done.stderr


def _existing_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    return run


def _four_classes(root: Path) -> Path:
    """Four classes of two images: both training classes would validate, so the split leaves none to train."""
    for label in "abcd":
        (root / label).mkdir(parents=True)
        for number in range(2):
            Image.new("RGB", (32, 32), (number * 90, 40, 200)).save(root / label / f"{number}.png")
    return root


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--help",), None),
        (("train", "--help"), None),
        (("index", "--help"), None),
        (("serve", "--help"), None),
        (("serve", "--index", "/missing"), "/missing"),
        (
            ("serve", "--index", "/missing", "--api-key", "s3cret"),
            "'api_key' is invalid: String should have at least 8",
        ),
        (("trian",), "did you mean train?"),
        (("train", "--data", "/missing", "--out", "RUN"), "dataset path /missing does not exist"),
        (("train", "--data", "DATA", "--out", "RUN", "--recipe", "normsoftmx"), "did you mean normsoftmax"),
        (("train", "--data", "DATA", "--out", "RUN", "--backbone", "resnt18"), "did you mean resnet18"),
        (("train", "--data", "DATA", "--out", "RUN", "--loss", "tripplet"), "did you mean triplet"),
        (("train", "--data", "DATA", "--out", "EXISTING"), "already holds a training run"),
        (("train", "--data", "DATA", "--out", "RUN", "--set", "trainer.epoch=3"), "trainer.epoch"),
        (("train", "--data", "FOUR_CLASSES", "--out", "RUN"), "training needs at least 2 classes but has 0"),
        (("backbones",), None),
    ],
)
def test_help_and_argument_errors_import_neither_torch_fastapi_nor_faiss(
    args: tuple[str, ...], message: str | None, synth_data: Path, tmp_path: Path
) -> None:
    where = {
        "DATA": str(synth_data),
        "RUN": str(tmp_path / "new"),
        "EXISTING": str(_existing_run(tmp_path)),
        "FOUR_CLASSES": str(_four_classes(tmp_path / "four")),
    }
    code, heavy, stderr = _run(*(where.get(arg, arg) for arg in args))
    assert heavy == [], f"{args} imported {heavy}"
    assert (code == 0) if message is None else (code == 2 and message in stderr), stderr


def test_the_help_lists_each_command_by_its_own_first_sentence() -> None:
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    for name, source in COMMANDS.items():
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        assert command is not None and command.get_short_help_str(UNLIMITED_WIDTH) == source.summary, name
    assert group.list_commands(ctx) == list(COMMANDS)  # type: ignore[attr-defined]


def test_the_index_help_lists_each_sub_command_by_its_own_first_sentence() -> None:
    index = typer.main.get_command(app).get_command(None, "index")  # type: ignore[attr-defined]
    for name, source in INDEX_COMMANDS.items():
        command = index.get_command(None, name)
        assert command is not None and command.get_short_help_str(UNLIMITED_WIDTH) == source.summary, name
    assert index.list_commands(None) == list(INDEX_COMMANDS)


def test_the_name_tables_are_the_registries() -> None:
    assert (
        list(LOSS_NAMES) == sorted(spec.name for spec in available_losses())
        and list(BACKBONE_NAMES) == BACKBONES.names()
    )
    assert recipe_names() == recipe_registry().names()


def test_serve_help_states_the_api_key_rule() -> None:
    shown = " ".join(CliRunner().invoke(app, ["serve", "--help"]).output.split())
    assert f"at least {MIN_API_KEY_CHARS} characters (a shorter one stops the start)" in shown, shown
    assert "With a key, hits and items show only the file name in `path`" in shown  # it was told nowhere here
    assert "RETRIEVAL_SHOW_PATHS=true shows full paths" in shown


def test_the_backbone_table_is_the_registry() -> None:
    """``retrieval backbones`` lists this table without torch: each row as the registry builds it."""
    assert list(BACKBONE_FACTS) == BACKBONES.names()
    for name, facts in BACKBONE_FACTS.items():
        trunk, features = outline_backbone(name)
        built = (sum(p.numel() for p in trunk.parameters()), len(trunk_stages(trunk)), features)
        assert (facts.parameters, facts.stages, facts.features) == built, name
        assert facts.native_size == (get_backbone(name).native_size or 224), name
        assert facts.weights == get_backbone(name).weights and weights_from(name) == weights_origin(name), name
        if facts.weights == "timm_cache":  # where weights_here looks: the repository timm's own lookup names
            assert timm.models.get_pretrained_cfg(get_backbone(name).timm_name).hf_hub_id == timm_repo(name)


def test_the_torch_hub_folder_is_torchs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in ("TORCH_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    assert torch_hub_dir() == Path(torch.hub.get_dir())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert torch_hub_dir() == Path(torch.hub.get_dir()) == tmp_path / "xdg" / "torch" / "hub"
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert torch_hub_dir() == Path(torch.hub.get_dir()) == tmp_path / "home" / "hub"
