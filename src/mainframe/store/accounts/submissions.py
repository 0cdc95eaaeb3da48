"""When each source last had a submission accepted (`tokens.last_submitted_at`): intake's
dead-man's switch, read by the metrics' reconciliation, `mainframe stats` and the board
(docs/observability.md, "Quiet sources").

It is kept as coarsely as a credential's last use (authentication.py), so that no submission
writes for it: intake notes the digest of a source whose submission it accepted, once the
transaction has committed, and a periodic flush writes the noted ones in one transaction by
the database's clock, each at most every `COARSE_US`. Written inside the submission's own
statement instead, it would lock the credential's row in every hot submission of a source
(SQLite has no data-modifying CTE to condition it on the insert at all), for a value judged
against a threshold of an hour: ten to fifteen seconds stale costs nothing there.

Only source credentials are noted. An owner submitting by hand is no feed whose silence means
that something broke, and anonymous senders to an open endpoint are anyone at all: neither has
a name an owner issued to put in a label."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.lifecycle.quiet import is_quiet, silent_for
from mainframe.store.accounts.authentication import NotedDigests
from mainframe.store.accounts.owners import endpoint_by_name
from mainframe.store.engine.database import Database, NotFound, Row, Tx
from mainframe.store.engine.statements import statement

TOUCH_SUBMITTED = statement("touch_submitted")
SOURCE_SUBMISSIONS = statement("source_submissions")
ENDPOINT_SOURCE_SUBMISSIONS = statement("endpoint_source_submissions")


@dataclass(frozen=True, slots=True)
class LastSubmission:
    """A source credential and its last accepted submission (None: none since it was issued,
    or since revision 0023), read at `read_at` by the database's clock."""

    endpoint: str
    source: str
    at: int | None
    read_at: int

    def silent_for(self) -> float | None:
        """Seconds since the last accepted submission, or None for never."""
        return silent_for(self.at, now=self.read_at)

    def quiet(self, quiet_after: float) -> bool:
        """Whether the source has been silent for more than `quiet_after` seconds."""
        return is_quiet(self.at, now=self.read_at, quiet_after=quiet_after)


async def read(tx: Tx) -> tuple[LastSubmission, ...]:
    """Every source of a live endpoint, by endpoint and name; a revoked endpoint's sources
    are left out (their credentials are refused: their silence is no news)."""
    rows = await tx.rows(SOURCE_SUBMISSIONS)
    return tuple(_last(row, row["endpoint"]) for row in rows)


def _last(row: Row, endpoint: str) -> LastSubmission:
    at = row["last_submitted_at"]
    return LastSubmission(endpoint, row["source"], None if at is None else int(at), int(row["now"]))


class LastSubmissions(NotedDigests):
    """The sources whose submissions this process accepted since the last flush (a flush
    that fails keeps them, so a database away for a while does not make a busy source look
    quiet), and each source's last accepted submission read back."""

    def __init__(self, db: Database) -> None:
        super().__init__(db, TOUCH_SUBMITTED)

    async def of_endpoint(self, owner_id: int, endpoint: str) -> tuple[LastSubmission, ...]:
        """The owner's endpoint's sources by name (NotFound for another's)."""
        async with self.db.read() as tx:
            found = await endpoint_by_name(tx, endpoint)
            if found is None or found.owner_id != owner_id:
                raise NotFound(f"no endpoint named {endpoint!r}")
            rows = await tx.rows(ENDPOINT_SOURCE_SUBMISSIONS, {"endpoint": found.id})
        return tuple(_last(row, found.name) for row in rows)
