"""The command line fails fast and points at the fix: mistakes found before torch loads, "did you mean" for
misspelt options, commands and config keys, image sizes no backbone can use, a recipe whose loss is
replaced, a port in use, and help that wraps to the terminal instead of cutting words."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from retrieval.cli.main import app

RETRIEVAL = [sys.executable, "-c", "from retrieval.cli.main import main; main()"]
# A command run in a fresh interpreter that reports whether torch was imported by the time it ended.
TORCH_PROBE = """
import sys
from typer.testing import CliRunner
from retrieval.cli.main import app
result = CliRunner().invoke(app, sys.argv[1:])
print(repr(result.exception))
print("torch loaded" if "torch" in sys.modules else "torch not loaded")
"""


def _folder_of_images(root: Path, classes: int = 2, size: int = 40) -> Path:
    for label in range(classes):
        (root / f"c{label}").mkdir(parents=True)
        Image.new("RGB", (size, size), (label * 60, 0, 0)).save(root / f"c{label}" / "0.png")
    return root


def _without_torch(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", TORCH_PROBE, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "/no/such/folder"], "dataset path /no/such/folder does not exist"),
        (["--image-size", "16"], "data.image_size 16 is below 32 px"),
        (["--backbone", "dinov2_vits14", "--image-size", "20"], "dinov2_vits14's patch size 14; use 14 or 28"),
        (["--set", "trainer.epoch=3"], "did you mean epochs?"),
        (["--split", "some"], "data.split: Input should be 'classes' or 'none'"),
    ],
)
def test_train_mistakes_are_refused_before_torch_loads(tmp_path: Path, args: list[str], message: str) -> None:
    data = _folder_of_images(tmp_path / "data")
    output = _without_torch("train", "--out", str(tmp_path / "run"), "--data", str(data), *args)
    assert message in output and "torch not loaded" in output
    assert not (tmp_path / "run").exists()


def test_misspelt_options_and_commands_get_did_you_mean() -> None:
    option = subprocess.run([*RETRIEVAL, "train", "--epoch", "3"], capture_output=True, text=True, timeout=120)
    assert option.returncode == 2 and "No such option: --epoch; did you mean --epochs?" in option.stderr
    command = subprocess.run([*RETRIEVAL, "index", "biuld"], capture_output=True, text=True, timeout=120)
    assert command.returncode == 2 and "No such command 'biuld'; did you mean build or rebuild?" in command.stderr
    unknown = CliRunner().invoke(app, ["xyzzy"])
    assert "No such command 'xyzzy'" in unknown.output and "did you mean" not in unknown.output


@pytest.mark.parametrize("columns", [50, 72, 160])
def test_help_wraps_to_the_terminal_and_cuts_no_word(columns: int) -> None:
    env = {**os.environ, "COLUMNS": str(columns)}  # what a terminal of that width tells the program
    result = subprocess.run([*RETRIEVAL, "train", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= columns
    assert "…" not in result.stdout
    words = " ".join(result.stdout.split())
    assert "CUB/Cars196/SOP/In-Shop root." in words  # long tokens stay whole
    assert "then these options, then --set" in words  # docstring paragraphs are reflowed, not cut at source lines
    if columns > 120:
        assert max(map(len, lines)) > 100, "a wide terminal gets wide help"
    commands = subprocess.run([*RETRIEVAL, "index", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert "(new ids, old ids unchanged); a DBA index augments them as its build did." in " ".join(
        commands.stdout.split()
    )  # summaries whole, not cut


def test_losses_lists_the_recipes_with_what_they_set() -> None:
    result = CliRunner().invoke(app, ["losses"], env={"COLUMNS": "400"})
    rows = {line.split()[0]: line for line in result.output.splitlines() if line.startswith("  ") and line.strip()}
    assert 'loss.name="normalized_softmax", loss.params.temperature=0.05' in rows["normsoftmax"]
    assert 'loss.name="multi_similarity"' in rows["ms"]  # the aliases are listed too
    assert 'optimizer.name="sgd"' in rows["zhai_wu"] and "trainer.epochs=31" in rows["zhai_wu"]
    assert "loss.params.margin=0.1" in rows["triplet"]
    document = json.loads(CliRunner().invoke(app, ["losses", "--json"]).output)
    assert document["recipes"]["triplet"]["loss.params.margin"] == 0.1
    assert document["recipe_base"]["model.embedding_dim"] == 2048


def test_a_loss_that_replaces_the_recipes_is_warned_and_small_pretrained_images_too(tmp_path: Path) -> None:
    data = _folder_of_images(tmp_path / "data")
    args = ["train", "--data", str(data), "--print-config", "--recipe", "normsoftmax", "--loss", "triplet"]
    result = CliRunner().invoke(app, [*args, "--pretrained", "imagenet", "--image-size", "64"])
    assert result.exit_code == 0, result.output
    assert "--loss triplet replaces the loss of --recipe normsoftmax (normalized_softmax)" in result.output
    assert "use --recipe triplet" in result.output
    assert "data.image_size 64 px is small for pretrained weights" in result.output
    agreeing = CliRunner().invoke(
        app, ["train", "--data", str(data), "--print-config", "--recipe", "ms", "--loss", "multi_similarity"]
    )
    assert agreeing.exit_code == 0 and "warning" not in agreeing.output


def test_serve_names_a_port_in_use_in_one_sentence(tiny_index_template: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*RETRIEVAL, "serve", "--index", str(tiny_index_template), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    assert f"error: port {port} on 127.0.0.1 is already in use" in done.stderr and "--port" in done.stderr
    assert "Traceback" not in done.stderr and "OSError" not in done.stderr


def test_silent_phases_spin_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from retrieval.cli import activity as module

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, enabled in ((Terminal(), True), (Terminal(), False), (io.StringIO(), True)):
        monkeypatch.setattr(module.sys, "stderr", stream)
        with module.activity("loading torch and the training code", enabled=enabled):
            module.time.sleep(0.25)
        shown = stream.getvalue()
        if enabled and isinstance(stream, Terminal):
            assert "| loading torch and the training code ..." in shown  # the spinner's first frame
            assert shown.endswith("\rloading torch and the training code: 0.2 s\n") or ": 0.3 s" in shown
        else:
            assert shown == ""  # disabled, or a pipe or a log: nothing


def test_data_check_advises_turning_the_flip_off_for_mirror_sensitive_classes(tmp_path: Path) -> None:
    data = _folder_of_images(tmp_path / "data")
    for name in ("arrow_left", "arrow_right"):
        shutil.copytree(data / "c0", data / name)
    result = CliRunner().invoke(app, ["data", "check", str(data), "--quiet"])
    assert result.exit_code == 0 and "retrieval train --set data.horizontal_flip=false" in result.output
    assert "mirror image" in result.output and "(class names that suggest it: arrow_left, arrow_right)" in result.output


def test_data_check_gives_birds_no_flip_advice(tmp_path: Path) -> None:
    data = _folder_of_images(tmp_path / "data")  # c0, c1: nothing mirror-sensitive in the names
    for name in ("Red_winged_Blackbird", "Gray_Catbird"):
        shutil.copytree(data / "c0", data / name)
    result = CliRunner().invoke(app, ["data", "check", str(data), "--quiet"])
    assert result.exit_code == 0 and "horizontal_flip" not in result.output  # it advised flips for birds


def test_study_mistakes_are_refused_before_torch_loads(tmp_path: Path) -> None:
    data = _folder_of_images(tmp_path / "data")
    common = ["study", "--losses", "triplet", "--out", str(tmp_path / "study")]
    missing = _without_torch(*common, "--data", str(tmp_path / "nothing"))
    assert "does not exist" in missing and "torch not loaded" in missing
    misspelt = _without_torch(*common, "--data", str(data), "--set", "triplet:trainer.epoch=2")
    assert "did you mean epochs?" in misspelt and "torch not loaded" in misspelt
    assert not (tmp_path / "study").exists()
