"""Around every request: ``middleware`` (methods, timeouts, body size,
metrics), ``url_text`` (a URL that is not UTF-8 is a 400), ``cors_policy`` (the CORS methods and headers,
read off the routes), ``admission`` (the bound on queued images), ``rate_limit`` (a per-client token bucket),
``service_errors`` (the service's own error meanings) and ``problems`` (``ERROR_STATUSES``, the one error ->
HTTP status table, and the problem+json handlers), ``prometheus`` (the metrics), ``openapi``, ``json_bodies`` (JSON
bodies beside the multipart ones in the document; ``json_body_route``: a route that takes JSON requests only, beside
a multipart one of the same path) and ``api_examples`` (the OpenAPI document and its examples). The request and
response models they document live one floor below, in ``serving.api_models``.
"""
