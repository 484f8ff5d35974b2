"""``--pretrained hub`` without the internet: a random-initialised timm ViT-Ti/16 checkpoint served by a local
server that answers as the Hugging Face hub does (``fake_hub``), fetched through the real download path
(huggingface_hub with ``HF_ENDPOINT`` pointed at it). Consent refused (one sentence before torch loads,
nothing fetched), consent given (train --epochs 0, export, index, search), a dropped connection resumed with a
Range request, a download process killed midway resumed by the next run, a checksum mismatch refused, the
cached copy used offline; local weights files, mismatched ones; the image sizes each backbone can see."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import open_clip
import pytest
import timm
import torch
from fake_hub import FakeHub, serving
from huggingface_hub import constants
from safetensors.torch import save_file

from retrieval import build_index, export, search, train
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.synth.generator import generate_synthetic_dataset
from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.hub_access import (
    HUB_WEIGHTS_MB,
    HubAccess,
    cached_hub_file,
    consent_needed,
    hub_access,
    hub_repo,
)
from retrieval.training.config.image_sizes import check_image_size
from retrieval.training.config.known_names import VIT_TIMM_NAMES
from retrieval.training.config.train_config import ModelConfig
from retrieval.training.export.onnx_export import TOLERANCE
from retrieval.training.model.embedding_model import EmbeddingModel, build_embedding_model
from retrieval.training.model.hub_weights import hub_weights_file
from retrieval.training.model.pretrained import load_pretrained

TIMM_NAME = "vit_tiny_patch16_224.augreg_in21k"  # the smallest ViT timm publishes weights for (5.5M parameters)
BACKBONE = f"timm:{TIMM_NAME}"
REPO = f"timm/{TIMM_NAME}"
KEY = f"{REPO}/model.safetensors"
SIZE = 32  # 2 x 2 patches of 16 px


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, torch.Tensor]]:
    """A random ViT-Ti/16 as timm publishes it: its whole state dict (classifier included) as safetensors."""
    torch.manual_seed(0)
    state = timm.create_model(TIMM_NAME, pretrained=False, num_classes=10).state_dict()
    path = tmp_path_factory.mktemp("checkpoint") / "model.safetensors"
    save_file({key: value.contiguous() for key, value in state.items()}, str(path))
    return path.read_bytes(), state


@pytest.fixture
def hub(checkpoint: tuple[bytes, dict[str, torch.Tensor]], monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake hub, and huggingface_hub pointed at it (it reads HF_ENDPOINT once, at import)."""
    with serving(FakeHub({KEY: checkpoint[0]})) as served:
        monkeypatch.setattr(constants, "ENDPOINT", served.url)
        template = served.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        monkeypatch.delenv("RETRIEVAL_ALLOW_DOWNLOAD", raising=False)
        monkeypatch.delenv("RETRIEVAL_WEIGHTS_CACHE", raising=False)
        yield served


def _model(backbone: str = BACKBONE, size: int = SIZE) -> EmbeddingModel:
    return build_embedding_model(ModelConfig(backbone=backbone, pooling="mean", embedding_dim=8), image_size=size)


def _assert_loaded(model: EmbeddingModel, state: dict[str, torch.Tensor]) -> None:
    torch.testing.assert_close(model.backbone.blocks[11].mlp.fc2.weight, state["blocks.11.mlp.fc2.weight"])
    torch.testing.assert_close(model.backbone.cls_token, state["cls_token"])


