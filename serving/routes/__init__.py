"""The service's routes: HTTP in, a call of the service, HTTP out.

``routes_search`` (``POST /search``: its one route for forms and JSON bodies; ``/embed``,
``/items/{id}/similar``), ``search_fields`` (the search settings as query parameters, form fields or JSON
fields, one rule for all), ``routes_items`` (``/items``),
``routes_keys`` (``/items/by-key/{key}``: items by their own keys, upsert), ``routes_browse`` (``GET /labels``,
``GET /items``: counts and filtered pages behind a cursor), ``routes_duplicates`` (``GET /duplicates``,
``GET /items/{id}/duplicates``: groups of copies and an item's copies), ``routes_audit`` (``GET /audit``: the
items most likely mislabelled, paged), ``routes_admin`` (``/admin/reload``) and
``routes_health`` (``/healthz``, ``/readyz``, ``/metrics``), ``routes_vectors`` (JSON bodies of ``POST /items``,
``PUT /items/by-key/{key}``: vectors in; the JSON body of ``POST /search`` documented; ``POST /items/delete`` by filter;
``GET /items/by-key/{key}/similar``), sharing ``form_fields`` (the one vocabulary of upload
fields, old names deprecated) and ``strict_forms`` (form text that does not decode is a 400, not Latin-1
mojibake), with ``form_shape`` (a field sent twice, in both the query and the form, or one the route does not take, is a 422). The top floor
of the service: the request and response models (``api_models.schemas``, ``api_models.vector_schemas``) and the
service objects (``serving.dependencies``) live below it, and nothing below imports a route.
"""
