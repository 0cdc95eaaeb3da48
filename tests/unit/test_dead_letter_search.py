"""Which statements the dead-letter role runs, and in what order, on a recording database: a
search or a narrowing filter on PostgreSQL is planned with its values (PLAN_WITH_VALUES
first, in the same read transaction), a listing without one is not, and SQLite never runs the
PostgreSQL setting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mainframe.lifecycle.scans import Event
from mainframe.store import Budget, Conflict, Store
from mainframe.store.engine.database import NO_PARAMS, Row, Sql
from mainframe.store.operator.dead_letters import DeadLetterFilter, DeadLetters


class RecordingTx:
    """A transaction that answers every statement with no rows and notes its name."""

    def __init__(self, dialect: str, ran: list[str]) -> None:
        self.dialect = dialect
        self.events: list[Event] = []
        self._ran = ran

    async def rows(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Row]:
        self._ran.append(sql.name)
        return []

    async def run(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> int:
        self._ran.append(sql.name)
        return 0


class RecordingDatabase:
    """Read transactions only, each one's statements noted in order (`begin` between)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.ran: list[str] = []

    @asynccontextmanager
    async def read(self) -> AsyncIterator[RecordingTx]:
        self.ran.append("begin")
        yield RecordingTx(self.dialect, self.ran)


def ran_by(dialect: str, call: Any) -> list[str]:
    """What the role runs as Store.build makes it for a database of `dialect` (where the
    dialect decides, once, whether a narrowed read is planned with its values)."""
    db = RecordingDatabase(dialect)
    store = Store.build(db, Budget.of(job_timeout=60, max_attempts=3))  # type: ignore[arg-type]
    asyncio.run(call(store.dead_letters))
    return db.ran


SEARCH = DeadLetterFilter(q="left-pad")


@pytest.mark.parametrize(
    ("dialect", "f", "expected"),
    [
        ("postgresql", SEARCH, ["begin", "plan_with_values", "search_dead_letters",
                                "count_dead_letters"]),
        ("sqlite", SEARCH, ["begin", "search_dead_letters", "count_dead_letters"]),
        ("postgresql", DeadLetterFilter(), ["begin", "list_dead_letters", "dead_letter_total"]),
        # A narrowing filter too: a generic plan could not seek the index to `since`. A
        # time's count reads the dead letters; a reason's or a queue's the kept counts.
        ("postgresql", DeadLetterFilter(since=1),
         ["begin", "plan_with_values", "list_dead_letters", "count_dead_letters"]),
        ("postgresql", DeadLetterFilter(reason="lease_expired", queue="bulk"),
         ["begin", "plan_with_values", "list_dead_letters", "dead_letters_by_key"]),
        ("postgresql", DeadLetterFilter(cause="0123456789abcdef", queue="bulk"),
         ["begin", "plan_with_values", "list_dead_letters_of_cause", "dead_letters_by_key"]),
        ("postgresql", DeadLetterFilter(endpoint="pypi"),
         ["begin", "list_dead_letters", "dead_letter_total"]),
    ],
)  # fmt: skip
def test_a_page_plans_a_search_with_its_values(
    dialect: str, f: DeadLetterFilter, expected: list[str]
) -> None:
    ran = ran_by(dialect, lambda role: role.page(1, f, after=None, limit=50))
    assert ran == expected


def test_a_count_and_a_filter_redrive_plan_a_search_with_its_values() -> None:
    assert ran_by("postgresql", lambda role: role.count(1, SEARCH)) == [
        "begin",
        "plan_with_values",
        "count_dead_letters",
    ]

    async def refused(role: DeadLetters) -> None:
        with pytest.raises(Conflict):
            # Nothing matches: 0, not 1.
            await role.redrive_filter(1, SEARCH, confirm=1, origin="api")

    assert ran_by("postgresql", refused) == ["begin", "plan_with_values", "dead_letter_ids"]
