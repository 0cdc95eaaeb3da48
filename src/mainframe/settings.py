"""Settings read from MAINFRAME_* environment variables (CLI flags override them)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mainframe.lifecycle.quiet import QUIET_AFTER_SECONDS
from mainframe.lifecycle.retention import (
    AUDIT_DAYS,
    BOARD_SESSION_DAYS,
    DEAD_LETTER_DAYS,
    DELIVERY_DAYS,
    FAILED_DAYS,
    FINISHED_DAYS,
    RetentionPolicy,
)
from mainframe.parsers import (
    DEFAULT_DATABASE_URL,
    check_database_url,
    parse_backoff,
    parse_cidrs,
    parse_keys,
    parse_retention_days,
)

# The retention settings: days a kind of row is kept after it ended (fractional allowed, 0
# prunes at the sweeper's next pass, `never` keeps it forever). docs/reliability.md.
RETENTIONS = (
    "finished_retention_days",
    "failed_retention_days",
    "dead_letter_retention_days",
    "audit_retention_days",
    "delivery_retention_days",
    "board_session_retention_days",
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MAINFRAME_", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="The database: sqlite:///FILE, or postgresql://user@host:port/db "
        "(libpq's multi-host form too).",
    )
    # What stands between the server and PostgreSQL: nothing, or a pooler (PgBouncer) in
    # session or transaction pooling, which decides what a connection may keep
    # (docs/scale-out.md).
    database_pooler: Literal["none", "session", "transaction"] = Field(
        default="none", description="The pooler in front of PostgreSQL, if any (PgBouncer)."
    )
    # PgBouncer 1.21 and later keep a client's prepared statements in transaction pooling when
    # their `max_prepared_statements` is above 0: then the servers keep theirs too
    # (docs/scale-out.md, Behind PgBouncer). A server asks the pooler at start-up and follows
    # its answer; this is what it assumes when the database cannot be asked then.
    database_pooler_prepares: bool = Field(
        default=False,
        description="Transaction pooling through a pooler that keeps prepared statements "
        "(PgBouncer >= 1.21 with max_prepared_statements > 0), unless asked otherwise.",
    )
    # PostgreSQL: the longest one statement may run before the database cancels it (then 503),
    # so a stuck statement cannot hold a connection for ever; 0 turns the bound off.
    statement_timeout_seconds: float = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description="PostgreSQL: a statement running longer is cancelled (503); 0: no bound.",
    )
    # PostgreSQL: the longest one call's database work may take, the link included, so a link
    # that hangs (a pooler that stopped relaying, a partitioned path, where neither keepalives
    # nor statement_timeout fire) answers 503 in bounded time and its connection is dropped.
    database_deadline_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="PostgreSQL: a request's database work taking longer answers 503 and drops "
        "its connection; 0: no bound.",
    )
    # Seconds an assignment stays valid after leasing or the last heartbeat (README: Settings).
    job_timeout: float = Field(
        default=120.0,
        gt=0,
        le=7 * 86400,
        description="Seconds a lease lasts (fractional allowed); heartbeats extend it.",
    )
    # Assignments a scan may get before it is dead-lettered (README: Settings).
    max_job_attempts: int = Field(
        default=3, ge=1, le=1000, description="Assignments a scan gets before it is dead-lettered."
    )
    # How often the sweeper reaps lapsed, budget-spent scans when no worker polls.
    sweep_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="How often the sweeper reaps spent leases and prunes what is past its "
        "retention.",
    )
    # The longest a worker may park a scan in a wait.
    max_wait_seconds: float = Field(
        default=86400.0, gt=0, description="The longest a worker may park a scan in a wait."
    )
    # Dead letters reaped at most per job poll, so reaping never delays the lease.
    reap_per_poll: int = Field(
        default=100, ge=1, le=10_000, description="Lapsed leases reaped at most in one job poll."
    )
    # Retries wait: base seconds doubling per attempt up to the max, full jitter; 0 turns it off.
    retry_base_seconds: float = Field(
        default=10.0,
        ge=0,
        le=86400,
        description="A retry waits up to base x 2^(attempt-1) seconds (full jitter); 0: no wait.",
    )
    retry_max_seconds: float = Field(
        default=600.0, ge=0, le=7 * 86400, description="The longest a retry waits, in seconds."
    )
    # A scan a worker failed (or let lapse) goes to another worker of its endpoint that asks
    # within this long after it is due; past it, or with no other worker asking, to anyone
    # (docs/reliability.md).
    retry_elsewhere_seconds: float = Field(
        default=60.0,
        ge=0,
        le=86400,
        description="How long a retry waits for a worker other than the one that failed it; "
        "0: the next poll takes it.",
    )
    # How long a request waits for a locked SQLite file (off the event loop) before a 503.
    busy_wait_seconds: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="SQLite: how long a request waits for a locked file before 503.",
    )
    # Request bodies above this are refused with 413 before they are parsed.
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Larger request bodies get 413."
    )
    # PostgreSQL connections per server process (store/engine/postgres.py, no thread per call). 16
    # lets commits of a fleet's concurrent results share WAL flushes (batch 1: 121 → 308 scans/s).
    pool_size: int = Field(
        default=16, ge=1, le=200, description="PostgreSQL connections per server process."
    )
    metrics_refresh_seconds: float = Field(
        default=60.0, gt=0, description="How often the database gauges are reconciled."
    )
    # A source silent this long is marked quiet on the board and by `mainframe stats`; keep it
    # the threshold of MainframeSourceQuiet in deploy/prometheus/alerts.yml (lifecycle/quiet.py).
    quiet_source_seconds: float = Field(
        default=QUIET_AFTER_SECONDS,
        gt=0,
        le=30 * 86400,
        description="A source with no submission accepted for longer is marked quiet "
        "(the board, mainframe stats); the alert's threshold.",
    )
    # How long a board sign-in lasts before the owner must sign in again (12 hours).
    board_session_seconds: float = Field(
        default=43_200.0, gt=0, le=30 * 86400, description="How long a board sign-in lasts."
    )
    # Board sign-in attempts per client address: a sustained rate per minute and a burst, so
    # owner tokens cannot be guessed at speed.
    board_sign_in_per_minute: float = Field(
        default=5.0, gt=0, description="Board sign-in attempts per client address per minute."
    )
    board_sign_in_burst: int = Field(
        default=10, ge=1, description="Board sign-in attempts allowed at once."
    )
    # Delivery-stats requests per token: a sustained rate per minute and a burst.
    stats_rate_per_minute: float = Field(
        default=60.0, gt=0, description="Delivery-stats requests per token per minute."
    )
    stats_burst: int = Field(default=10, ge=1, description="Delivery-stats requests at once.")
    log_format: str = Field(
        default="auto",
        pattern="^(auto|json|console)$",
        description="json, console, or auto (JSON unless stderr is a terminal).",
    )
    log_level: str = Field(
        default="info",
        pattern="^(debug|info|warning|error)$",
        description="debug, info, warning or error.",
    )
    # Off by default: at thousands of requests a second the lines would drown every other
    # event, and the request durations are on /metrics already.
    access_log: bool = Field(
        default=False,
        description="Log one line per HTTP request: method, path, status, seconds, client.",
    )
    # Hooks (docs/hooks.md). The global kill switch for every outbound announcement.
    notify_hooks_enabled: bool = Field(
        default=True, description="The kill switch for every hook announcement."
    )
    # Accept plain http:// hook URLs (development only).
    hooks_allow_http: bool = Field(
        default=False, description="Accept plain http:// hook URLs (development only)."
    )
    # Comma-separated CIDRs exempt from the refused address ranges (development and tests).
    hooks_allow_cidrs: str = Field(
        default="", description="Comma-separated CIDRs hooks may reach though not public."
    )
    # Seconds before the second and the third attempt of a notification, each jittered ±25%.
    hooks_backoff_seconds: str = Field(
        default="1,5", description="Seconds before a notification's second and third attempt."
    )
    # Events waiting for delivery in this process at most; more are dropped and counted.
    hooks_queue_size: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Notifications waiting in this process at most; more are dropped.",
    )
    # How long the previous secret still signs after a rotation.
    hooks_rotation_grace_seconds: float = Field(
        default=86400.0,
        ge=0,
        le=30 * 86400,
        description="How long a hook's previous secret still signs after a rotation.",
    )
    # Fernet key(s) that encrypt hook secrets at rest, comma-separated: the first encrypts.
    # The dragonfly workers' sessions are signed with keys derived from them.
    secret_key: SecretStr | None = Field(
        default=None, description="Fernet key(s) encrypting hook secrets (environment only)."
    )
    # How long a dragonfly worker's session (its CF_Authorization cookie) lasts; the worker
    # handshakes again only once it has passed, so at least five minutes (docs/dragonfly.md).
    dragonfly_session_seconds: int = Field(
        default=86_400,
        ge=300,
        le=30 * 86400,
        description="How long a dragonfly worker's session cookie lasts.",
    )
    # The directory whose *.yara files GET /dragonfly/rules serves; unset serves no rules.
    dragonfly_rules_dir: Path | None = Field(
        default=None, description="The directory of *.yara files served to dragonfly workers."
    )
    # Where the loader's and the bot's routes look packages up (PyPI's JSON API and project
    # pages) and where a report is handed on (dragonfly-reporter), each call bounded by the
    # timeout (docs/dragonfly.md).
    dragonfly_pypi_url: str = Field(
        default="https://pypi.org",
        description="PyPI (or a mirror of its JSON API) the dragonfly routes look packages up in.",
    )
    dragonfly_reporter_url: str | None = Field(
        default=None, description="The dragonfly-reporter reports are handed to; unset refuses."
    )
    dragonfly_upstream_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="Each call to PyPI or the reporter is given up after this many seconds.",
    )
    # Whether a dragonfly result that echoes no assignment may close a retry: `rollout` (the
    # default) accepts it on a first attempt only; `lease_holder` also when its worker holds
    # the current lease and held no earlier attempt of the scan (docs/dragonfly.md).
    dragonfly_legacy_results: Literal["rollout", "lease_holder"] = Field(
        default="rollout",
        description="Which unechoed dragonfly results are accepted: rollout or lease_holder.",
    )
    # Retention (docs/reliability.md): days each kind is kept after it ended, pruned by the
    # sweeper; the defaults and why are in lifecycle/retention.py. FINISHED scans (with their
    # attempts), plain failures, dead letters from when they were dead-lettered, the audit
    # trail, per-minute delivery counts, ended board sessions.
    finished_retention_days: float | None = Field(
        default=FINISHED_DAYS, description="Days a FINISHED scan is kept (or never)."
    )
    failed_retention_days: float | None = Field(
        default=FAILED_DAYS, description="Days a permanent failure is kept (or never)."
    )
    dead_letter_retention_days: float | None = Field(
        default=DEAD_LETTER_DAYS,
        description="Days a dead letter nobody redrove is kept (or never).",
    )
    audit_retention_days: float | None = Field(
        default=AUDIT_DAYS, description="Days an audit row is kept (or never)."
    )
    delivery_retention_days: float | None = Field(
        default=DELIVERY_DAYS,
        description="Days a minute of hook delivery counts is kept (or never).",
    )
    board_session_retention_days: float | None = Field(
        default=BOARD_SESSION_DAYS, description="Days an ended board session is kept (or never)."
    )

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        return check_database_url(value)

    @field_validator(*RETENTIONS, mode="before")
    @classmethod
    def _retention(cls, value: object) -> float | None:
        return parse_retention_days(value)

    def retention_policy(self) -> RetentionPolicy:
        """The retention settings as the pure policy the store prunes by."""
        return RetentionPolicy.of_days(
            finished=self.finished_retention_days,
            failed=self.failed_retention_days,
            dead_lettered=self.dead_letter_retention_days,
            audit=self.audit_retention_days,
            delivery_counts=self.delivery_retention_days,
            board_sessions=self.board_session_retention_days,
        )

    @field_validator("hooks_allow_cidrs")
    @classmethod
    def _cidrs(cls, value: str) -> str:
        parse_cidrs(value)
        return value

    @field_validator("hooks_backoff_seconds")
    @classmethod
    def _backoff(cls, value: str) -> str:
        parse_backoff(value)
        return value

    @field_validator("dragonfly_pypi_url", "dragonfly_reporter_url")
    @classmethod
    def _service_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http(s) URL")
        return value.rstrip("/")

    @field_validator("dragonfly_rules_dir")
    @classmethod
    def _rules_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError("must be an existing directory")
        return value

    @field_validator("secret_key")
    @classmethod
    def _fernet_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            try:
                parse_keys(value.get_secret_value())
            except ValueError:
                raise ValueError("must be Fernet keys (32 url-safe base64 bytes each)") from None
        return value
