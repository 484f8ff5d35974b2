"""The service's request and response models (pydantic), below every other floor of ``serving`` but the
settings: ``schemas`` (the models every route, the OpenAPI document and the error documents share) and
``vector_schemas`` (those of the JSON bodies: vectors in, searched, and out)."""
