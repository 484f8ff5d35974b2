"""A local HTTP server that answers as the Hugging Face hub does for the requests ``hf_hub_download`` makes.

``HEAD`` and ``GET /{owner}/{repo}/resolve/{revision}/{filename}`` with the hub's headers (``X-Repo-Commit``,
``ETag`` and ``X-Linked-Etag`` holding the file's sha256 as for a Git LFS file, ``X-Linked-Size``,
``Content-Length``), a 206 answer to a ``Range`` request, and a 404 with ``X-Error-Code: EntryNotFound`` for a
file it does not hold. Three faults on demand: ``drop_first_get`` sends half the body of the first GET and closes
the connection; ``corrupt`` serves other bytes than the sha256 it announces; ``stall_at`` sends a GET's body up to
that byte and then waits for ``release`` (a client killed meanwhile leaves a partial file behind);
``ignore_range`` answers a Range request with the whole file. ``requests`` records
``(method, path, Range header)`` of each request (huggingface_hub also asks ``/api/agent-harnesses`` once a
day, best effort: a 404 here).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    files: dict[str, bytes]  # "owner/repo/filename" -> content
    drop_first_get: bool = False
    corrupt: bool = False
    stall_at: int | None = None
    ignore_range: bool = False  # answer a Range request with the whole file (200), as some proxies do
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    url: str = ""

    def sha256(self, key: str) -> str:
        return hashlib.sha256(self.files[key]).hexdigest()

    def file_requests(self) -> list[tuple[str, str, str | None]]:
        """The requests for files (not huggingface_hub's other calls, e.g. its agent registry at /api/)."""
        return [request for request in self.requests if "/resolve/" in request[1]]

    def gets(self) -> list[tuple[str, str, str | None]]:
        return [request for request in self.file_requests() if request[0] == "GET"]


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            hub.requests.append((self.command, self.path, self.headers.get("Range")))
            parts = self.path.lstrip("/").split("/")  # owner, repo, "resolve", revision, filename
            key = "/".join(parts[:2] + parts[4:])
            if len(parts) < 5 or parts[2] != "resolve" or key not in hub.files:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            content = hub.files[key]
            etag = f'"{hub.sha256(key)}"'
            if hub.corrupt:
                content = bytes(byte ^ 0xFF for byte in content[:64]) + content[64:]
            asked = self.headers["Range"] and not hub.ignore_range
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0]) if asked else 0
            self.send_response(206 if start else 200)
            for name_, value in (("X-Repo-Commit", COMMIT), ("ETag", etag), ("X-Linked-Etag", etag)):
                self.send_header(name_, value)
            self.send_header("X-Linked-Size", str(len(content)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(content) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}")
            self.end_headers()
            if not body:
                return
            if hub.drop_first_get and len(hub.gets()) == 1:
                self.wfile.write(content[start : len(content) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            stall = hub.stall_at if hub.stall_at is not None and start < hub.stall_at else start
            try:
                self.wfile.write(content[start:stall])
                self.wfile.flush()
                if stall > start:
                    hub.release.wait(timeout=60)
                self.wfile.write(content[stall:])
            except OSError:  # the client went away (killed) while the answer stalled
                self.close_connection = True

    return Handler


@contextmanager
def serving(hub: FakeHub) -> Iterator[FakeHub]:
    """``hub`` served on a free local port (``hub.url``) for the ``with`` block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
