"""The ``retrieval`` command's thread settings: set before numpy and faiss load, never overriding the user's."""

from __future__ import annotations

import os
import subprocess
import sys

from retrieval.cli.thread_env import THREAD_ENV_DEFAULTS, apply_thread_env_defaults

PROBE = (
    "import sys, os\n"
    "import retrieval.cli.main\n"
    "print(os.environ['OMP_WAIT_POLICY'], os.environ['OPENBLAS_THREAD_TIMEOUT'])\n"
)


def _probe(**overrides: str) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV_DEFAULTS}
    env.update(overrides)
    output = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    policy, timeout = output.stdout.split()
    return policy, timeout


def test_defaults_fill_only_what_is_missing() -> None:
    environ = {"OPENBLAS_THREAD_TIMEOUT": "28"}
    apply_thread_env_defaults(environ)
    assert environ == {"OPENBLAS_THREAD_TIMEOUT": "28", "OMP_WAIT_POLICY": "PASSIVE"}


def test_the_command_sets_them_and_keeps_the_users() -> None:
    assert _probe() == ("PASSIVE", "20")
    assert _probe(OMP_WAIT_POLICY="ACTIVE", OPENBLAS_THREAD_TIMEOUT="8") == ("ACTIVE", "8")


def test_they_are_set_before_numpy_loads() -> None:
    """OpenBLAS and OpenMP read them once, when the library loads: the module must not bring numpy in."""
    code = "import sys\nimport retrieval.cli.thread_env\nprint('numpy' in sys.modules, 'faiss' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert output.stdout.split() == ["False", "False"]
