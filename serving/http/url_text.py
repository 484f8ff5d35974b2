"""URLs as the text they claim to be: uvicorn and Starlette percent-decode a request's path with
``errors="replace"``, so ``/items/by-key/%FF%FE`` and ``/items/by-key/%FE%FF`` both reached the routes as
the key "\\ufffd\\ufffd" and the second PUT replaced the first's item. ``Utf8Url`` answers a request whose
path or query string does not percent-decode to UTF-8 with a 400 problem before any route sees it, for
every method (a GET of such a key is refused as a PUT is), as the multipart fields are (``strict_forms``).
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from retrieval.serving.http.problems import problem_response


class Utf8Url:
    """ASGI middleware: a 400 for a path or query string whose percent-escapes are not UTF-8."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (part := undecodable_part(scope)) is not None:
            detail = f"the URL's {part} is not valid UTF-8 once percent-decoded; percent-encode text as UTF-8."
            await problem_response(400, detail)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def undecodable_part(scope: Scope) -> str | None:
    """ "path" or "query string" when that part of the request's URL percent-decodes to bytes that are not
    UTF-8 (overlong forms and encoded surrogates included), else None."""
    parts = {"path": scope.get("raw_path") or b"", "query string": scope.get("query_string") or b""}
    for part, raw in parts.items():
        try:
            unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return part
    return None
