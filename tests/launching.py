"""How tests start processes that talk over the network: a free loopback port, a torchrun prefix."""

from __future__ import annotations

import socket
import sys


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (the caller binds it right away)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torchrun_prefix(processes: int) -> list[str]:
    """``python -m torch.distributed.run`` for ``processes`` local ranks on a fresh loopback port."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
        "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
    ]  # fmt: skip
