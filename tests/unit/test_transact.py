"""`transact` runs a transaction's work again when the database aborted it for a conflict,
a bounded number of times, and publishes only what the run that committed produced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mainframe.store.engine.database import (
    CONTENDED_RETRIES,
    Contended,
    Invalid,
    Tx,
    transact,
)


class Aborting:
    """A database whose first `aborts` transactions end as a conflict's victim; it keeps the
    events of each transaction that committed."""

    dialect = "postgresql"

    def __init__(self, aborts: int) -> None:
        self.aborts = aborts
        self.opened = 0
        self.committed: list[list[Any]] = []

    @asynccontextmanager
    async def write(self, *, lasting: bool = False) -> AsyncIterator[Any]:
        self.opened += 1
        tx: Any = type("FakeTx", (), {"events": []})()
        yield tx
        if self.opened <= self.aborts:
            raise Contended()
        self.committed.append(tx.events)


async def note(tx: Tx) -> str:
    tx.events.append("noted")
    return "done"


def run(db: Aborting, work: Any = note) -> Any:
    return asyncio.run(transact(db, work))  # type: ignore[arg-type]


def test_work_aborted_by_a_conflict_runs_again_in_a_fresh_transaction_and_commits_once() -> None:
    db = Aborting(aborts=CONTENDED_RETRIES)
    assert run(db) == "done"
    assert db.opened == CONTENDED_RETRIES + 1
    assert db.committed == [["noted"]], "only the run that committed published its events"


def test_a_conflict_past_the_retries_reaches_the_caller_as_contended() -> None:
    db = Aborting(aborts=CONTENDED_RETRIES + 1)
    with pytest.raises(Contended) as refused:
        run(db)
    assert refused.value.code == "database_busy" and refused.value.retry_after == 1
    assert db.opened == CONTENDED_RETRIES + 1 and db.committed == []


def test_a_refusal_of_the_work_itself_is_not_run_again() -> None:
    db = Aborting(aborts=0)

    async def refuse(tx: Tx) -> None:
        raise Invalid("name", "no such name")

    with pytest.raises(Invalid):
        run(db, refuse)
    assert db.opened == 1
