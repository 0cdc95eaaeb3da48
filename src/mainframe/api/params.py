"""Integer path and query parameters of the hot routes, each declared once for both its check
and its OpenAPI entry. The hot routes read them from the request themselves (see lane.py);
a value that is not ASCII digits in range is a 422 naming `path.<name>` or `query.<name>`,
in the error body every other refusal has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

from starlette.requests import Request

from mainframe.store import Invalid

MAX_DIGITS = 20  # more than any bound here has


@dataclass(frozen=True, slots=True)
class IntParam:
    """An integer in the path or the query string, bounded, in ASCII digits."""

    name: str
    where: Literal["path", "query"]
    minimum: int
    maximum: int
    description: str
    default: int | None = None

    def value(self, request: Request) -> int:
        """The value of a path parameter, or of a query parameter that has a default."""
        found = self.read(request)
        if found is None:  # a query parameter without a default, absent
            raise Invalid(f"{self.where}.{self.name}", "is required")
        return found

    def read(self, request: Request) -> int | None:
        """The value, the default (None without one) when a query parameter is absent;
        Invalid when it is not a whole number in range."""
        if self.where == "path":
            raw = request.path_params.get(self.name)
        else:
            raw = query_value(request.scope["query_string"], self.name)
        if raw is None:
            return self.default
        # str.isdigit() also admits '²' and '٣', which int() refuses or reads as another number;
        # and int() refuses a string of over 4,300 digits with an error of its own.
        digits = raw.isascii() and raw.isdigit() and len(raw) <= MAX_DIGITS
        if not digits or not self.minimum <= int(raw) <= self.maximum:
            raise Invalid(
                f"{self.where}.{self.name}",
                f"must be a whole number from {self.minimum} to {self.maximum} (ASCII digits)",
            )
        return int(raw)

    def doc(self) -> dict[str, Any]:
        """The parameter's OpenAPI entry."""
        schema: dict[str, Any] = {
            "type": "integer",
            "minimum": self.minimum,
            "maximum": self.maximum,
        }
        if self.default is not None:
            schema["default"] = self.default
        return {
            "name": self.name,
            "in": self.where,
            "required": self.where == "path",
            "schema": schema,
            "description": self.description,
        }


def query_value(query: bytes, name: str) -> str | None:
    """The value of `name` in a raw query string as Starlette's QueryParams reads it: the
    standard library's parser over the same decoding, the last value winning."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return dict(pairs).get(name)


def documented(*params: IntParam) -> dict[str, Any]:
    """`openapi_extra` naming the parameters a route reads itself."""
    return {"parameters": [param.doc() for param in params]}
