"""Form fields as the text they claim to be: Starlette decodes a multipart field whose bytes are not valid
in the request's charset (UTF-8 unless the Content-Type names another) as Latin-1 instead, so a label sent
as ``b"caf\\xe9"`` was stored as mojibake with a 201. Here such a field is a 400 problem naming it.

``StrictFormRoute`` is the route class of the routers that take form fields; its requests parse a
multipart body with ``StrictMultiPartParser``, which refuses a field value, field name or file name whose
bytes do not decode, and refuse a form whose fields are ambiguous for the route (``form_shape``: a field
sent twice that the route takes once, a field that is also the path's or the query's) with a 422. A
url-encoded form whose percent-escapes are not UTF-8 is a 400 too (Starlette decodes them to U+FFFD).
Everything else (limits, files) is Starlette's own parsing.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import aclosing
from typing import Any
from urllib.parse import unquote_to_bytes

from fastapi import Request, Response
from fastapi.routing import APIRoute
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.types import Receive, Scope

from retrieval.serving.routes.form_shape import FormShape


class StrictMultiPartParser(MultiPartParser):
    """Starlette's multipart parser, refusing (``MultiPartException``) text that does not decode."""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._current_part.content_disposition)
        _check_decodes(options.get(b"name", b""), self._charset, "a form field's name")
        _check_decodes(options.get(b"filename", b""), self._charset, "a file name")
        super().on_headers_finished()

    def on_part_end(self) -> None:
        if self._current_part.file is None:
            _check_decodes(self._current_part.data, self._charset, f"form field '{self._current_part.field_name}'")
        super().on_part_end()


def _check_decodes(data: bytes | bytearray, charset: str, what: str) -> None:
    try:
        bytes(data).decode(charset)
    except (UnicodeDecodeError, LookupError):
        raise MultiPartException(f"{what} is not valid {charset.upper()} text; send it as UTF-8.") from None


def _check_urlencoded(body: bytes) -> None:
    """A 400 naming the first field of a url-encoded form whose name or value is not UTF-8 once decoded."""
    for pair in body.split(b"&"):
        name, _, value = pair.partition(b"=")
        for part in (name, value):
            try:
                unquote_to_bytes(part.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                shown = unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", "backslashreplace")
                detail = f"form field '{shown}' is not valid UTF-8 text; send it as UTF-8."
                raise HTTPException(status_code=400, detail=detail) from None


class StrictFormRequest(Request):
    """A request whose multipart form is parsed by ``StrictMultiPartParser``, and refused (422) when its
    fields are ambiguous for the route (``FormShape``)."""

    def __init__(self, scope: Scope, receive: Receive, shape: FormShape):
        super().__init__(scope, receive)
        self.shape = shape

    async def _get_form(
        self, *, max_files: int | float = 1000, max_fields: int | float = 1000, max_part_size: int = 1024 * 1024
    ) -> FormData:
        form = await self._parse_form(max_files=max_files, max_fields=max_fields, max_part_size=max_part_size)
        if (problem := self.shape.problem(form, self.query_params)) is not None:
            await form.close()
            raise HTTPException(status_code=422, detail=problem)
        return form

    async def _parse_form(self, *, max_files: int | float, max_fields: int | float, max_part_size: int) -> FormData:
        content_type, _ = parse_options_header(self.headers.get("Content-Type"))
        if self._form is None and content_type == b"multipart/form-data":
            try:
                async with aclosing(self.stream()) as stream:
                    parser = StrictMultiPartParser(
                        self.headers, stream, max_files=max_files, max_fields=max_fields, max_part_size=max_part_size
                    )
                    self._form = await parser.parse()
            except MultiPartException as error:
                raise HTTPException(status_code=400, detail=error.message) from None
        if self._form is None and content_type == b"application/x-www-form-urlencoded":
            _check_urlencoded(await self.body())
        return await super()._get_form(max_files=max_files, max_fields=max_fields, max_part_size=max_part_size)


class StrictFormRoute(APIRoute):
    """An ``APIRoute`` whose handler gets a ``StrictFormRequest`` (FastAPI's custom request class pattern)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler, shape = super().get_route_handler(), FormShape.of(self.dependant)

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictFormRequest(request.scope, request.receive, shape))

        return strict_handler
