"""What loading an index checks, and what only `index verify` (or `serve --verify-on-load`) does (issue 44):
an edited model.json or manifest.json is refused at load and by verify; a flipped byte of float.faiss
serves unless the service verifies on load; `index info`, /readyz and /items never disagree silently."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from serving_fixtures import API_KEY, make_settings
from typer.testing import CliRunner

from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.common.artifact_names import FLOAT_INDEX_NAME, INDEX_MANIFEST_NAME
from retrieval.indexing.common.errors import IndexFormatError
from retrieval.indexing.store.shared.index_directory.index_manifest import manifest_seal
from retrieval.serving.app import create_app
from retrieval.serving.settings import settings_from_env

GALLERY = 30


def _ready(index_dir: Path, **settings: object) -> tuple[int, str]:
    """/readyz of a fresh app on ``index_dir`` once its first load has ended (ready or refused)."""
    with TestClient(create_app(make_settings(index_dir=index_dir, api_key=API_KEY, **settings))) as client:
        for _ in range(200):
            answer = client.get("/readyz")
            if answer.status_code == 200 or "still loading" not in answer.text:
                return answer.status_code, answer.text
            time.sleep(0.05)
    raise AssertionError("the index never finished loading")


def _edit_json(path: Path, **values: object) -> None:
    data = json.loads(path.read_text())
    for key, value in values.items():
        if isinstance(value, dict):
            data[key].update(value)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_an_edited_model_json_is_refused_at_load(fresh_index: Path) -> None:
    """resize 37 -> 64 and another mean: the graph still takes the crop, so only the recorded sha256 tells."""
    model_json = fresh_index / "model" / "model.json"
    preprocessing = json.loads(model_json.read_text())["preprocessing"]
    _edit_json(model_json, preprocessing={"resize": preprocessing["resize"] + 27, "mean": [0.3, 0.3, 0.3]})
    status, text = _ready(fresh_index)
    assert status == 503 and "model/ has changed since the index was built" in text, text
    with pytest.raises(IndexFormatError, match="model/ has changed"):
        api.verify_index(fresh_index)


def test_a_flipped_byte_of_float_faiss_is_refused_only_when_verifying_on_load(fresh_index: Path) -> None:
    path = fresh_index / FLOAT_INDEX_NAME
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a vector's byte: faiss reads the file as well as before
    path.write_bytes(bytes(data))
    assert _ready(fresh_index)[0] == 200  # the load reads the file, it does not hash it
    status, text = _ready(fresh_index, verify_on_load=True)
    assert status == 503 and f"{FLOAT_INDEX_NAME} has changed" in text, text


def test_verify_on_load_serves_an_intact_index_and_comes_from_the_environment(fresh_index: Path) -> None:
    assert _ready(fresh_index, verify_on_load=True)[0] == 200
    settings = settings_from_env({"RETRIEVAL_VERIFY_ON_LOAD": "true"}, index_dir=fresh_index)
    assert settings.verify_on_load and not settings_from_env({}, index_dir=fresh_index).verify_on_load
    assert "--verify-on-load" in CliRunner().invoke(app, ["serve", "--help"]).output


@pytest.mark.parametrize(
    ("field", "value", "sentence"),
    [
        ("count", GALLERY - 1, f"manifest.json says {GALLERY - 1} items but items.sqlite holds {GALLERY}"),
        ("num_labels", 99, "manifest.json says 99 labels but items.sqlite holds"),
        ("updated_at", "2020-01-01T00:00:00+00:00", "manifest.json has been edited since the index wrote it"),
        ("postprocess", {"qe": {"n": 3, "alpha": 3.0}}, "manifest.json has been edited since the index wrote it"),
    ],
)
def test_an_edited_manifest_is_caught_by_verify_refused_at_load_and_flagged_by_info(
    field: str, value: object, sentence: str, fresh_index: Path
) -> None:
    manifest = fresh_index / INDEX_MANIFEST_NAME
    if field == "postprocess":
        value = {**json.loads(manifest.read_text())["postprocess"], **value}  # type: ignore[dict-item]
    data = json.loads(manifest.read_text())
    data[field] = value
    manifest.write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match=sentence):
        api.verify_index(fresh_index)
    status, text = _ready(fresh_index)
    assert status == 503 and "manifest.json has been edited" in text, text
    info = CliRunner().invoke(app, ["index", "info", str(fresh_index)])
    assert info.exit_code == 0 and "manifest.json has been edited" in info.output, info.output


def test_a_manifest_saved_by_a_writer_is_not_flagged(fresh_index: Path) -> None:
    assert json.loads((fresh_index / INDEX_MANIFEST_NAME).read_text())["manifest_sha256"]
    assert api.verify_index(fresh_index).items == GALLERY
    info = CliRunner().invoke(app, ["index", "info", str(fresh_index)])
    assert info.exit_code == 0 and "edited" not in info.output


def test_the_seal_is_of_the_fields_written_so_a_later_field_with_a_default_changes_nothing(fresh_index: Path) -> None:
    """A manifest written before a field existed (here: no ``delta_segments``, sealed without it) is not
    "edited" for a version that reads the field's default."""
    path = fresh_index / INDEX_MANIFEST_NAME
    fields = json.loads(path.read_text())
    del fields["delta_segments"]
    fields["manifest_sha256"] = manifest_seal(fields)
    path.write_text(json.dumps(fields))
    assert api.verify_index(fresh_index).items == GALLERY
    assert _ready(fresh_index)[0] == 200
