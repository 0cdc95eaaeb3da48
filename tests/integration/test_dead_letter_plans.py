"""The dead-letter listing's plans on both databases, on the filled database of
test_plans.py: the first page walks a partial index over dead letters, never the history."""

from __future__ import annotations

import re

from sqlalchemy import Engine, Select, text

from mainframe.store.dead_letters import DeadLetterFilter, page_query
from tests.integration.test_plans import planned

__all__ = ["planned"]  # the shared, filled database fixture


def explain(engine: Engine, query: Select[tuple[object, ...]]) -> str:
    sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
    if engine.dialect.name == "postgresql":
        sql = sql.replace("%%", "%")
    prefix = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    with engine.connect() as conn:
        rows = conn.execute(text(prefix + sql.replace(":", r"\:")))
        return "\n".join(str(row[-1]) for row in rows)


def test_the_first_page_walks_a_dead_letter_index(planned: Engine) -> None:
    for endpoints in ({1: "a"}, {1: "a", 2: "b"}):
        plan = explain(planned, page_query(endpoints, DeadLetterFilter(), after=None, limit=50))
        assert re.search(r"ix_scans_dead_(recent|letters)", plan), plan
        assert not re.search(r"Seq Scan on scans|^SCAN scans$", plan, re.M), plan


def test_a_later_page_seeks_its_cursor(planned: Engine) -> None:
    after = (1_750_000_000_000_000, 100_500)
    plan = explain(planned, page_query({1: "a"}, DeadLetterFilter(), after=after, limit=50))
    assert re.search(r"ix_scans_dead_(recent|letters)", plan), plan
    assert not re.search(r"Seq Scan on scans|^SCAN scans$", plan, re.M), plan