PROBE = """
import json, sys
from retrieval.cli.main import main
sys.argv = ["retrieval", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


def test_without_consent_one_sentence_names_the_command_and_file_before_torch_loads(
    hub: FakeHub, synth_data: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    args = ["train", "--data", str(synth_data), "--out", str(tmp_path / "run"), "--backbone", BACKBONE]
    args += ["--pretrained", "hub", "--weights-cache", str(cache), "--image-size", str(SIZE)]
    env = {**os.environ, "HF_ENDPOINT": hub.url}
    env.pop("RETRIEVAL_ALLOW_DOWNLOAD", None)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, env=env)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 2, "torch": False}, done.stderr
    message = " ".join(done.stderr.split())
    assert f"run `retrieval train --data {synth_data}" in message and "--allow-download` to fetch" in message
    assert f"{REPO}/model.safetensors (size unknown until the download asks the hub) from the Hugging Face hub" in (
        message
    )
    assert str(cache) in message
    assert hub.requests == [] and not cache.exists() and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_with_consent_the_weights_download_then_train_export_index_and_search(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    generate_synthetic_dataset(data, classes=8, per_class=4, size=SIZE, seed=0, progress=False)
    caplog.set_level("INFO")
    run = train(
        data,
        tmp_path / "run",
        recipe="normsoftmax",
        backbone=BACKBONE,
        pretrained="hub",
        allow_download=True,
        weights_cache=str(cache),
        pooling="mean",
        embedding_dim=16,
        image_size=SIZE,
        epochs=0,
        batch_size=8,
        num_workers=0,
        device="cpu",
        progress=False,
    )
    size_mb = f"{len(checkpoint[0]) / 1e6:.1f} MB"
    assert f"downloading {KEY} ({size_mb}) from {hub.url}" in caplog.text  # the size, before the download
    # one download: the size asked, the file, then hf_hub_download's HEAD to link it; the reference eval reuses it
    assert [request[0] for request in hub.file_requests()] == ["HEAD", "GET", "HEAD"]
    blob = Path(str(cached_hub_file(REPO, str(cache)))).resolve()
    assert blob.parent == cache / f"models--timm--{TIMM_NAME}" / "blobs" and blob.name == hub.sha256(KEY)
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == hub.sha256(KEY)
    exported = export(run.run_dir)
    assert exported.max_abs_diff <= TOLERANCE["fp32"]
    build_index(exported.onnx_path.parent, data, tmp_path / "index", split="test", progress=False)
    query = sorted(data.glob("*/*.png"))[-1]
    hits = search(tmp_path / "index", [query], k=3)[0]
    assert Path(hits[0].item.path) == query and hits[0].score == pytest.approx(1.0, abs=2e-3)


def test_a_dropped_connection_resumes_with_a_range_request(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    hub.drop_first_get = True
    model = _model()
    report = load_pretrained(model, "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path)))
    (_, _, first), (_, _, second) = hub.gets()  # the first GET was dropped after half the file
    resumed_at = int(str(second).removeprefix("bytes=").removesuffix("-"))  # what the partial file held
    assert first is None and 0 < resumed_at <= len(checkpoint[0]) // 2
    assert report.loaded == len(model.backbone.state_dict()) and report.missing == 0
    _assert_loaded(model, checkpoint[1])


KILLED_DOWNLOAD = """
import sys
from retrieval.training.config.hub_access import HubAccess
from retrieval.training.model.hub_weights import hub_weights_file
hub_weights_file(sys.argv[1], HubAccess(allow_download=True, cache_dir=sys.argv[2]))
"""


def _partial_file(blobs: Path, process: subprocess.Popen[bytes], timeout: float = 90) -> Path:
    """The partial file a downloading ``process`` writes in ``blobs``, once it holds some bytes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        partial = [path for path in blobs.glob("*.incomplete") if path.stat().st_size > 0] if blobs.is_dir() else []
        if partial:
            return partial[0]
        time.sleep(0.05)
    raise AssertionError(f"no partial file with bytes in {blobs} (the download exited with {process.poll()})")


