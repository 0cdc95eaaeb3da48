"""The Store: role objects composed over one unit of work. Each role holds the statements of
one capability (accounts, intake, leasing, results, listings, deliveries, hooks, dead
letters); every call is one transaction whose domain events are published only after it
commits."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sqlalchemy import Engine

from mainframe.clock import Clock
from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.store.accounts import Accounts, Credentials
from mainframe.store.budget import Budget
from mainframe.store.dead_letters import DeadLetters
from mainframe.store.deliveries import Deliveries
from mainframe.store.hook_secrets import SecretBox
from mainframe.store.hooks import DEFAULT_ROTATION_GRACE_US, Hooks
from mainframe.store.intake import Intake
from mainframe.store.leasing import LapseWatch, Leasing
from mainframe.store.listings import Listings
from mainframe.store.results import Results
from mainframe.store.sessions import Sessions
from mainframe.store.uow import Publish, UnitOfWork, discard


@dataclass(frozen=True, slots=True)
class Store:
    uow: UnitOfWork
    accounts: Accounts
    intake: Intake
    leasing: Leasing
    results: Results
    listings: Listings
    deliveries: Deliveries
    hooks: Hooks
    dead_letters: DeadLetters
    credentials: Credentials
    sessions: Sessions

    @classmethod
    def build(
        cls,
        engine: Engine,
        budget: Budget,
        *,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        publish: Publish = discard,
        rng: random.Random | None = None,
        hook_box: SecretBox | None = None,
        rotation_grace_us: int = DEFAULT_ROTATION_GRACE_US,
    ) -> Store:
        uow = UnitOfWork(engine, clock=clock, publish=publish, rng=rng)
        policy = retry or RetryPolicy()
        lapses = LapseWatch()
        return cls(
            uow=uow,
            accounts=Accounts(uow),
            intake=Intake(uow),
            leasing=Leasing(uow, budget, policy, lapses),
            results=Results(uow, budget, policy, lapses),
            listings=Listings(uow, budget),
            deliveries=Deliveries(uow),
            hooks=Hooks(uow, box=hook_box, rotation_grace_us=rotation_grace_us),
            dead_letters=DeadLetters(uow),
            credentials=Credentials(uow),
            sessions=Sessions(uow),
        )

    @property
    def engine(self) -> Engine:
        return self.uow.engine

    @property
    def clock(self) -> Clock:
        return self.uow.clock

    def now(self) -> int:
        return self.uow.now()

    def ping(self) -> None:
        """One round trip to the database (the readiness probe)."""
        with self.uow.read() as tx:
            tx.conn.exec_driver_sql("SELECT 1")

    def dispose(self) -> None:
        self.uow.dispose()
