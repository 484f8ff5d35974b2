"""The service's routes: HTTP in, a call of the service, HTTP out.

``routes_search`` (``/search``, ``/embed``, ``/items/{id}/similar``), ``routes_items`` (``/items``),
``routes_keys`` (``/items/by-key/{key}``: items by their own keys, upsert), ``routes_browse`` (``GET /labels``,
``GET /items``: counts and filtered pages behind a cursor), ``routes_duplicates`` (``GET /duplicates``,
``GET /items/{id}/duplicates``: groups of copies and an item's copies), ``routes_admin`` (``/admin/reload``) and
``routes_health`` (``/healthz``, ``/readyz``, ``/metrics``), sharing ``dependencies`` (the service objects, the
API-key check), ``schemas`` (the request and response models), ``form_fields`` (the one vocabulary of upload
fields, old names deprecated) and ``strict_forms`` (form text that does not decode is a 400, not Latin-1
mojibake).
"""
