"""The Store: the one object that speaks SQL. Every write runs in one transaction and, only
after it commits, hands the domain events it produced to the injected `publish`."""

from __future__ import annotations

from sqlalchemy import Connection

from mainframe.lifecycle.events import LeasesGranted
from mainframe.lifecycle.rules import Status
from mainframe.store import accounts, deliveries, leasing, queries, stats, submit
from mainframe.store.errors import Conflict, Invalid, NotFound, Unauthorized
from mainframe.store.records import EndpointRecord, Job, Principal, ScanRecord
from mainframe.store.reporting import Reporting
from mainframe.store.submit import Submission


class Store(Reporting):
    """Accounts, intake, the job poll, the sweeper and the owners' reads."""

    # Accounts -------------------------------------------------------------------------------

    def create_owner(self, name: str) -> str:
        with self.transaction() as (conn, _):
            return accounts.create_owner(conn, name=name, now=self.now())[1]

    def has_owners(self) -> bool:
        with self.transaction() as (conn, _):
            return accounts.count_owners(conn) > 0

    def create_endpoint(self, name: str, *, owner: str, open_intake: bool) -> EndpointRecord:
        with self.transaction() as (conn, _):
            return accounts.create_endpoint(
                conn, name=name, owner=owner, open_intake=open_intake, now=self.now()
            )

    def create_token(self, *, endpoint: str, role: str, principal: str) -> str:
        with self.transaction() as (conn, _):
            return accounts.create_endpoint_token(
                conn, endpoint=endpoint, role=role, principal=principal, now=self.now()
            )

    def authenticate(self, secret: str) -> Principal | None:
        with self.transaction() as (conn, _):
            return accounts.authenticate(conn, secret)

    def owned_endpoints(self, owner_id: int) -> dict[int, str]:
        with self.transaction() as (conn, _):
            return accounts.owned_endpoints(conn, owner_id)

    # Intake ---------------------------------------------------------------------------------

    def submit(
        self,
        principal: Principal | None,
        *,
        endpoint: str | None,
        queue: str,
        name: str,
        version: str,
        kind: str,
        payload: str | None,
    ) -> tuple[ScanRecord, bool]:
        """Submit as a source (verified), an owner (unverified) or anonymously (quarantined)."""
        with self.transaction() as (conn, events):
            target = self._intake_endpoint(conn, principal, endpoint)
            source = principal.name if principal and principal.role == "source" else None
            sub = Submission(
                endpoint_id=target.id,
                endpoint=target.name,
                queue=queue,
                name=name,
                version=version,
                kind=kind,
                payload=payload,
                verified=source is not None,
                quarantined=principal is None,
                source=source,
            )
            scan, created, produced = submit.submit(conn, sub, now=self.now())
            events.extend(produced)
            return scan, created

    def _intake_endpoint(
        self, conn: Connection, principal: Principal | None, name: str | None
    ) -> EndpointRecord:
        if principal is not None and principal.role == "source":
            assert principal.endpoint_id is not None
            found = accounts.endpoint_by_id(conn, principal.endpoint_id)
            if found is None or found.revoked_at is not None:
                raise Unauthorized("this source's endpoint is revoked")
            if name is not None and name != found.name:
                raise Invalid("endpoint", "a source submits only to its own endpoint")
            return found
        if name is None:
            raise Invalid("endpoint", "name the endpoint to submit to")
        found = accounts.endpoint_by_name(conn, name)
        if principal is None:
            if found is None or not found.open_intake or found.revoked_at is not None:
                raise Unauthorized("a token is required: this endpoint has no open intake")
            return found
        if principal.role != "owner" or found is None or found.owner_id != principal.owner_id:
            raise NotFound(f"no endpoint named {name!r}")
        if found.revoked_at is not None:
            raise Conflict("endpoint_revoked", f"endpoint {name!r} is revoked")
        return found

    def release(self, owner_id: int, scan_id: int) -> ScanRecord:
        """Let a quarantined scan into the queue."""
        with self.transaction() as (conn, _):
            scan = self._owned_scan(conn, owner_id, scan_id)
            released = submit.release(conn, scan, now=self.now())
        if released is None:
            raise Conflict("not_quarantined", f"scan {scan_id} is {scan.status}, not QUARANTINED")
        return released

    # Leasing --------------------------------------------------------------------------------

    def lease(self, principal: Principal, batch: int) -> list[Job]:
        """The job poll: reap this endpoint's spent scans, then lease up to `batch` scans."""
        assert principal.endpoint_id is not None
        now, budget = self.now(), self.budget
        with self.transaction() as (conn, events):
            spent, reclaim = leasing.lapsed_pending(
                conn,
                endpoint_id=principal.endpoint_id,
                now=now,
                max_attempts=budget.max_attempts,
                spent_limit=budget.reap_per_poll,
                reclaim_limit=batch,
            )
            names = {principal.endpoint_id: principal.endpoint or ""}
            events.extend(leasing.dead_letter_lapsed(conn, spent, now=now, endpoint_names=names))
            leasing.close_lapsed_attempts(conn, reclaim, now=now)
            events.extend(leasing.lapse_events(reclaim, principal.endpoint or ""))
            expires = now + budget.job_timeout_us
            rows = leasing.assign_reclaimed(
                conn, [x.row.id for x in reclaim], worker=principal.name, now=now, expires=expires
            )
            rows += leasing.assign_queued(
                conn,
                endpoint_id=principal.endpoint_id,
                limit=batch - len(rows),
                worker=principal.name,
                now=now,
                expires=expires,
            )
            if rows:
                events.append(LeasesGranted(principal.endpoint or "", len(rows), len(reclaim)))
        if not rows and self.endpoint_is_revoked(principal.endpoint_id):
            raise Unauthorized("this worker's endpoint is revoked")
        return sorted((_job(row) for row in rows), key=lambda job: job.scan_id)

    def reap(self, *, limit: int = 500) -> int:
        """The sweeper: dead-letter lapsed, budget-spent scans of every endpoint."""
        now = self.now()
        with self.transaction() as (conn, events):
            spent, _ = leasing.lapsed_pending(
                conn,
                endpoint_id=None,
                now=now,
                max_attempts=self.budget.max_attempts,
                spent_limit=limit,
                reclaim_limit=0,
            )
            names = leasing.endpoint_names_for(conn, spent)
            events.extend(leasing.dead_letter_lapsed(conn, spent, now=now, endpoint_names=names))
        return len(spent)

    # Reads ----------------------------------------------------------------------------------

    def get_scan(self, owner_id: int, scan_id: int) -> ScanRecord:
        with self.transaction() as (conn, _):
            return self._owned_scan(conn, owner_id, scan_id)

    def list_scans(
        self,
        owner_id: int,
        *,
        status: Status | None,
        queue: str | None,
        endpoint: str | None,
        before_id: int | None,
        limit: int,
        dead_letters_only: bool = False,
    ) -> list[ScanRecord]:
        with self.transaction() as (conn, _):
            owned = accounts.owned_endpoints(conn, owner_id)
            if endpoint is not None:
                owned = {k: v for k, v in owned.items() if v == endpoint}
            return queries.list_scans(
                conn,
                endpoints=owned,
                status=status.value if status else None,
                queue=queue,
                before_id=before_id,
                limit=limit,
                dead_letters_only=dead_letters_only,
            )

    def snapshot(self) -> stats.Snapshot:
        """Outcome totals and live scans by queue state, as the database sees them now."""
        with self.transaction() as (conn, _):
            return stats.snapshot(conn, now=self.now(), max_attempts=self.budget.max_attempts)

    # Delivery counts ------------------------------------------------------------------------

    def record_deliveries(
        self, endpoint_id: int, *, at_us: int, attempts: int, failures: int
    ) -> None:
        with self.transaction() as (conn, _):
            deliveries.record(
                conn, endpoint_id=endpoint_id, at_us=at_us, attempts=attempts, failures=failures
            )

    def delivery_totals(
        self, owner_id: int, *, start_us: int, end_us: int
    ) -> deliveries.DeliveryTotals:
        """Delivery attempts and failures of the owner's endpoints in [start, end)."""
        with self.transaction() as (conn, _):
            owned = list(accounts.owned_endpoints(conn, owner_id))
            return deliveries.window_totals(
                conn, endpoint_ids=owned, start_us=start_us, end_us=end_us
            )


def _job(row: object) -> Job:
    m = row._mapping  # type: ignore[attr-defined]
    return Job(
        m["id"],
        m["name"],
        m["version"],
        m["kind"],
        m["queue"],
        m["payload"],
        m["attempt_count"],
        m["assignment_id"],
        m["lease_expires_at"],
    )
