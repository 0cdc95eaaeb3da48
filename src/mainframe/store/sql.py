"""Named statements, each written out whole: its SQLite text and, where the dialects differ,
its PostgreSQL text beside it. Both use `:name` parameters; PostgreSQL (asyncpg) receives
them as `$1 … $n`, numbered once at import. Nothing is assembled at run time, and every
statement is registered by name, so `tests/unit/test_store_sql.py` can print them
all to a checked-in file where any change to the server's SQL shows up in a diff.

`mf_now()` is the deployment's clock in microseconds since the epoch: PostgreSQL's `now()`
(migration 0009), so every host of a fleet stamps and compares with one clock; on SQLite a
function the store registers, the server process's clock pinned for the transaction."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# `:name`, but not the second colon of a PostgreSQL `::type` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")

REGISTRY: dict[str, Sql] = {}


def numbered(text: str) -> tuple[str, tuple[str, ...]]:
    """`text` with `:name` parameters as `$1 … $n`, and the names in that order."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    return _PARAM.sub(number, text), tuple(order)


@dataclass(frozen=True, slots=True)
class Sql:
    """A named statement; `postgresql` is given only where it differs from `sqlite`."""

    name: str
    sqlite: str
    postgresql: str | None = None
    pg_text: str = field(init=False, repr=False, compare=False)
    pg_params: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text, params = numbered(self.postgresql or self.sqlite)
        object.__setattr__(self, "pg_text", text)
        object.__setattr__(self, "pg_params", params)
        if REGISTRY.setdefault(self.name, self) is not self:
            raise ValueError(f"two statements are named {self.name!r}")

    def pg_args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments of the PostgreSQL text, from named parameters."""
        return [params[name] for name in self.pg_params]

    def text(self, dialect: str) -> str:
        """The text a dialect runs (PostgreSQL's with numbered parameters)."""
        return self.sqlite if dialect == "sqlite" else self.pg_text
