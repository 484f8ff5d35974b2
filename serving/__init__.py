"""The FastAPI search service (``retrieval serve``); no torch.

``app`` (the app factory: routes, middleware, problem handlers) with ``settings`` (one pydantic model
from the CLI or ``RETRIEVAL_*``), ``lifecycle`` (first load, reloads, shutdown) and ``service_state`` (the
loaded model and index on one store thread, swapped atomically). Routes: ``routes.routes_search``
(``/search``, ``/embed``, ``/items/{id}/similar``), ``routes.routes_items`` (``/items``), ``routes.routes_keys``
(``/items/by-key/{key}``: items by their own keys, upsert), ``routes.routes_browse``
(``GET /labels``, ``GET /items``: counts and filtered pages behind a cursor), ``routes.routes_admin``
(``/admin/reload``), ``routes.routes_health`` (``/healthz``, ``/readyz``, ``/metrics``), sharing
``dependencies`` (the service objects, the API-key check), ``api_models.schemas`` (request and response
models), ``routes.form_fields`` (the one vocabulary of upload fields, old names deprecated) and ``item_views``
(an item as a hit or a response, its path private when so set). ``routes.strict_forms`` refuses form text that does not decode (400, not Latin-1 mojibake). A query: ``images.uploads`` (size and type checks) -> ``query_pipeline`` (admitted by ``http.admission``,
the bound on queued images; decode, embed through ``batcher``'s micro-batches, search) -> hits;
``images.upload_storage`` keeps added images, ``images.thumbnails`` previews them, ``images.item_images`` sends them at
full size. Errors: ``http.service_errors`` (the service's own meanings) and
``http.problems`` (``ERROR_STATUSES``, the one error -> HTTP status table). ``http.middleware`` (methods,
timeouts, body size, metrics), ``http.rate_limit`` (a per-client token bucket), ``glibc_malloc`` (a cap
on glibc's arenas and freed memory handed back, so the heap does not creep up), ``http.prometheus`` (the metrics), ``http.openapi`` and ``http.api_examples`` (the
OpenAPI document).
"""
