"""One way for tests to pick a free loopback TCP port (servers, torchrun rendezvous)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (the caller binds it right away)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