def test_a_download_killed_midway_resumes_from_its_partial_file_in_the_next_run(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    content = checkpoint[0]
    hub.stall_at = len(content) * 3 // 4  # past huggingface_hub's first 10 MB chunk: some bytes reach the disk
    assert constants.DOWNLOAD_CHUNK_SIZE < hub.stall_at, "huggingface_hub writes in larger chunks: stall later"
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    command = [sys.executable, "-c", KILLED_DOWNLOAD, BACKBONE, str(tmp_path)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    blobs = tmp_path / f"models--timm--{TIMM_NAME}" / "blobs"
    try:
        partial = _partial_file(blobs, process)
    finally:
        process.kill()  # SIGKILL: no cleanup runs in the downloading process
        process.wait()
        hub.stall_at = None
        hub.release.set()
    on_disk = partial.stat().st_size
    assert partial.name == f"{hub.sha256(KEY)}.incomplete" and 0 < on_disk < len(content)
    model = _model()
    report = load_pretrained(model, "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path)))
    assert [request[2] for request in hub.gets()] == [None, f"bytes={on_disk}-"]  # the second run asked for the rest
    assert report.loaded == len(model.backbone.state_dict()) and report.missing == 0
    _assert_loaded(model, checkpoint[1])
    assert sorted(path.name for path in blobs.iterdir()) == [hub.sha256(KEY)]  # the partial file became the blob
    assert hashlib.sha256((blobs / hub.sha256(KEY)).read_bytes()).hexdigest() == hub.sha256(KEY)


def test_the_partial_file_a_killed_hf_hub_download_left_is_resumed_and_the_others_deleted(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    """huggingface_hub names its partial file per process (``<etag>.<8 hex>.incomplete``) and never reads one
    again: the longest of them becomes this run's partial file."""
    blobs = tmp_path / f"models--timm--{TIMM_NAME}" / "blobs"
    blobs.mkdir(parents=True)
    sha = hub.sha256(KEY)
    (blobs / f"{sha}.0badc0de.incomplete").write_bytes(checkpoint[0][:1000])
    (blobs / f"{sha}.35c88554.incomplete").write_bytes(checkpoint[0][:3000])
    model = _model()
    load_pretrained(model, "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path)))
    assert [request[2] for request in hub.gets()] == ["bytes=3000-"]
    assert sorted(path.name for path in blobs.iterdir()) == [sha]
    _assert_loaded(model, checkpoint[1])


def test_a_download_that_fails_for_good_says_what_it_kept_and_the_next_run_resumes(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The network gives up past huggingface_hub's retries (here: its ``http_get`` writes 200,000 bytes, then
    times out): one sentence names the partial file, and the next run asks for the bytes after it."""
    import httpx
    from huggingface_hub import file_download

    def times_out(url: str, file: BinaryIO, **options: object) -> None:
        file.write(checkpoint[0][:200_000])
        raise httpx.ReadTimeout("The read operation timed out")

    real_http_get = file_download.http_get
    monkeypatch.setattr(file_download, "http_get", times_out)
    access = HubAccess(allow_download=True, cache_dir=str(tmp_path))
    partial = tmp_path / f"models--timm--{TIMM_NAME}" / "blobs" / f"{hub.sha256(KEY)}.incomplete"
    with pytest.raises(ConfigError) as failed:
        load_pretrained(_model(), "hub", access)
    assert str(failed.value) == (
        f"cannot download {KEY} from the Hugging Face hub: ReadTimeout The read operation timed out; the 0.2 MB "
        f"fetched are kept in {partial}: run the command again to resume"
    )
    monkeypatch.setattr(file_download, "http_get", real_http_get)
    model = _model()
    load_pretrained(model, "hub", access)
    assert [request[2] for request in hub.gets()] == ["bytes=200000-"]
    _assert_loaded(model, checkpoint[1])


def test_a_server_that_ignores_the_range_request_sends_the_whole_file_again(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    blobs = tmp_path / f"models--timm--{TIMM_NAME}" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{hub.sha256(KEY)}.incomplete").write_bytes(checkpoint[0][:3000])
    hub.ignore_range = True
    model = _model()
    load_pretrained(model, "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path)))
    assert [request[2] for request in hub.gets()] == ["bytes=3000-"]  # asked for the rest, got a 200 and all
    assert (blobs / hub.sha256(KEY)).read_bytes() == checkpoint[0]
    _assert_loaded(model, checkpoint[1])


def test_a_file_that_does_not_match_its_checksum_is_refused_and_deleted(hub: FakeHub, tmp_path: Path) -> None:
    hub.corrupt = True
    with pytest.raises(ConfigError, match=rf"^{KEY} does not match its checksum .* so it was deleted; run the"):
        load_pretrained(_model(), "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path)))
    assert cached_hub_file(REPO, str(tmp_path)) is None
    assert not [path for path in tmp_path.rglob("*") if path.is_file() and "blobs" in path.parts]


def test_offline_the_cached_copy_loads_without_consent_or_network(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_pretrained(_model(), "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path)))
    asked = len(hub.file_requests())
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("RETRIEVAL_WEIGHTS_CACHE", str(tmp_path))
    model = _model()
    report = load_pretrained(model, "hub")  # consent and cache from the environment: none, and tmp_path
    assert report.loaded == len(model.backbone.state_dict()) and len(hub.file_requests()) == asked
    _assert_loaded(model, checkpoint[1])
    with pytest.raises(ConfigError, match=r"^HF_HUB_OFFLINE is set and the weights of timm/.* are not in the cache"):
        load_pretrained(_model(), "hub", HubAccess(allow_download=True, cache_dir=str(tmp_path / "empty")))


def test_pretrained_imagenet_finds_a_transformers_weights_in_the_weights_cache(
    hub: FakeHub, checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--pretrained imagenet`` never downloads, and looks where ``--pretrained hub`` downloaded: the
    ``--weights-cache`` folder, else ``RETRIEVAL_WEIGHTS_CACHE``."""
    cache = tmp_path / "cache"
    load_pretrained(_model(), "hub", HubAccess(allow_download=True, cache_dir=str(cache)))
    asked = len(hub.requests)
    model = _model()
    report = load_pretrained(model, "imagenet", HubAccess(cache_dir=str(cache)))
    assert report.loaded == len(model.backbone.state_dict()) and report.source == f"timm's cached {TIMM_NAME} weights"
    _assert_loaded(model, checkpoint[1])
    monkeypatch.setenv("RETRIEVAL_WEIGHTS_CACHE", str(cache))
    assert load_pretrained(_model(), "imagenet").loaded == report.loaded  # the cache from the environment
    monkeypatch.delenv("RETRIEVAL_WEIGHTS_CACHE")
    empty = tmp_path / "empty"
    with pytest.raises(ConfigError, match=rf"^timm weights for {TIMM_NAME} are not in the weights cache {empty} \("):
        load_pretrained(_model(), "imagenet", HubAccess(allow_download=True, cache_dir=str(empty)))
    assert len(hub.requests) == asked  # never downloads


def test_the_backbones_listing_looks_for_weights_in_the_weights_cache(hub: FakeHub, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from retrieval.cli.main import app

    repo = hub_repo("dinov2_vits14")
    hub.files[f"{repo}/model.safetensors"] = b"the weights of a DINOv2 ViT-S/14"
    cache = tmp_path / "cache"
    cached = hub_weights_file("dinov2_vits14", HubAccess(allow_download=True, cache_dir=str(cache)))

    def listed(*args: str, env: dict[str, str] | None = None) -> dict[str, str | None]:
        done = CliRunner().invoke(app, ["backbones", *args], env=env)
        assert done.exit_code == 0, done.output
        if "--json" not in args:
            return {"footer": done.output.strip().splitlines()[-1]}
        return {row["name"]: row["imagenet_weights"] for row in json.loads(done.output)}

    by_option = listed("--json", "--weights-cache", str(cache))
    assert by_option["dinov2_vits14"] == str(cached) and by_option["dinov2_vitb14"] is None
    assert listed("--json", env={"RETRIEVAL_WEIGHTS_CACHE": str(cache)}) == by_option
    assert listed("--json", env={"RETRIEVAL_WEIGHTS_CACHE": str(tmp_path / "empty")})["dinov2_vits14"] is None
    assert listed("--weights-cache", str(cache))["footer"].endswith(
        f"the transformers' weights are looked for in {cache}"
    )


def test_consent_and_cache_come_from_the_config_or_the_environment() -> None:
    assert hub_access(environ={}) == HubAccess(False, None)
    environ = {"RETRIEVAL_ALLOW_DOWNLOAD": "1", "RETRIEVAL_WEIGHTS_CACHE": "/w"}
    assert hub_access(environ=environ) == HubAccess(True, "/w")
    assert hub_access(True, "/c", environ={"RETRIEVAL_WEIGHTS_CACHE": "/w"}) == HubAccess(True, "/c")
    assert hub_access(environ={"RETRIEVAL_ALLOW_DOWNLOAD": "0"}).allow_download is False


def test_the_refusal_gives_a_listed_transformers_download_size_without_asking_the_hub(hub: FakeHub) -> None:
    message = consent_needed("dinov2_vits14", HubAccess(False, "/cache"), "retrieval train ... --allow-download")
    assert "timm/vit_small_patch14_dinov2.lvd142m/model.safetensors (about 88 MB) from the Hugging Face hub" in (
        message
    )
    assert hub.requests == []
    for name, timm_name in VIT_TIMM_NAMES.items():  # timm's whole model in float32, as its hub file holds it
        if name in TEXT_TOWERS:  # open_clip's file: both towers
            continue
        with torch.device("meta"):
            model = timm.create_model(timm_name, pretrained=False)
        assert HUB_WEIGHTS_MB[name] == round(4 * sum(p.numel() for p in model.parameters()) / 1e6), name
    for name, (model_name, tag) in TEXT_TOWERS.items():
        quick_gelu = open_clip.get_pretrained_cfg(model_name, tag).get("quick_gelu", False)
        state = open_clip.create_model(model_name, pretrained=None, force_quick_gelu=quick_gelu).state_dict()
        assert HUB_WEIGHTS_MB[name] == round(4 * sum(value.numel() for value in state.values()) / 1e6), name
    message = consent_needed("clip_vitb32", HubAccess(False, "/cache"), "retrieval train ... --allow-download")
    assert "timm/vit_base_patch32_clip_224.openai/open_clip_model.safetensors (about 605 MB)" in message


def test_each_listed_transformer_downloads_from_the_repository_timm_names() -> None:
    """timm's repository, or for a backbone with a text tower open_clip's (SigLIP's is not timm's: timm's holds
    the image tower alone)."""
    for name, timm_name in VIT_TIMM_NAMES.items():
        if name in TEXT_TOWERS:
            assert f"{hub_repo(name)}/" == open_clip.get_pretrained_cfg(*TEXT_TOWERS[name])["hf_hub"], name
        else:
            assert hub_repo(name) == timm.models.get_pretrained_cfg(timm_name).hf_hub_id
    with pytest.raises(ConfigError, match="^--pretrained hub is for the vision transformers .*; resnet18 takes"):
        hub_repo("resnet18")
    with pytest.raises(ConfigError, match=r"needs the weights' tag in the timm name, e\.g\. timm:vit_small_patch16_2"):
        hub_repo("timm:vit_small_patch16_224")


def test_a_local_safetensors_file_loads_and_one_that_does_not_fit_is_one_sentence(
    checkpoint: tuple[bytes, dict[str, torch.Tensor]], tmp_path: Path
) -> None:
    path = tmp_path / "weights.safetensors"
    path.write_bytes(checkpoint[0])
    model = _model()
    assert load_pretrained(model, str(path)).loaded == len(model.backbone.state_dict())
    _assert_loaded(model, checkpoint[1])
    small = _model("dinov2_vits14", 28)  # ViT-S/14 (384 wide) given ViT-Ti/16's tensors (192 wide)
    with pytest.raises(ConfigError) as refused:
        load_pretrained(small, str(path))
    message = str(refused.value)
    assert message.startswith(f"{path} does not fit the dinov2_vits14 backbone") and "\n" not in message
    assert "in the file but" in message and "(1, 1, 192) in the file but (1, 1, 384) in the model" in message


@pytest.mark.parametrize(
    ("backbone", "size", "message"),
    [
        ("dinov2_vits14", 14, None),
        ("dinov2_vits14", 10, "data.image_size 10 is not a multiple of dinov2_vits14's patch size 14; use 14"),
        ("clip_vitb32", 48, "data.image_size 48 is not a multiple of clip_vitb32's patch size 32; use 32 or 64"),
        ("siglip_vitb16", 16, None),
        ("timm:vit_tiny_patch16_224", 24, "patch size 16; use 16 or 32"),
        ("resnet18", 16, "data.image_size 16 is below 32 px"),
        ("resnet18", 32, None),
    ],
)
def test_the_smallest_image_is_the_backbones_own(backbone: str, size: int, message: str | None) -> None:
    if message is None:
        check_image_size(backbone, size)
    else:
        with pytest.raises(ConfigError, match=message):
            check_image_size(backbone, size)


def test_a_long_command_logs_its_own_lines_not_one_per_http_request(
    hub: FakeHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``retrieval train`` and ``study`` log at INFO; huggingface_hub's HTTP client logs each request at INFO
    too, which a download would print line by line beside its progress bar."""
    import logging

    from retrieval.cli.activity import QUIET_LOGGERS, show_run_log

    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}  # an earlier command may set them
    try:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
        caplog.set_level(logging.INFO)  # the root at INFO, as the command's own basicConfig sets it
        hub_weights_file(BACKBONE, HubAccess(allow_download=True, cache_dir=str(tmp_path / "before")))
        assert "HTTP Request: GET" in caplog.text  # what a download printed before
        caplog.clear()
        show_run_log()
        hub_weights_file(BACKBONE, HubAccess(allow_download=True, cache_dir=str(tmp_path / "after")))
        assert f"downloading {KEY}" in caplog.text and "HTTP Request" not in caplog.text
        assert logging.getLogger("retrieval.training").isEnabledFor(logging.INFO)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
