"""The operator's search: a case-insensitive substring of a scan's package name, source or
kind, or its exact id when the term is a number. Statements take it as :pattern (a LIKE
pattern, its wildcards escaped with a backslash) and :term_id (NULL unless numeric)."""

from __future__ import annotations

from mainframe.contract.limits import MAX_ID


def like_pattern(term: str) -> str:
    """`term` as a LIKE pattern that matches it anywhere, its wildcards taken literally."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def terms(q: str | None) -> dict[str, str | int | None]:
    """The :pattern and :term_id parameters of a search (both NULL without one)."""
    if not q:
        return {"pattern": None, "term_id": None}
    # ASCII only: str.isdigit() admits digits int() refuses ('²').
    numeric = q.isascii() and q.isdigit() and int(q) <= MAX_ID
    return {"pattern": like_pattern(q), "term_id": int(q) if numeric else None}
