"""The declared schema (head revision). Times are integer microseconds since the epoch, UTC,
so the same SQL compares and orders them on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()


def partial(where: str) -> dict[str, Any]:
    """Index options for a partial index with the same predicate on both databases."""
    return {"postgresql_where": text(where), "sqlite_where": text(where)}


# The predicate of every partial index over dead letters, spelled as the indexes declare it.
DEAD = "dead_lettered_at IS NOT NULL"

# SQLite only aliases the rowid for exactly "INTEGER PRIMARY KEY"; BigInteger keeps 64 bits on PG.
Id = BigInteger().with_variant(Integer(), "sqlite")


def sqlite_key(column: str, target: str) -> ForeignKeyConstraint:
    """A foreign key SQLite keeps and PostgreSQL does not (revision 0024): the rows that
    carry it are written by the statement that reads or writes the row it names, so the key
    only checks what the statement made true, and on PostgreSQL each check locks the named
    row with a WAL record (docs/performance.md, "One scan, record by record"). On SQLite a
    check is a probe of the key and writes nothing."""
    return ForeignKeyConstraint([column], [target]).ddl_if(dialect="sqlite")


owners = Table(
    "owners",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("created_at", BigInteger, nullable=False),
)

endpoints = Table(
    "endpoints",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("owner_id", Id, ForeignKey("owners.id"), nullable=False, index=True),
    Column("open_intake", Boolean, nullable=False, default=False),
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    # sha256 of the secret; the secret itself is shown once and never stored.
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("role", String(16), nullable=False),  # owner | worker | source
    Column("owner_id", Id, ForeignKey("owners.id")),
    Column("endpoint_id", Id, ForeignKey("endpoints.id")),
    Column("principal", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    # Written at most every 10 s by a periodic flush, never by a request (revision 0014).
    Column("last_used_at", BigInteger),
    # A source's last accepted submission, written as coarsely by a flush (revision 0023).
    Column("last_submitted_at", BigInteger),
    # An endpoint's credentials, for its owner's listing (revision 0010).
    Index("ix_tokens_endpoint", "endpoint_id", "id"),
)

scans = Table(
    "scans",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("endpoint_id", Id, nullable=False),
    sqlite_key("endpoint_id", "endpoints.id"),
    Column("queue", String(100), nullable=False),
    Column("name", String(300), nullable=False),
    Column("version", String(200), nullable=False),
    Column("kind", String(100), nullable=False),
    Column("payload", Text),
    Column("status", String(16), nullable=False),
    Column("verified", Boolean, nullable=False),
    Column("source", String(200)),
    Column("worker", String(200)),
    Column("leased_at", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger),
    Column("fail_reason", String(100)),
    Column("result", Text),
    # Attempt tracking (revision 0002).
    Column("attempt_count", Integer, nullable=False, server_default=text("0")),
    Column("assignment_id", String(64)),
    Column("lease_expires_at", BigInteger),
    Column("wait_reason", Text),
    Column("dead_lettered_at", BigInteger),
    # Attempts closed before the last redrive, so attempt history seq stays unique.
    Column("attempt_base", Integer, nullable=False, server_default=text("0")),
    # When a QUEUED scan is due; later than now while a retry waits out its backoff (0006).
    Column("available_at", BigInteger),
    # The last operator redrive out of the dead letters, and how many there were (0008).
    Column("redriven_at", BigInteger),
    Column("redrive_count", Integer, nullable=False, server_default=text("0")),
    # A dead letter's cause (its final attempt's, lifecycle/causes.py); NULL once redriven
    # and for every scan that is not a dead letter (0017).
    Column("cause", String(16)),
    # A parked scan of a paused queue: its due time, restored on resume; `available_at` is
    # NULL meanwhile, so no poll reaches it (0018).
    Column("paused_due_at", BigInteger),
    # Leasing walks only eligible rows: a partial index per eligible status, never (status, id).
    Index(
        "ix_scans_queued",
        "endpoint_id",
        "available_at",
        "id",
        **partial("status = 'QUEUED'"),
    ),
    # Each endpoint's leases by deadline: a poll's reaping, and the sweeper's endpoint by
    # endpoint (0026).
    Index(
        "ix_scans_pending_lease",
        "endpoint_id",
        "lease_expires_at",
        **partial("status = 'PENDING'"),
    ),
    Index(
        "ix_scans_quarantined",
        "endpoint_id",
        "id",
        **partial("status = 'QUARANTINED'"),
    ),
    Index(
        "ix_scans_dead_letters",
        "endpoint_id",
        "dead_lettered_at",
        "id",
        **partial(DEAD),
    ),
    # Dead letters of one cause, newest first: the list filtered by cause, its redrive (0017).
    Index("ix_scans_dead_cause", "cause", "dead_lettered_at", "id", **partial(DEAD)),
    # One endpoint's dead letters of one cause by age: the oldest and newest the triggers on
    # scans look up when a dead letter at either end goes (0020).
    Index(
        "ix_scans_dead_endpoint_cause",
        "endpoint_id",
        "cause",
        "dead_lettered_at",
        "id",
        **partial(DEAD),
    ),
    # The dead-letter listing's order across endpoints (0008).
    Index("ix_scans_dead_recent", "dead_lettered_at", "id", **partial(DEAD)),
    # Substring search of dead letters: trigrams on PostgreSQL; SQLite cannot use it (0008).
    Index(
        "ix_scans_dead_search",
        "name",
        "source",
        "kind",
        postgresql_using="gin",
        postgresql_ops={"name": "gin_trgm_ops", "source": "gin_trgm_ops", "kind": "gin_trgm_ops"},
        **partial(DEAD),
    ),
    # A result keyed by package refused for an ended scan finds it through this, not by
    # reading the endpoint's history; written once per scan, when it ends (0011).
    Index(
        "ix_scans_ended_key",
        "endpoint_id",
        "name",
        "version",
        "id",
        **partial("status IN ('FINISHED', 'FAILED')"),
    ),
    # Pruning past the retention walks each kind's ended scans oldest first (0016).
    Index("ix_scans_finished_at", "finished_at", **partial("status = 'FINISHED'")),
    Index(
        "ix_scans_failed_at",
        "finished_at",
        **partial("status = 'FAILED' AND dead_lettered_at IS NULL"),
    ),
    # Resubmitting a live (endpoint, name, version, kind) returns the existing scan.
    Index(
        "ux_scans_live_key",
        "endpoint_id",
        "name",
        "version",
        "kind",
        unique=True,
        **partial("status IN ('QUARANTINED', 'QUEUED', 'PENDING')"),
    ),
)

attempts = Table(
    "attempts",
    metadata,
    Column("scan_id", Id, primary_key=True),
    sqlite_key("scan_id", "scans.id"),
    Column("seq", Integer, primary_key=True),
    Column("attempt", Integer, nullable=False),
    Column("assignment_id", String(64), nullable=False),
    Column("worker", String(200)),
    Column("leased_at", BigInteger),
    Column("closed_at", BigInteger, nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("summary", Text),
    Column("artifact", Text),
    # What the closing result was answered (revision 0009), so a replay gets the same answer:
    # the status the scan moved to, its retry's due time, its failure reason, and the
    # assignments leased in the same request (comma-separated).
    Column("settled_status", String(16)),
    Column("settled_available_at", BigInteger),
    Column("settled_fail_reason", String(100)),
    Column("next_assignments", Text),
    # The cause of a failed attempt (lifecycle/causes.py), written when it closes (0017).
    Column("cause", String(16)),
    # The digest of the closing result's content (revision 0015): a resend with the same
    # digest is a replay, with another a conflict (lifecycle/reports.py).
    Column("result_digest", String(80)),
    # SQLite only since revision 0026: PostgreSQL finds an assignment's row through the key's
    # prefix (a scan has a few attempts), and the key keeps one row an attempt.
    UniqueConstraint("scan_id", "assignment_id", name="uq_attempts_assignment").ddl_if(
        dialect="sqlite"
    ),
)

# Terminal outcome totals per endpoint, spread over shards; updated in the transaction of
# every transition that ends a scan (revision 0003).
scan_totals = Table(
    "scan_totals",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("outcome", String(16), primary_key=True),
    Column("shard", Integer, primary_key=True),
    Column("count", BigInteger, nullable=False, server_default=text("0")),
)
# Per endpoint and outcome, how many of the scans the outcome totals counted retention has
# pruned since (the `counts_now` revision): added to by each prune batch in its transaction,
# so the scans of an outcome that exist now are its total less this, read at one instant
# (the overview reads finished and failed; dead letters are read from their own counts).
pruned_scans = Table(
    "pruned_scans",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("outcome", String(16), primary_key=True),  # finished | failed | dead_lettered
    Column("count", BigInteger, nullable=False),
)

# Webhook delivery attempts and failures per endpoint per minute (revision 0004). The hook
# dispatcher adds to them; the watcher reads closed windows of them through the stats API.
delivery_counts = Table(
    "delivery_counts",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("minute_us", BigInteger, primary_key=True),
    Column("attempts", BigInteger, nullable=False, server_default=text("0")),
    Column("failures", BigInteger, nullable=False, server_default=text("0")),
    # Pruning past the retention walks the minutes oldest first (0016).
    Index("ix_delivery_counts_minute", "minute_us"),
)

# Outbound webhooks of an endpoint (revision 0007). Secrets are Fernet tokens under a key the
# database does not hold (store/hooks/hook_secrets.py); `previous_secret` signs too until
# `previous_valid_until` after a rotation.
hooks = Table(
    "hooks",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), nullable=False),
    Column("url", Text, nullable=False),
    Column("queue", String(100)),  # NULL admits every queue
    Column("rate_per_minute", Integer, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", String(40)),
    Column("secret", Text, nullable=False),
    Column("previous_secret", Text),
    Column("previous_valid_until", BigInteger),
    Column("consecutive_failures", Integer, nullable=False, server_default=text("0")),
    Column("last_delivery_at", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_hooks_endpoint", "endpoint_id"),
)

# What operators did (revision 0008): one row per redrive, with the ids or the filter used;
# since 0012 also every credential, hook and endpoint change and board sign-in, written in
# the transaction of the change.
audit = Table(
    "audit",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("owner_id", Id, ForeignKey("owners.id"), nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("action", String(40), nullable=False),
    # Scans requeued by a redrive, dead-lettered by a revocation; NULL otherwise (0012).
    Column("count", Integer),
    Column("scan_ids", Text),  # JSON list, for a redrive by ids
    Column("filter", Text),  # JSON object, for a redrive by filter
    # board | api | cli; NULL for the redrives recorded before 0012 (shown as unknown).
    Column("origin", String(8)),
    Column("endpoint", String(200)),  # the endpoint the change touched, by name (0012)
    Column("detail", Text),  # JSON object: a token's id, name and kind; a hook's id and URL
    Index("ix_audit_owner", "owner_id", "id"),
    # Pruning past the retention walks the trail oldest first (0016).
    Index("ix_audit_at", "at"),
)

# Dead letters by cause (revisions 0017, 0020). `causes` names each key with its pattern; the
# other three are kept by triggers on scans (0020's docstring), so every path that makes,
# unmakes or deletes a dead letter keeps them equal to the dead letters in its own
# transaction, and a cause without dead letters has no row in any of them.
causes = Table(
    "causes",
    metadata,
    Column("cause", String(16), primary_key=True),
    Column("pattern", Text, nullable=False),
    Column("first_seen_at", BigInteger, nullable=False),
    # The version of the rules that made the pattern (lifecycle/causes.py::GROUPING_VERSION).
    Column("grouping_version", Integer, nullable=False),
)
# Dead letters now, per endpoint and cause: how many, the oldest's and the newest's time, and
# the newest's id.
dead_letter_causes = Table(
    "dead_letter_causes",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("cause", String(16), primary_key=True),
    Column("dead_letters", BigInteger, nullable=False),
    Column("first_seen_at", BigInteger, nullable=False),
    Column("last_seen_at", BigInteger, nullable=False),
    Column("example_scan_id", BigInteger, nullable=False),
)
# Dead letters now per endpoint, cause, queue and reason (the `counts_now` revision), kept
# by triggers of their own on scans: the list's count narrowed by a reason or a queue sums a
# few of them.
# '' stands for a dead letter without a cause or a reason; a key that counts none goes.
dead_letter_counts = Table(
    "dead_letter_counts",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("cause", String(16), primary_key=True),
    Column("queue", String(100), primary_key=True),
    Column("fail_reason", String(100), primary_key=True),
    Column("dead_letters", BigInteger, nullable=False),
)
# The queues, kinds and workers each cause's dead letters were in, and how often.
cause_facets = Table(
    "cause_facets",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("cause", String(16), primary_key=True),
    Column("facet", String(8), primary_key=True),  # queue | kind | worker
    Column("value", String(200), primary_key=True),
    Column("hits", BigInteger, nullable=False),
)
# Each cause's dead letters per hour, for the board's sparklines.
cause_hours = Table(
    "cause_hours",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("cause", String(16), primary_key=True),
    Column("hour_us", BigInteger, primary_key=True),
    Column("dead_letters", BigInteger, nullable=False),
)

# Queues an operator paused (revision 0018): their scans are not leased until resumed.
paused_queues = Table(
    "paused_queues",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("queue", String(100), primary_key=True),
    Column("paused_at", BigInteger, nullable=False),
    Column("paused_by", String(200), nullable=False),
)

# What the fleet did per endpoint and worker, by minute and by hour (revision 0019): flushed every
# few seconds by each server process (store/operator/activity.py), kept two hours by minute and two
# days by hour.
activity = Table(
    "activity",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("worker", String(200), primary_key=True),  # "" for a revocation's dead letters
    Column("span", String(8), primary_key=True),  # minute | hour
    Column("at_us", BigInteger, primary_key=True),  # the minute's or hour's start
    Column("finished", BigInteger, nullable=False),
    Column("failed", BigInteger, nullable=False),  # plainly failed scans
    Column("dead_lettered", BigInteger, nullable=False),
    Column("attempt_failures", BigInteger, nullable=False),  # a dead letter's last included
    Column("lapsed", BigInteger, nullable=False),  # leases and waits that ran out
    Index("ix_activity_at", "span", "at_us"),
)

# Signed-in board sessions (revision 0008): the cookie's secret is stored only as its sha256,
# beside the session's CSRF token; every server process reads them, so sign-out is global.
board_sessions = Table(
    "board_sessions",
    metadata,
    Column("session_hash", String(64), primary_key=True),
    Column("owner_id", Id, ForeignKey("owners.id"), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    # The next page's one-time message, sealed under the cookie secret (revision 0012).
    Column("flash", Text),
    # Ended sessions, swept at each sign-in once kept long enough to explain (revision 0010).
    Index("ix_board_sessions_expires", "expires_at"),
)

# What a dragonfly deployment's bot keeps beside the scans (revision 0022,
# store/dragonfly/): its reports to PyPI, one per package name and endpoint (a second report
# of any version is refused); its alert threshold per endpoint; its suppressions. Keyed by
# name and version rather than by scan, so retention pruning a scan forgets no report.
dragonfly_reports = Table(
    "dragonfly_reports",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("name", String(300), primary_key=True),
    Column("version", String(200), nullable=False),
    Column("scan_id", Id, nullable=False),  # the scan reported, not a key: it may be pruned
    Column("reported_at", BigInteger, nullable=False),
    Column("reported_by", String(200), nullable=False),
    Column("summary", Text, nullable=False),
    Column("inspector_url", Text, nullable=False),
    # The reported-packages listing, newest report first.
    Index("ix_dragonfly_reports_recent", "endpoint_id", "reported_at", "name"),
)

dragonfly_alerting = Table(
    "dragonfly_alerting",
    metadata,
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), primary_key=True),
    Column("threshold", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("updated_by", String(200), nullable=False),
)

dragonfly_suppressions = Table(
    "dragonfly_suppressions",
    metadata,
    Column("id", String(36), primary_key=True),  # a UUID, as the bot's model reads it
    Column("endpoint_id", Id, ForeignKey("endpoints.id"), nullable=False),
    Column("name", String(300), nullable=False),  # PEP 503 normalised
    Column("version", String(200), nullable=False),
    Column("rules", Text),  # a JSON array of rule names; NULL suppresses every rule
    Column("created_at", BigInteger, nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("updated_by", String(200), nullable=False),
    Index("ix_dragonfly_suppressions_key", "endpoint_id", "name", "version", "created_at", "id"),
)
