"""Items by their own keys: ``GET``, ``PUT`` (create or replace: upsert) and ``DELETE /items/by-key/{key}``.

A key is the user's id of an item (a SKU, a file key), unique per index, given on ``POST /items``
(``key`` fields), ``PUT`` here, or in a CSV manifest's ``key`` column; the integer ids stay valid. A PUT
replaces the item's image, label and metadata in one write under the same id (an upsert, as in Qdrant or
Milvus: ``Store.add(..., replace=True)``). The key is the
rest of the path, so it may hold ``/``; percent-encode other reserved characters.
"""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Depends, File, Form, Path, Query, Response, UploadFile

from retrieval.indexing.common.errors import DataError, IndexChangedError, ItemNotFoundError
from retrieval.indexing.data.records import MAX_KEY_CHARS, ImageRecord, item_key, label_problem
from retrieval.indexing.store.shared.items.item_filter import parse_metadata
from retrieval.indexing.store.shared.items.items_db import Item
from retrieval.serving.api_models.schemas import DeleteItemResponse, ItemResponse, PutItemResponse
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
from retrieval.serving.images.upload_storage import discard_item_upload, stored_uploads
from retrieval.serving.item_views import item_view, stored_with_vector
from retrieval.serving.query_pipeline import embed_upload
from retrieval.serving.routes.strict_forms import StrictFormRoute
from retrieval.serving.service_state import Snapshot

router = APIRouter(tags=["items"], route_class=StrictFormRoute)
_KEY = f"the item's key (1..{MAX_KEY_CHARS} characters of one line; may hold '/')"
KEY_PATH = "/items/by-key/{key:path}"


def checked_key(key: str) -> str:
    """The key of the path as stored (NFC), or a 422 saying why it cannot be one (``item_key``)."""
    with invalid_parameters():
        return item_key(key)


@router.get(
    KEY_PATH,
    response_model=ItemResponse | ItemWithVector,
    responses={**api_examples.example(api_examples.ITEM), **problem_responses(ItemNotFoundError, *COMMON_CAUSES)},
    summary="The item carrying a key",
)
async def get_by_key(
    key: str = Path(description=_KEY),
    with_vectors: bool = Query(False, description=WITH_VECTORS),
    services: Services = Depends(get_services),
) -> ItemResponse | ItemWithVector:
    key = checked_key(key)

    def read(snapshot: Snapshot) -> tuple[Item, np.ndarray | None]:
        return stored_with_vector(snapshot.store, snapshot.store.item_by_key(key).id, with_vectors)

    item, vector = await services.state.read(read)
    return item_view(item, services.settings.shows_paths, vector)


@router.put(
    KEY_PATH,
    response_model=PutItemResponse,
    responses={
        **api_examples.example(api_examples.PUT_ITEM),
        201: {
            "model": PutItemResponse,
            "description": "Created: no item carried the key",
            "content": {"application/json": {"example": {**api_examples.PUT_ITEM, "replaced": None}}},
        },
        **problem_responses(DataError, *WRITE_CAUSES, PayloadTooLargeError, UnsupportedMediaTypeError),
    },
    dependencies=[Depends(require_api_key)],
    summary="Create or replace the item carrying a key: image, label and metadata in one write (API key)",
)
async def put_by_key(
    response: Response,
    key: str = Path(description=_KEY),
    image: UploadFile = File(description="the item's image"),
    label: str = Form(description="the item's label (non-blank)"),
    metadata: str | None = Form(
        None, description="the item's metadata as one JSON object (as POST /items); the file name is kept as 'filename'"
    ),
    services: Services = Depends(get_services),
) -> PutItemResponse:
    key, label = checked_key(key), label.strip()
    if (problem := label_problem(label)) is not None:
        raise InvalidParameterError(f"form field 'label': the label {problem}.")
    with invalid_parameters():
        extra = parse_metadata(metadata, "form field 'metadata'") if metadata and metadata.strip() else {}
    with services.state.hold() as snapshot:
        embedded = await embed_upload(services, image, snapshot)
    index_dir = services.settings.index_dir

    def put(current: Snapshot) -> PutItemResponse:
        if current.embedder.model_sha256 != snapshot.embedder.model_sha256:
            raise IndexChangedError(
                "the service switched to another model while the image was being embedded; send it again."
            )
        old_id = current.store.ids_of_keys([key]).get(key)
        old_path = current.store.item(old_id).path if old_id is not None else None
        with stored_uploads(index_dir, current.store, [embedded.data]) as (path,):
            item_metadata = {"filename": image.filename or "", **extra}
            record = ImageRecord(path=path, label=label, metadata=item_metadata, key=key)
            (new_id,) = current.store.add([record], embedded.vector[None], replace=True)
        if old_path is not None:
            discard_item_upload(index_dir, current.store, old_path)
        return PutItemResponse(id=new_id, key=key, replaced=old_id, count=current.store.count)

    answer = await services.state.write(put)
    response.status_code = 200 if answer.replaced is not None else 201
    return answer


@router.delete(
    KEY_PATH,
    response_model=DeleteItemResponse,
    responses={**api_examples.example(api_examples.DELETE_ITEM), **problem_responses(ItemNotFoundError, *WRITE_CAUSES)},
    dependencies=[Depends(require_api_key)],
    summary="Remove the item carrying a key (API key)",
)
async def delete_by_key(
    key: str = Path(description=_KEY), services: Services = Depends(get_services)
) -> DeleteItemResponse:
    key = checked_key(key)

    def remove(current: Snapshot) -> DeleteItemResponse:
        item = current.store.item_by_key(key)  # 404 for an unknown key
        current.store.remove([item.id])
        discard_item_upload(services.settings.index_dir, current.store, item.path)
        return DeleteItemResponse(id=item.id, key=key, count=current.store.count)

    return await services.state.write(remove)
