"""The operator's search: a case-insensitive substring of a scan's package name, source or
kind, or its exact id when the term is a number."""

from __future__ import annotations

from sqlalchemy import BindParameter, ColumnElement, bindparam, or_

from mainframe.store.schema import scans

# The longest search term; a longer one cannot match a bounded name, source or kind anyway.
MAX_QUERY_LENGTH = 300
# The largest scan id a numeric search treats as an id (the routes' bound on ids).
MAX_SCAN_ID = 2**62


def like_pattern(term: str) -> str:
    """`term` as a LIKE pattern that matches it anywhere, its wildcards taken literally."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def matches(term: str) -> ColumnElement[bool]:
    """The search as one OR over the three columns (and the id when `term` is a number)."""
    # Rendered into the statement (quoted by the dialect), not bound: a bound pattern gets
    # PostgreSQL's generic plan once psycopg prepares the statement, and a generic plan
    # cannot estimate a LIKE, so it reads every dead letter instead of the trigram index.
    pattern: BindParameter[str] = bindparam("search", like_pattern(term), literal_execute=True)
    found: list[ColumnElement[bool]] = [
        scans.c.name.ilike(pattern, escape="\\"),
        scans.c.source.ilike(pattern, escape="\\"),
        scans.c.kind.ilike(pattern, escape="\\"),
    ]
    if term.isdigit() and int(term) <= MAX_SCAN_ID:
        found.append(scans.c.id == int(term))
    return or_(*found)
