"""Around every request: ``middleware`` (methods, timeouts, body size,
metrics), ``admission`` (the bound on queued images), ``rate_limit`` (a per-client token bucket),
``service_errors`` (the service's own error meanings) and ``problems`` (``ERROR_STATUSES``, the one error ->
HTTP status table, and the problem+json handlers), ``prometheus`` (the metrics), ``openapi`` and
``api_examples`` (the OpenAPI document and its examples), ``schemas`` (the pydantic request and response
models every route and the OpenAPI document share).
"""
