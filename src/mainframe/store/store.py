"""The Store: one object per capability, all over one database. Every call is one
transaction (or one autocommitted statement) whose domain events are published only after
it commits."""

from __future__ import annotations

import random
from dataclasses import dataclass

from mainframe.clock import Clock, SystemClock
from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.retention import RetentionPolicy
from mainframe.store.accounts.audit import AuditTrail
from mainframe.store.accounts.authentication import Authentication, EndpointNames
from mainframe.store.accounts.owners import Owners
from mainframe.store.accounts.sessions import Sessions
from mainframe.store.accounts.submissions import LastSubmissions
from mainframe.store.dragonfly.records import DragonflyRecords
from mainframe.store.engine.database import Database, HostReport
from mainframe.store.engine.planner_statistics import PlannerStatistics
from mainframe.store.engine.queue_vacuum import QueueVacuum
from mainframe.store.hooks.deliveries import Deliveries
from mainframe.store.hooks.hook_secrets import SecretBox
from mainframe.store.hooks.hooks import DEFAULT_ROTATION_GRACE_US, Hooks
from mainframe.store.operator.activity import Activity
from mainframe.store.operator.causes import Causes
from mainframe.store.operator.dead_letters import DeadLetters
from mainframe.store.operator.listings import Listings
from mainframe.store.operator.queues import Queues
from mainframe.store.operator.retention import Retention
from mainframe.store.operator.revoke import Revocations
from mainframe.store.work import results
from mainframe.store.work.assignments import Assignments
from mainframe.store.work.budget import Budget
from mainframe.store.work.intake import Intake
from mainframe.store.work.interventions import Interventions
from mainframe.store.work.leasing import LapseWatch, Leasing
from mainframe.store.work.packages import Packages
from mainframe.store.work.results import Results


@dataclass(frozen=True, slots=True)
class Store:
    db: Database
    clock: Clock
    authentication: Authentication
    last_submissions: LastSubmissions
    owners: Owners
    revocations: Revocations
    intake: Intake
    leasing: Leasing
    results: Results
    interventions: Interventions
    packages: Packages
    assignments: Assignments
    listings: Listings
    deliveries: Deliveries
    hooks: Hooks
    dead_letters: DeadLetters
    audit: AuditTrail
    causes: Causes
    queues: Queues
    activity: Activity
    sessions: Sessions
    planner_statistics: PlannerStatistics
    queue_vacuum: QueueVacuum
    retention: Retention
    dragonfly: DragonflyRecords

    @classmethod
    def build(
        cls,
        db: Database,
        budget: Budget,
        *,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        hook_box: SecretBox | None = None,
        rotation_grace_us: int = DEFAULT_ROTATION_GRACE_US,
        retention: RetentionPolicy | None = None,
    ) -> Store:
        """The capabilities over `db`; `clock` is this process's (the database keeps its own
        on PostgreSQL), `rng` draws the retries' jitter and `retention` says what is pruned
        when (the defaults unless given)."""
        policy = retry or RetryPolicy()
        process_clock = clock or SystemClock()
        draws = rng or random.Random()
        names = EndpointNames()
        lapses = LapseWatch(process_clock)
        leasing = Leasing(db, budget, policy, lapses, names, draws)
        last_submissions = LastSubmissions(db)
        return cls(
            db=db,
            clock=process_clock,
            authentication=Authentication(db),
            last_submissions=last_submissions,
            owners=Owners(db),
            revocations=Revocations(db),
            intake=Intake(db, names, last_submissions),
            leasing=leasing,
            results=Results(
                db, budget, policy, leasing, names, draws, results.for_dialect(db.dialect, budget)
            ),
            interventions=Interventions(db, budget, policy, draws),
            packages=Packages(db),
            assignments=Assignments(db, budget, lapses),
            listings=Listings(db, budget),
            deliveries=Deliveries(db),
            hooks=Hooks(db, box=hook_box, rotation_grace_us=rotation_grace_us),
            # Chosen once here: PostgreSQL may keep a generic plan for a prepared statement,
            # SQLite plans every statement with its values bound.
            dead_letters=DeadLetters(db, plan_with_values=db.dialect == "postgresql"),
            audit=AuditTrail(db),
            causes=Causes(db),
            queues=Queues(db),
            activity=Activity(db),
            sessions=Sessions(db),
            planner_statistics=PlannerStatistics(db),
            queue_vacuum=QueueVacuum(db),
            retention=Retention(db, retention or RetentionPolicy()),
            dragonfly=DragonflyRecords(db),
        )

    async def ping(self) -> None:
        """One round trip to the database (the readiness probe); ReadOnly when the host this
        process reached takes no writes."""
        await self.db.ping()

    async def host_report(self) -> HostReport:
        """What a starting server logs about its database: whether the host takes writes, and
        the relied-on settings not in force (behind a pooler they come from the role)."""
        return await self.db.host_report()

    async def close(self) -> None:
        await self.db.close()
