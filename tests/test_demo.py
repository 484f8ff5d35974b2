"""The README's main command, end to end at a small size: synth -> train -> export -> index -> eval -> serve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from launching import free_port

ROOT = Path(__file__).resolve().parents[1]


def _wait_ready(url: str, process: subprocess.Popen, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"demo exited early with code {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.loads(response.read())
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} not ready after {timeout_s} s")


@pytest.mark.slow
def test_demo_runs_the_whole_chain_and_serves(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DEMO_DIR": str(tmp_path / "demo"),
        "DEMO_CLASSES": "12",
        "DEMO_PER_CLASS": "10",
        "DEMO_BATCH": "16",
        "DEMO_EPOCHS": "1",
        "PORT": str(port),
        "RETRIEVAL": str(Path(sys.executable).parent / "retrieval"),
    }
    log = open(tmp_path / "demo.log", "w")
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        ready = _wait_ready(f"http://127.0.0.1:{port}/readyz", process, timeout_s=600)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
            assert b"<input" in page.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        log.close()
    assert ready
    metrics = json.loads((tmp_path / "demo" / "eval" / "metrics.json").read_text())
    for kind in ("float", "binary"):
        assert set(metrics[kind]) >= {"map_at_r", "r_precision", "precision_at_1", "nmi", "recall_at_k"}
    assert (tmp_path / "demo" / "run" / "export" / "model.onnx").is_file()
    output = (tmp_path / "demo.log").read_text()
    assert f"http://127.0.0.1:{port}/" in output


def test_make_demo_takes_the_port_on_its_command_line_and_the_readme_says_so() -> None:
    planned = subprocess.run(
        ["make", "-n", "demo", "PORT=8123", "STAMP=/dev/null"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert planned.returncode == 0, planned.stderr
    assert "PORT=8123 bash scripts/demo.sh" in planned.stdout  # the port was a variable of the script alone
    assert "PORT=8001" in (ROOT / "README.md").read_text()
