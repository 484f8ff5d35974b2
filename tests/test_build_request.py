"""One index-build use case: ``retrieval index build`` and the Python API's ``build_index()`` /
``build_shard()`` describe their call as the same ``BuildRequest`` and hand it to ``run_build``; the rules
between options live in ``BuildRequest`` alone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import retrieval.indexing.usecases
import retrieval.indexing.usecases.building
from retrieval.cli.main import app
from retrieval.indexing import usecases as api
from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.search.postprocess_params import DbaParams, PostprocessParams, QeParams
from retrieval.indexing.store.backends import index_target
from retrieval.indexing.store.files.files_target import FilesTarget
from retrieval.indexing.usecases import BuildRequest


class Asked(Exception):
    """Raised by the stand-in for the build itself, carrying the request it was handed."""


def _capture(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_build(request: BuildRequest) -> Any:
        raise Asked(request)

    monkeypatch.setattr(retrieval.indexing.usecases, "run_build", run_build)  # what the CLI calls
    monkeypatch.setattr(retrieval.indexing.usecases.building, "run_build", run_build)  # what build_index calls


def _cli_request(*args: str) -> BuildRequest:
    result = CliRunner().invoke(app, ["index", "build", *args])
    assert isinstance(result.exception, Asked), result.output
    return result.exception.args[0]


def _api_request(call: Any, *args: Any, **kwargs: Any) -> BuildRequest:
    with pytest.raises(Asked) as asked:
        call(*args, **kwargs)
    return asked.value.args[0]


def test_the_cli_and_the_api_resolve_the_same_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _capture(monkeypatch)
    model, data, out = tmp_path / "export", tmp_path / "photos", tmp_path / "index"
    params = {"qe": {"n": 3, "alpha": 2.0}}
    cli = _cli_request(
        *("--model", str(model), "--data", str(data), "--out", str(out), "--split", "test"),
        *("--float-kind", "hnsw", "--batch-size", "8", "--threads", "2", "--quiet"),
        *("--dba", "5", "--postprocess-params", json.dumps(params)),
    )
    python = _api_request(
        api.build_index, model, data, out, split="test", float_kind="hnsw", batch_size=8, threads=2,
        progress=False, target=index_target("files", None, None, out), dba=5,
        postprocess_params=PostprocessParams.model_validate(params),
    )  # fmt: skip
    assert cli == python
    assert (cli.split, cli.float_kind, cli.binary_kind, cli.batch_size, cli.threads) == ("test", "hnsw", "flat", 8, 2)
    postprocess = cli.postprocess  # --dba 5 with the JSON's qe, DBA's alpha the default one
    assert postprocess is not None and postprocess.dba == DbaParams(n=5, alpha=DbaParams().alpha)
    assert postprocess.qe == QeParams(n=3, alpha=2.0)


def test_a_shard_is_the_same_request_from_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _capture(monkeypatch)
    model, data, out = tmp_path / "export", tmp_path / "photos", tmp_path / "shard-1"
    args = ("--model", str(model), "--data", str(data), "--out", str(out), "--shard", "1/3", "--binary-kind", "ivf")
    cli = _cli_request(*args)
    python = _api_request(api.build_shard, model, data, out, "1/3", binary_kind="ivf")
    assert isinstance(cli.target, FilesTarget)  # --backend files, the default: the same as no target
    assert replace(cli, target=None) == python
    assert (python.shard, python.binary_kind, python.postprocess) == ("1/3", "ivf", None)


def test_the_rules_between_options_are_the_requests(tmp_path: Path) -> None:
    model, data, out = tmp_path / "m", tmp_path / "d", tmp_path / "o"
    with pytest.raises(ConfigError, match=r"^--dba and --postprocess-params apply to a whole index"):
        BuildRequest(model, data, out, shard="0/2", dba=3)
    with pytest.raises(ConfigError, match=r"^--dba and --postprocess-params apply to a whole index"):
        BuildRequest(model, data, out, shard="0/2", postprocess_params=PostprocessParams())
    with pytest.raises(ConfigError, match=r"^a shard is cut from a dataset path"):
        BuildRequest(model, [ImageRecord(path=tmp_path / "a.png", label="a")], out, shard="0/2")
    with pytest.raises(ConfigError, match=r"^--shard writes a shard directory; build shards without --backend milvus$"):
        BuildRequest(model, data, out, shard="0/2", target=object())  # type: ignore[arg-type]  # not files
    assert BuildRequest(model, data, out, dba=3).postprocess is not None  # a whole index takes both
    assert BuildRequest(model, data, out).postprocess is None


def test_the_cli_refuses_a_shard_with_dba_in_one_sentence(tmp_path: Path) -> None:
    args = ["index", "build", "--model", str(tmp_path), "--data", str(tmp_path), "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, [*args, "--shard", "0/2", "--dba", "4"])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigError)
    assert str(result.exception) == "--dba and --postprocess-params apply to a whole index; build shards without them"
