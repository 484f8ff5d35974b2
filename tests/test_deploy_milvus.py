"""The Milvus deploy files, checked offline: compose profile, the k8s build Job against the API schema,
and the operator / Helm paths naming the Service the Job writes to."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import tomllib
import typer
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate.utils")

ROOT = Path(__file__).resolve().parents[1]
MILVUS = ROOT / "deploy" / "k8s" / "milvus"
K8S_VERSION = "1.30.0"


def _job() -> dict:
    return yaml.safe_load((MILVUS / "index-build-job.yaml").read_text())


def _job_args() -> list[str]:
    (container,) = _job()["spec"]["template"]["spec"]["containers"]
    return container["args"]


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _milvus_minor() -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["milvus"]
    (lite,) = [dep for dep in extras if dep.startswith("milvus-lite")]
    return ".".join(lite.split("==")[1].split(".")[:2])


def test_build_job_is_valid_and_uses_the_cli_options() -> None:
    kubernetes_validate.validate(_job(), K8S_VERSION, strict=True)
    args = _job_args()
    assert args[:3] == ["retrieval", "index", "build"] and _option(args, "--backend") == "milvus"
    from retrieval.cli.main import app

    group = typer.main.get_command(app)
    build = group.get_command(None, "index").get_command(None, "build")  # type: ignore[attr-defined]
    known = {opt for param in build.params for opt in param.opts}
    assert {a for a in args if a.startswith("--")} <= known
    mounts = {m["mountPath"] for m in _job()["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    out = Path(_option(args, "--out"))
    assert out.parent.as_posix() in mounts and out.as_posix() not in mounts  # the swap renames --out


def test_operator_and_helm_name_the_service_the_job_writes_to() -> None:
    host = urlparse(_option(_job_args(), "--milvus-uri"))
    assert host.port == 19530
    operator = yaml.safe_load((MILVUS / "milvus-operator.yaml").read_text())
    assert operator["apiVersion"] == "milvus.io/v1beta1" and operator["kind"] == "Milvus"
    assert f"{operator['metadata']['name']}-milvus" == host.hostname  # the operator's Service name
    helm = (MILVUS / "helm-values.yaml").read_text()
    (release,) = re.findall(r"helm install (\S+) zilliztech/milvus", helm)
    assert f"{release}-milvus" == host.hostname  # the chart's Service name
    server_tags = [
        operator["spec"]["components"]["image"],
        "milvusdb/milvus:" + yaml.safe_load(helm)["image"]["all"]["tag"],
    ]
    assert all(tag.split(":v")[1].startswith(_milvus_minor() + ".") for tag in server_tags)


def test_compose_runs_milvus_under_a_profile_the_service_can_use() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"etcd", "minio", "milvus"} <= set(services)
    assert all(services[name]["profiles"] == ["milvus"] for name in ("etcd", "minio", "milvus"))
    assert "profiles" not in services["serve"]  # a files index still starts with a plain `up`
    assert services["serve"]["depends_on"]["milvus"]["required"] is False
    milvus = services["milvus"]
    assert milvus["environment"]["ETCD_ENDPOINTS"].split(":")[0] == "etcd"
    assert milvus["environment"]["MINIO_ADDRESS"].split(":")[0] == "minio"
    assert milvus["image"].split(":v")[1].startswith(_milvus_minor() + ".")
    assert "--milvus-uri http://milvus:19530" in (ROOT / "deploy" / "docker-compose.yml").read_text()
