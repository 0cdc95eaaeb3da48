"""The store's SQL, loaded by name from one file per part of the store (`engine/`,
`accounts/`, `work/`, `hooks/`, `operator/`, each with its `statements.sql`), the way
procrastinate keeps its `queries.sql`: the files are the source, read once at import.

A statement starts at a line `-- name: NAME`, for both databases, or `-- name: NAME
@sqlite` / `-- name: NAME @postgresql` for one dialect's own text, and runs to the next
`-- name:`; the comment lines right under the name say why it is written so and are not
sent. A line `-- include: FRAGMENT` inside a statement (or inside a fragment) stands for the
text of a `-- fragment: FRAGMENT` block of any of the files (what several statements share,
written once). A statement only one dialect runs has, for the other, a comment in place of
its text."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from mainframe.store.engine.database import REGISTRY, Sql

STORE = Path(__file__).parents[1]
PARTS = ("engine", "accounts", "work", "hooks", "operator", "dragonfly")
_HEAD = re.compile(r"^-- (name|fragment): ([a-z_][a-z0-9_]*)(?: @(sqlite|postgresql))?\s*$")
_INCLUDE = re.compile(r"^(\s*)-- include: ([a-z_][a-z0-9_]*)\s*$", re.M)


def _blocks(text: str) -> list[tuple[str, str, str | None, str]]:
    """(kind, name, dialect or None, body) for each block of a statements file."""
    found: list[tuple[str, str, str | None, list[str]]] = []
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head:
            found.append((head[1], head[2], head[3], []))
        elif found:
            found[-1][3].append(line)
    return [(kind, name, dialect, _body(lines)) for kind, name, dialect, lines in found]


def _body(lines: list[str]) -> str:
    """The text of a block: its leading comment lines (the why) and a final `;` left out."""
    start = 0
    while start < len(lines) and (lines[start].startswith("--") or not lines[start].strip()):
        if _INCLUDE.match(lines[start]):
            # Among the leading comments it would be dropped as one, silently.
            raise ValueError(f"a block begins with an include: {lines[start]!r}")
        start += 1
    return "\n".join(lines[start:]).strip().removesuffix(";").rstrip()


def _expanded(
    body: str, fragments: dict[str, str], where: Path, within: tuple[str, ...] = ()
) -> str:
    """The body with each include replaced by its fragment, a fragment's own includes too."""

    def include(match: re.Match[str]) -> str:
        name = match[2]
        if name not in fragments:
            raise ValueError(f"{where}: no fragment {name!r}")
        if name in within:
            raise ValueError(f"{where}: fragment {name!r} includes itself")
        text = _expanded(fragments[name], fragments, where, (*within, name))
        return "\n".join(match[1] + line for line in text.splitlines())

    return _INCLUDE.sub(include, body)


@cache
def _texts() -> dict[str, dict[str, str]]:
    """Every statement's text per dialect, from every part's file."""
    files = {part: STORE / part / "statements.sql" for part in PARTS}
    blocks = {part: _blocks(path.read_text(encoding="utf-8")) for part, path in files.items()}
    fragments = {
        name: body for found in blocks.values() for kind, name, _, body in found
        if kind == "fragment"
    }  # fmt: skip
    texts: dict[str, dict[str, str]] = {}
    for part, found in blocks.items():
        for kind, name, dialect, body in found:
            if kind != "name":
                continue
            entry = texts.setdefault(name, {})
            key = dialect or "both"
            if key in entry:
                raise ValueError(f"{files[part]}: statement {name!r} named twice")
            entry[key] = _expanded(body, fragments, files[part])
    return texts


def statement(name: str) -> Sql:
    """The statement called `name`, registered once however often it is asked for."""
    if name in REGISTRY:
        return REGISTRY[name]
    entry = _texts().get(name)
    if entry is None:
        raise KeyError(f"no statement {name!r} in the store's statements.sql files")
    sqlite = entry.get("sqlite", entry.get("both", "-- PostgreSQL only."))
    postgresql = entry.get("postgresql", entry.get("both", "-- SQLite only."))
    return Sql(name, sqlite, None if postgresql == sqlite else postgresql)
