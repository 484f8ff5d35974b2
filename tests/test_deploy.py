"""Deploy files checked offline: k8s manifests against the API schemas, compose and Dockerfiles against the repo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate.utils")

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.30.0"  # a version kubernetes-validate ships schemas for; autoscaling/v2 is GA there
MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))


def _resources() -> list[dict]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def _kind(kind: str) -> dict:
    (found,) = [doc for doc in _resources() if doc["kind"] == kind]
    return found


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_k8s_manifest_is_valid(path: Path) -> None:
    for resource in yaml.safe_load_all(path.read_text()):
        if resource:
            kubernetes_validate.validate(resource, K8S_VERSION, strict=True)


def test_k8s_schema_check_catches_a_typo() -> None:
    deployment = _kind("Deployment")
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_k8s_deployment_wiring() -> None:
    kinds = {doc["kind"] for doc in _resources()}
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "PersistentVolumeClaim", "ConfigMap", "Secret"} <= kinds
    deployment = _kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and {"cpu", "memory"} <= set(
        container["resources"]["limits"]
    )
    index_mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/index")
    index_volume = next(v for v in pod["volumes"] if v["name"] == index_mount["name"])
    assert index_mount["readOnly"] is True
    assert index_volume["persistentVolumeClaim"]["claimName"] == _kind("PersistentVolumeClaim")["metadata"]["name"]
    sources = {ref.get("configMapRef", ref.get("secretRef"))["name"] for ref in container["envFrom"]}
    assert sources == {_kind("ConfigMap")["metadata"]["name"], _kind("Secret")["metadata"]["name"]}
    assert "RETRIEVAL_API_KEY" in _kind("Secret")["stringData"]
    hpa = _kind("HorizontalPodAutoscaler")
    assert (
        hpa["apiVersion"] == "autoscaling/v2"
        and hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    )
    service = _kind("Service")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_configmap_keys_are_service_settings() -> None:
    from retrieval.serving.settings import ENV_PREFIX, ServeSettings

    for key in _kind("ConfigMap")["data"]:
        assert key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX) :].lower() in ServeSettings.model_fields, key


def test_compose_references_existing_files() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    service = compose["services"]["serve"]
    context = (DEPLOY / service["build"]["context"]).resolve()
    assert context == ROOT and (context / service["build"]["dockerfile"]).is_file()
    volume_name = service["volumes"][0].split(":")[0]
    assert volume_name in compose["volumes"], "the index volume must be a named volume"
    assert service["environment"]["RETRIEVAL_INDEX_DIR"] == service["volumes"][0].split(":")[1]


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


@pytest.mark.parametrize("name", ["Dockerfile.serve", "Dockerfile.train"])
def test_dockerfiles_copy_only_existing_paths(name: str) -> None:
    copies = [args.split() for op, args in _instructions(DEPLOY / name) if op == "COPY"]
    assert copies
    for args in copies:
        sources = [a for a in args[:-1] if not a.startswith("--")]
        for source in sources:
            assert (ROOT / source).exists(), f"{name} copies {source}, which is not in the repository"
    assert any(op == "USER" and args != "root" for op, args in _instructions(DEPLOY / name)), "run as non-root"


def test_serve_image_has_no_torch() -> None:
    instructions = _instructions(DEPLOY / "Dockerfile.serve")
    installs = " ".join(args for op, args in instructions if op == "RUN" and "pip install" in args)
    extras = set(re.findall(r"\.\[([^\]]*)\]", installs)[0].split(","))
    assert extras == {"cpu", "milvus"}  # milvus: pymilvus, for indexes whose items live in Milvus
    train_deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["train"]
    assert not any(dep.split(">")[0].split("=")[0] in installs for dep in train_deps)
    assert any(op == "HEALTHCHECK" and "/healthz" in args for op, args in instructions)
    assert any(op == "VOLUME" and "/index" in args for op, args in instructions)
    assert instructions[0][1].startswith("python:") and "slim" in instructions[0][1]


def test_train_image_installs_train_and_gpu() -> None:
    instructions = _instructions(DEPLOY / "Dockerfile.train")
    installs = " ".join(args for op, args in instructions if op == "RUN" and "pip install" in args)
    assert set(re.findall(r"\.\[([^\]]*)\]", installs)[0].split(",")) == {
        "train",
        "gpu",
        "tracking",
    }  # tracking: TensorBoard (--tensorboard)
    assert "cuda" in instructions[0][1]
