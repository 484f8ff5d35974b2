"""``GET /items/{id}``, ``GET /items/{id}/thumbnail``, ``GET /items/{id}/image``, ``POST /items`` and
``DELETE /items/{id}``."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, File, Form, Header, Path, Query, Request, UploadFile
from fastapi.responses import Response
from pydantic import Field

from retrieval.indexing.common.errors import (
    DataError,
    IndexChangedError,
    ItemNotFoundError,
    KeyConflictError,
)
from retrieval.indexing.data.records import MAX_KEY_CHARS, MAX_LABEL_CHARS, ImageRecord, item_key, label_problem
from retrieval.indexing.usecases import (
    MAX_JSON_BYTES,
    MAX_KEYS,
    Item,
    Scalar,
    parse_metadata_for,
    replayed,
    request_digest,
)
from retrieval.indexing.usecases.updating import add_embedded, check_new_keys, remove_from
from retrieval.serving.api_models.schemas import MAX_ITEM_ID, AddItemsResponse, DeleteItemResponse, ItemResponse
from retrieval.serving.api_models.vector_schemas import WITH_VECTORS, ItemWithVector
from retrieval.serving.dependencies import COMMON_CAUSES, WRITE_CAUSES, Services, get_services, require_api_key
from retrieval.serving.http import api_examples
from retrieval.serving.http.problems import problem_responses
from retrieval.serving.http.service_errors import (
    InvalidParameterError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
    invalid_parameters,
)
from retrieval.serving.images.item_images import SHOWN_AS_STORED, image_response
from retrieval.serving.images.upload_storage import discard_item_upload, stored_uploads
from retrieval.serving.item_views import item_view, stored_with_vector
from retrieval.serving.query_pipeline import embed_upload
from retrieval.serving.routes.form_fields import renamed_field
from retrieval.serving.routes.strict_forms import StrictFormRoute
from retrieval.serving.service_state import Snapshot

router = APIRouter(tags=["items"], route_class=StrictFormRoute)  # form text must decode: 400, not mojibake
ITEM_PROBLEMS = problem_responses(ItemNotFoundError, *COMMON_CAUSES)
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not Modified: the If-None-Match header named the current ETag"}
}
ADD_PROBLEMS = problem_responses(
    DataError, KeyConflictError, *WRITE_CAUSES, PayloadTooLargeError, UnsupportedMediaTypeError
)
DELETE_PROBLEMS = problem_responses(ItemNotFoundError, *WRITE_CAUSES)
THUMBNAIL_CACHE = "public, max-age=3600"


@router.get(
    "/items/{item_id}",
    response_model=ItemResponse | ItemWithVector,
    responses={**api_examples.example(api_examples.ITEM), **ITEM_PROBLEMS},
    summary="One stored item",
)
async def get_item(
    item_id: int = Path(ge=1, le=MAX_ITEM_ID, description="item id"),
    with_vectors: bool = Query(False, description=WITH_VECTORS),
    services: Services = Depends(get_services),
) -> ItemResponse | ItemWithVector:
    record, vector = await services.state.read(lambda snap: stored_with_vector(snap.store, item_id, with_vectors))
    return item_view(record, services.settings.shows_paths, vector)


async def stored_record(
    item_id: int = Path(ge=1, le=MAX_ITEM_ID, description="item id"), services: Services = Depends(get_services)
) -> Item:
    """The stored item whose thumbnail or image a route sends (a dependency: the path's ``item_id``)."""
    return await services.state.read(lambda snap: snap.store.item(item_id))


@router.get(
    "/items/{item_id}/thumbnail",
    responses={
        200: {"content": {"image/jpeg": {}}, "description": "the thumbnail"},
        **NOT_MODIFIED,
        **ITEM_PROBLEMS,
    },
    response_class=Response,
    summary="A small JPEG of a stored item",
)
async def get_thumbnail(
    request: Request, record: Item = Depends(stored_record), services: Services = Depends(get_services)
) -> Response:
    thumb = await services.thumbnails.thumbnail_for(record)
    headers = {"Cache-Control": THUMBNAIL_CACHE, "ETag": thumb.etag}
    if request.headers.get("if-none-match") == thumb.etag:
        return Response(status_code=304, headers=headers)
    return Response(thumb.jpeg, media_type="image/jpeg", headers=headers)


@router.get(
    "/items/{item_id}/image",
    responses={
        200: {"content": {mime: {} for mime in (*SHOWN_AS_STORED.values(),)}, "description": "the image"},
        **NOT_MODIFIED,
        **ITEM_PROBLEMS,
    },
    response_class=Response,
    summary="A stored item's image at full size",
)
async def get_image(
    request: Request, record: Item = Depends(stored_record), services: Services = Depends(get_services)
) -> Response:
    response = await image_response(record, services.settings, services.decode_limiter)
    if request.headers.get("if-none-match") == response.headers["etag"]:
        return Response(status_code=304, headers={key: response.headers[key] for key in ("etag", "cache-control")})
    return response


_METADATA_FIELD = Form(
    None,
    description="per-item metadata as JSON: one object for every image, or an array of one object per image; "
    f"string keys (not 'label') to strings, numbers, booleans or null, at most {MAX_KEYS} keys and "
    f"{MAX_JSON_BYTES} bytes per object. Returned with the item and usable in the searches' filter; "
    "the uploaded file name is kept as 'filename' unless given",
    examples=['{"shop": "berlin", "price": 12.5, "in_stock": true}'],
)
_IDEMPOTENCY_HEADER = Header(
    None,
    alias="Idempotency-Key",
    min_length=1,
    max_length=200,
    description="any unique string per logical request: a retry with the same key and body gets the first "
    "answer and adds nothing; the key sent with another body is a 422",
)


@router.post(
    "/items",
    response_model=AddItemsResponse,
    status_code=201,
    responses={**api_examples.example(api_examples.ADD_ITEMS, status=201), **ADD_PROBLEMS},
    dependencies=[Depends(require_api_key)],
    summary="Add images to the index (API key)",
)
async def add_items(
    response: Response,
    image: list[UploadFile] | None = File(None, description="the images: one 'image' field per image"),
    label: list[Annotated[str, Field(min_length=1)]] | None = Form(
        None,
        description=f"one non-blank label (at most {MAX_LABEL_CHARS} characters) per image, or a single label for all",
    ),
    key: list[str] | None = Form(
        None,
        description=f"optional: one key per image, the item's own id (unique per index, at most {MAX_KEY_CHARS} "
        "characters of one line); a key already in the index is a 409 (replace with PUT /items/by-key/{key})",
    ),
    images: list[UploadFile] | None = File(None, deprecated=True, description="the old name of 'image'"),
    labels: list[Annotated[str, Field(min_length=1)]] | None = Form(
        None, deprecated=True, description="the old name of 'label'"
    ),
    metadata: str | None = _METADATA_FIELD,
    idempotency_key: str | None = _IDEMPOTENCY_HEADER,
    services: Services = Depends(get_services),
) -> AddItemsResponse:
    uploads = renamed_field(image, images, "image", "images", response)
    given_labels = renamed_field(label, labels, "label", "labels", response)
    if not uploads or not given_labels:
        raise InvalidParameterError(f"send at least one form field '{'image' if not uploads else 'label'}'.")
    settings = services.settings
    labels = _match_labels(given_labels, len(uploads), settings.max_files_per_upload)
    extra = _match_metadata(metadata, len(uploads))
    keys = _match_keys(key, len(uploads))
    if any(keys) and idempotency_key is None:  # a key in use: refused before the images are embedded (and by the add)
        await services.state.read(lambda snap: check_new_keys(snap.store, keys))
    with services.state.hold() as snapshot:
        embedded = [await embed_upload(services, upload, snapshot) for upload in uploads]
    embeddings = np.stack([item.vector for item in embedded]).astype(np.float32)
    names = [upload.filename or "" for upload in uploads]
    digest = request_digest(images=[item.data for item in embedded], records=[labels, keys, extra, names])

    def add(current: Snapshot) -> AddItemsResponse:
        """Files are stored only once every image passed validation, and removed again if the add fails. A
        reload meanwhile that kept the model leaves the embeddings valid: they go into the reloaded index."""
        if current.embedder.model_sha256 != snapshot.embedder.model_sha256:
            raise IndexChangedError(
                "the service switched to another model while the images were being embedded; send them again."
            )
        if idempotency_key is not None:
            with invalid_parameters():  # the first answer, once a retry embedded its images again
                if (first := replayed(current.store, idempotency_key, digest)) is not None:
                    return AddItemsResponse(**first)
        with stored_uploads(settings.index_dir, current.store, [item.data for item in embedded]) as paths:
            records = [
                ImageRecord(path=path, label=label, metadata={"filename": upload.filename or "", **more}, key=key)
                for path, label, upload, more, key in zip(paths, labels, uploads, extra, keys, strict=True)
            ]
            added = add_embedded(
                current.store, records, embeddings, idempotency_key=idempotency_key, request_digest=digest
            )
        return AddItemsResponse(ids=added.ids, count=added.count)

    return await services.state.write(add)


@router.delete(
    "/items/{item_id}",
    response_model=DeleteItemResponse,
    responses={**api_examples.example(api_examples.DELETE_ITEM), **DELETE_PROBLEMS},
    dependencies=[Depends(require_api_key)],
    summary="Remove an item from the index (API key)",
)
async def delete_item(
    item_id: int = Path(ge=1, le=MAX_ITEM_ID, description="item id"), services: Services = Depends(get_services)
) -> DeleteItemResponse:
    def remove(current: Snapshot) -> DeleteItemResponse:
        removal = remove_from(current.store, [item_id])  # 404 for an unknown id
        (item,) = removal.items
        discard_item_upload(services.settings.index_dir, current.store, item.path)
        return DeleteItemResponse(id=item_id, key=item.key, count=removal.count)

    return await services.state.write(remove)


def _match_metadata(text: str | None, count: int) -> list[dict[str, Scalar]]:
    if text is None or not text.strip():
        return [{} for _ in range(count)]
    with invalid_parameters():
        return parse_metadata_for(text, count, "form field 'metadata'")


def _match_keys(keys: list[str] | None, count: int) -> list[str | None]:
    """One checked key per image (none: every image keyless); a bad key or a wrong count is a 422."""
    if not keys:
        return [None] * count
    with invalid_parameters("form field 'key'"):
        checked = [item_key(key) for key in keys]
    if len(keys) != count:
        raise InvalidParameterError(f"form field 'key': got {len(keys)} keys for {count} images; send one per image.")
    return list(checked)


def _match_labels(labels: list[str], count: int, max_files: int) -> list[str]:
    if count > max_files:
        raise PayloadTooLargeError(
            f"{count} images in one request exceed the limit of {max_files}; send them in parts."
        )
    labels = [label.strip() for label in labels]
    if problem := next(filter(None, map(label_problem, labels)), None):
        raise InvalidParameterError(f"form field 'label': the label {problem}.")
    if len(labels) == 1:
        return labels * count
    if len(labels) != count:
        raise InvalidParameterError(
            f"form field 'label': got {len(labels)} labels for {count} images; send one per image or one for all."
        )
    return labels
