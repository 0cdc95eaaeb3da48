"""Fixed SQL for the hot path, run through the driver: no statement building, caching or
result processing per call. Each statement is written once with `:name` parameters (the
spelling sqlite3 takes) and rendered for psycopg (`%(name)s`) once, at import time.

Statuses are literals in the text, never parameters: only a literal lets SQLite prove a
partial index's predicate, and only a literal survives PostgreSQL's switch to a generic
plan after five runs of a prepared statement (tests/integration/test_plans.py pins this)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def for_psycopg(text: str) -> str:
    """`:name` parameters as psycopg's `%(name)s` (literal percent signs doubled)."""
    return _PARAM.sub(r"%(\1)s", text.replace("%", "%%"))


@dataclass(frozen=True, slots=True)
class Sql:
    """A named statement; `postgresql` overrides the rendered SQLite text where they differ."""

    name: str
    sqlite: str
    postgresql: str | None = None
    _pg: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pg", for_psycopg(self.postgresql or self.sqlite))

    def text(self, dialect: str) -> str:
        return self.sqlite if dialect == "sqlite" else self._pg
