"""Which form fields a route takes once, so that a request naming one twice is refused, not guessed.

FastAPI keeps the last of two ``image`` parts on ``PUT /items/by-key/{key}`` (or two ``label`` fields),
ignores a form ``key`` beside the path's key, and lets a form ``k`` override the query's ``k``; each was a
silent guess at what the client meant, and so was a field the route does not take at all (a typo, a
``vector`` in a form): ignored. ``FormShape.problem`` names the field of such a request for a 422 (an unknown
one with the fields the route takes, as a JSON body's unknown key is).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Union, get_args, get_origin

from fastapi.dependencies.models import Dependant
from starlette.datastructures import FormData, QueryParams


@dataclass(frozen=True)
class FormShape:
    """The form fields a route takes once, its path parameters, its query parameters and every form field it
    takes (by name)."""

    single: frozenset[str]
    path: frozenset[str]
    query: frozenset[str]
    fields: tuple[str, ...] = ()

    @classmethod
    def of(cls, dependant: Dependant) -> FormShape:
        dependants = list(_walk(dependant))
        fields = [field for each in dependants for field in each.body_params]
        return cls(
            single=frozenset(field.alias for field in fields if not _is_sequence(field.field_info.annotation)),
            path=frozenset(param.alias for each in dependants for param in each.path_params),
            query=frozenset(param.alias for each in dependants for param in each.query_params),
            fields=tuple(dict.fromkeys(field.alias for field in fields)),
        )

    def problem(self, form: FormData, query: QueryParams) -> str | None:
        """Why the form is ambiguous (a sentence naming the field), or None."""
        for name in dict.fromkeys(form.keys()):
            if name in self.path:
                return f"form field '{name}': the {name} is given by the path; do not send it in the form as well."
            if name in self.query and name in query:
                return f"'{name}' was sent both as a query parameter and as a form field; send it once."
            if name not in self.fields:
                known = ", ".join(f"'{field}'" for field in self.fields)
                return f"form field '{name}' is not one this endpoint takes; it takes {known}."
            if name in self.single and (count := len(form.getlist(name))) > 1:
                return f"form field '{name}' was sent {count} times; this endpoint takes one."
        return None


def _walk(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for inner in dependant.dependencies:
        yield from _walk(inner)


def _is_sequence(annotation: object) -> bool:
    """True for ``list[...]`` (a field sent once per item), also inside ``Optional`` or ``Annotated``."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_sequence(get_args(annotation)[0])
    if origin is Union or origin is UnionType:
        return any(map(_is_sequence, get_args(annotation)))
    return origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset)
