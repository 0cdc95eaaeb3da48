"""Fragments of the statements files: a fragment may include another, and no statement is
sent with an include left in it (it would be a comment where SQL belongs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mainframe.store.engine.database import REGISTRY
from mainframe.store.engine.statements import _blocks, _expanded, _texts
from mainframe.store.work import results

WHERE = Path("statements.sql")


def test_a_fragment_may_include_another_at_the_includes_indent() -> None:
    fragments = {"outer": "a\n-- include: inner", "inner": "b\nc"}
    assert _expanded("x\n  -- include: outer", fragments, WHERE) == "x\n  a\n  b\n  c"


def test_a_fragment_that_includes_itself_is_refused() -> None:
    fragments = {"loop": "a\n-- include: loop"}
    with pytest.raises(ValueError, match="includes itself"):
        _expanded("-- include: loop", fragments, WHERE)


def test_a_block_that_begins_with_an_include_is_refused() -> None:
    # Its leading comment lines are its why and are left out: the include would vanish.
    text = "-- name: insert_things\n-- Why it is.\n-- include: columns\nSELECT 1;\n"
    with pytest.raises(ValueError, match="begins with an include"):
        _blocks(text)


def test_no_statement_keeps_an_include() -> None:
    texts = [text for entry in _texts().values() for text in entry.values()]
    assert not [text for text in texts if "-- include:" in text]


def test_a_result_of_one_and_of_many_lease_the_next_jobs_alike() -> None:
    """Both forms of the result statement lease the next jobs with the same text, the retry's
    turn elsewhere included, and answer with the same rows."""
    assert results.COMPLETE_ONE.name in REGISTRY
    texts = _texts()
    one, many = texts["complete_one"]["postgresql"], texts["complete"]["postgresql"]

    def between(text: str, start: str, end: str) -> str:
        return text[text.index(start) : text.index(end)]

    leases_one = between(one, "), due AS (", "), history AS (")
    assert "other.last_used_at" in leases_one
    assert leases_one == between(many, "), due AS (", "), history AS (")
    assert (
        one[one.index("SELECT 'closed' AS done") :] == many[many.index("SELECT 'closed' AS done") :]
    )
