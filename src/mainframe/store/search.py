"""The operator's search: a case-insensitive substring of a scan's package name, source or
kind, or its exact id when the term is a number."""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_

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
    pattern = like_pattern(term)
    found: list[ColumnElement[bool]] = [
        scans.c.name.ilike(pattern, escape="\\"),
        scans.c.source.ilike(pattern, escape="\\"),
        scans.c.kind.ilike(pattern, escape="\\"),
    ]
    if term.isdigit() and int(term) <= MAX_SCAN_ID:
        found.append(scans.c.id == int(term))
    return or_(*found)
