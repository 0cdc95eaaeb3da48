"""The watcher's tables, declared at the head of its own migration chain (watch/migrations):
window leases and completions, the poll log, alert states and the alert outbox. Times are
integer microseconds since the epoch, UTC. The server's schema knows nothing of them.

One database serves any number of named sources (`[sources.NAME]` of watch.toml): every table
but the per-sink delivery record is keyed by the source's name first, so two sources with the
same window times never share a window, an alert or an outbox row. Several watcher processes
share the database and, through `watch_quota` and `watch_quota_slots`, each source's quota."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
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

# SQLite only aliases the rowid for exactly "INTEGER PRIMARY KEY"; BigInteger keeps 64 bits on PG.
Id = BigInteger().with_variant(Integer(), "sqlite")
# The outbox's partial indexes, with the same predicates on both databases.
UNDELIVERED = text("delivered_at IS NULL")
DELIVERED = text("delivered_at IS NOT NULL")
# A source's name, as configured: 1 to 64 letters, digits, '.', '_' or '-'.
SourceName = String(64)

# One row per window the watcher has tried: its lease (owner + expiry, taken by compare-and-set)
# and, once a complete observation arrived, its counts. The checkpoint is the newest end_us of
# a completed window.
watch_windows = Table(
    "watch_windows",
    metadata,
    Column("source", SourceName, primary_key=True),
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
    # Pruning walks every source's windows by age; a source's checkpoint and its completed
    # windows in the lookback walk its own.
    Index("ix_watch_windows_end", "end_us"),
    Index("ix_watch_windows_source_end", "source", "end_us"),
)

# Each source's shared quota: the token bucket (tokens at bucket_at_us, on the database's
# clock), and until when no watcher may ask it anything (a Retry-After seen by any of them).
# Kept here, not in process memory, so every watcher and the next `--once` honour it.
watch_quota = Table(
    "watch_quota",
    metadata,
    Column("source", SourceName, primary_key=True),
    Column("tokens", Float, nullable=False),
    Column("bucket_at_us", BigInteger, nullable=False),
    Column("not_before_us", BigInteger, nullable=False, server_default=text("0")),
    Column("updated_at", BigInteger, nullable=False),
)

# A source's requests in flight: one row per slot up to max_concurrency, held by a watcher
# for one poll and released after it (or lapsing at held_until_us if that watcher died).
watch_quota_slots = Table(
    "watch_quota_slots",
    metadata,
    Column("source", SourceName, primary_key=True),
    Column("slot", Integer, primary_key=True),
    Column("holder", String(200)),
    Column("held_until_us", BigInteger),
)

# Every poll attempt with its own class, plus one throttle_exhausted row when an invocation
# spends its attempt budget; never collapsed into one error count.
watch_polls = Table(
    "watch_polls",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("source", SourceName, nullable=False),
    Column("window_key", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("owner", String(200), nullable=False),
    Column("poll_class", String(32), nullable=False),
    Column("status", Integer),
    Column("detail", Text),
    Column("polled_at", BigInteger, nullable=False),
    ForeignKeyConstraint(
        ["source", "window_key"], ["watch_windows.source", "watch_windows.window_key"]
    ),
    Index("ix_watch_polls_window", "source", "window_key", "id"),
    # A source's newest poll and its throttle exhaustions since its last completion.
    Index("ix_watch_polls_source", "source", "id"),
    Index("ix_watch_polls_class", "source", "poll_class", "id"),
)

# The current state of each alert (delivery_failure, observer_*), and the evaluation that set
# it. as_of_us is NULL until a policy first evaluated the alert (the state is "none").
watch_alerts = Table(
    "watch_alerts",
    metadata,
    Column("source", SourceName, primary_key=True),
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
    Column("source", SourceName, nullable=False),
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
    UniqueConstraint(
        "source", "alert", "policy_version", "window_key", "state", name="uq_watch_outbox_key"
    ),
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
