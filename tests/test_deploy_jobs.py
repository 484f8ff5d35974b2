"""The scale-out Jobs in deploy/k8s/jobs/, checked offline: API schemas, and the wiring a schema cannot
see (the shard count in four places, torchrun's rendezvous host, options the CLI really has)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer
import yaml

from retrieval.indexing.store.build.shards import parse_shard

kubernetes_validate = pytest.importorskip("kubernetes_validate.utils")

JOBS = Path(__file__).resolve().parents[1] / "deploy" / "k8s" / "jobs"
K8S_VERSION = "1.30.0"


def _docs(name: str) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all((JOBS / name).read_text()) if d}


def _container(job: dict) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def _options_of(*path: str) -> set[str]:
    from retrieval.cli.main import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.get_command(typer.Context(command), name)  # type: ignore[attr-defined]
    return {opt for param in command.params for opt in param.opts}


def _env(container: dict, name: str) -> str:
    (value,) = [e["value"] for e in container["env"] if e["name"] == name]
    return str(value)


@pytest.mark.parametrize("name", sorted(p.name for p in JOBS.glob("*.yaml")))
def test_jobs_are_valid(name: str) -> None:
    for resource in _docs(name).values():
        kubernetes_validate.validate(resource, K8S_VERSION, strict=True)


def test_shard_job_runs_every_shard_once_and_the_merge_takes_them_all() -> None:
    docs = _docs("index-shards-job.yaml")
    shards, merge = docs["Job", "retrieval-index-shards"], docs["Job", "retrieval-index-merge"]
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == spec["completions"]
    count = spec["completions"]
    (script,) = _container(shards)["args"]
    words = shlex.split(script)
    assert words[:4] == ["exec", "retrieval", "index", "build"]
    assert {w for w in words if w.startswith("--")} <= _options_of("index", "build")
    shard = words[words.index("--shard") + 1]
    assert shard == f"${{JOB_COMPLETION_INDEX}}/{count}"
    assert parse_shard(shard.replace("${JOB_COMPLETION_INDEX}", str(count - 1))).count == count
    out = words[words.index("--out") + 1]
    assert out.replace("${JOB_COMPLETION_INDEX}", "0") == "/volume/shards/0"

    merger = _container(merge)
    assert _env(merger, "SHARDS") == str(count)
    (wait,) = merge["spec"]["template"]["spec"]["initContainers"]
    assert _env(wait, "SHARDS") == str(count) and "/volume/shards/$i/shard.json" in wait["args"][0]
    merge_words = shlex.split(merger["args"][0])
    assert merge_words[:4] == ["exec", "retrieval", "index", "merge"]
    assert {w for w in merge_words if w.startswith("--")} <= _options_of("index", "merge")
    assert "seq -f /volume/shards/%g 0 $((SHARDS - 1))" in merger["args"][0]
    target = Path(merge_words[4])
    mounts = {m["mountPath"] for m in merger["volumeMounts"]}
    assert target.parent.as_posix() in mounts and target.as_posix() not in mounts  # the merge renames it in
    claims = {v["persistentVolumeClaim"]["claimName"] for v in merge["spec"]["template"]["spec"]["volumes"]}
    assert "retrieval-index" in claims


def test_train_job_runs_torchrun_with_c10d_rendezvous_at_pod_zero() -> None:
    docs = _docs("train-job.yaml")
    job, service = docs["Job", "retrieval-train"], docs["Service", "retrieval-train"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == spec["completions"]
    container = _container(job)
    assert container["command"] == ["torchrun"]
    args = container["args"]
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    assert int(flags["nnodes"]) == spec["completions"]
    assert flags["nproc-per-node"] == container["resources"]["limits"]["nvidia.com/gpu"]
    assert flags["rdzv-backend"] == "c10d"
    host, port = flags["rdzv-endpoint"].split(":")
    assert host == f"{job['metadata']['name']}-0.{pod['subdomain']}"  # Indexed Job pod 0's hostname
    assert pod["subdomain"] == service["metadata"]["name"] and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    assert int(port) == service["spec"]["ports"][0]["port"]
    script = next(i for i, a in enumerate(args) if not a.startswith("--"))
    assert args[script] == "/opt/venv/bin/retrieval" and args[script + 1] == "train"
    assert "python3.11 -m venv /opt/venv" in (JOBS.parents[1] / "Dockerfile.train").read_text()  # the script's home
    train_args = args[script + 2 :]
    assert {a for a in train_args if a.startswith("--")} <= _options_of("train")
    assert "--resume" in train_args  # a retried pod continues the run instead of refusing it
