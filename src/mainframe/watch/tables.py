"""The watcher's tables, declared at the head of its own migration chain (watch/migrations):
window leases and completions, the poll log, alert states and the alert outbox. Times are
integer microseconds since the epoch, UTC. The server's schema knows nothing of them.

One database serves one watched source: several watcher processes of the same configuration
share it, and window keys, alert names and the outbox are not namespaced by source."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
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

# SQLite only aliases the rowid for exactly "INTEGER PRIMARY KEY"; BigInteger keeps 64 bits on PG.
Id = BigInteger().with_variant(Integer(), "sqlite")
# The outbox's partial indexes, with the same predicates on both databases.
UNDELIVERED = text("delivered_at IS NULL")
DELIVERED = text("delivered_at IS NOT NULL")

# One row per window the watcher has tried: its lease (owner + expiry, taken by compare-and-set)
# and, once a complete observation arrived, its counts. The checkpoint is the newest end_us of
# a completed window.
watch_windows = Table(
    "watch_windows",
    metadata,
    Column("window_key", String(64), primary_key=True),
    Column("start_us", BigInteger, nullable=False),
    Column("length_s", Integer, nullable=False),
    Column("end_us", BigInteger, nullable=False),
    Column("lease_owner", String(200)),
    Column("lease_expires_at", BigInteger),
    Column("polls", Integer, nullable=False, server_default=text("0")),
    Column("last_class", String(32)),
    Column("completed_at", BigInteger),
    Column("attempts", BigInteger),
    Column("failures", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_watch_windows_end", "end_us"),
)

# Until when the source asked not to be polled (a Retry-After longer than one invocation
# waits): kept here, not in process memory, so the next `--once` from cron honours it too.
watch_quiet = Table(
    "watch_quiet",
    metadata,
    Column("source", String(200), primary_key=True),
    Column("until_us", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

# Every poll attempt with its own class, plus one throttle_exhausted row when an invocation
# spends its attempt budget; never collapsed into one error count.
watch_polls = Table(
    "watch_polls",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("window_key", String(64), ForeignKey("watch_windows.window_key"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("owner", String(200), nullable=False),
    Column("poll_class", String(32), nullable=False),
    Column("status", Integer),
    Column("detail", Text),
    Column("polled_at", BigInteger, nullable=False),
    Index("ix_watch_polls_window", "window_key", "id"),
    Index("ix_watch_polls_class", "poll_class", "id"),
)

# The current state of each alert (delivery_failure, observer_*), and the evaluation that set
# it. as_of_us is NULL until a policy first evaluated the alert (the state is "none").
watch_alerts = Table(
    "watch_alerts",
    metadata,
    Column("alert", String(100), primary_key=True),
    Column("policy_version", String(64), nullable=False),
    Column("firing", Boolean, nullable=False),
    Column("as_of_us", BigInteger),
    Column("window_key", String(64)),
    Column("starts_at_us", BigInteger),
    Column("ends_at_us", BigInteger),
    Column("labels", Text, nullable=False, server_default=text("'{}'")),
    Column("annotations", Text, nullable=False, server_default=text("'{}'")),
    Column("changed_at", BigInteger),
    Column("resent_at", BigInteger),
    Column("updated_at", BigInteger, nullable=False),
)

# Alert state changes waiting for (or done with) delivery. The unique key makes a replayed
# evaluation insert nothing twice; the relay claims rows for claim_expires_at.
watch_outbox = Table(
    "watch_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("alert", String(100), nullable=False),
    Column("policy_version", String(64), nullable=False),
    Column("window_key", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # firing | resolved
    Column("starts_at_us", BigInteger, nullable=False),
    Column("ends_at_us", BigInteger),
    Column("labels", Text, nullable=False),
    Column("annotations", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("delivered_at", BigInteger),
    Column("attempt_count", Integer, nullable=False, server_default=text("0")),
    Column("claim_expires_at", BigInteger),
    Column("last_error", Text),
    UniqueConstraint("alert", "policy_version", "window_key", "state", name="uq_watch_outbox_key"),
    Index(
        "ix_watch_outbox_undelivered",
        "id",
        postgresql_where=UNDELIVERED,
        sqlite_where=UNDELIVERED,
    ),
    # Delivered rows by delivery time, pruned past their retention oldest first (w0003).
    Index(
        "ix_watch_outbox_delivered",
        "delivered_at",
        postgresql_where=DELIVERED,
        sqlite_where=DELIVERED,
    ),
)

# Which sinks accepted which outbox row, so a retry after a partial failure skips them.
watch_outbox_sinks = Table(
    "watch_outbox_sinks",
    metadata,
    Column("outbox_id", Id, ForeignKey("watch_outbox.id"), primary_key=True),
    Column("sink", String(100), primary_key=True),
    Column("delivered_at", BigInteger, nullable=False),
)
