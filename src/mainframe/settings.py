"""Settings read from MAINFRAME_* environment variables (CLI flags override them)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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

    database_url: str = DEFAULT_DATABASE_URL
    # What stands between the server and PostgreSQL: nothing, or a pooler (PgBouncer) in
    # session or transaction pooling, which decides what a connection may keep
    # (docs/scale-out.md).
    database_pooler: Literal["none", "session", "transaction"] = "none"
    # PostgreSQL: the longest one statement may run before the database cancels it (then 503),
    # so a stuck statement cannot hold a connection for ever; 0 turns the bound off.
    statement_timeout_seconds: float = Field(default=30.0, ge=0, le=86_400)
    # Seconds an assignment stays valid after leasing or the last heartbeat (README: Settings).
    job_timeout: float = Field(default=120.0, gt=0, le=7 * 86400)
    # Assignments a scan may get before it is dead-lettered (README: Settings).
    max_job_attempts: int = Field(default=3, ge=1, le=1000)
    # How often the sweeper reaps lapsed, budget-spent scans when no worker polls.
    sweep_seconds: float = Field(default=30.0, gt=0, le=3600)
    # The longest a worker may park a scan in a wait.
    max_wait_seconds: float = Field(default=86400.0, gt=0)
    # Dead letters reaped at most per job poll, so reaping never delays the lease.
    reap_per_poll: int = Field(default=100, ge=1, le=10_000)
    # Retries wait: base seconds doubling per attempt up to the max, full jitter; 0 turns it off.
    retry_base_seconds: float = Field(default=10.0, ge=0, le=86400)
    retry_max_seconds: float = Field(default=600.0, ge=0, le=7 * 86400)
    # How long a request waits for a locked SQLite file (off the event loop) before a 503.
    busy_wait_seconds: float = Field(default=5.0, gt=0, le=60)
    # Request bodies above this are refused with 413 before they are parsed.
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    # PostgreSQL connections per server process (store/postgres.py, no thread per call). 16 lets
    # commits of a fleet's concurrent results share WAL flushes (batch 1: 121 → 308 scans/s).
    pool_size: int = Field(default=16, ge=1, le=200)
    metrics_refresh_seconds: float = Field(default=60.0, gt=0)
    # How long a board sign-in lasts before the owner must sign in again (12 hours).
    board_session_seconds: float = Field(default=43_200.0, gt=0, le=30 * 86400)
    # Board sign-in attempts per client address: a sustained rate per minute and a burst, so
    # owner tokens cannot be guessed at speed.
    board_sign_in_per_minute: float = Field(default=5.0, gt=0)
    board_sign_in_burst: int = Field(default=10, ge=1)
    # Delivery-stats requests per token: a sustained rate per minute and a burst.
    stats_rate_per_minute: float = Field(default=60.0, gt=0)
    stats_burst: int = Field(default=10, ge=1)
    log_format: str = Field(default="auto", pattern="^(auto|json|console)$")
    log_level: str = Field(default="info", pattern="^(debug|info|warning|error)$")
    # Hooks (docs/hooks.md). The global kill switch for every outbound announcement.
    notify_hooks_enabled: bool = True
    # Accept plain http:// hook URLs (development only).
    hooks_allow_http: bool = False
    # Comma-separated CIDRs exempt from the refused address ranges (development and tests).
    hooks_allow_cidrs: str = ""
    # Seconds before the second and the third attempt of a notification, each jittered ±25%.
    hooks_backoff_seconds: str = "1,5"
    # Events waiting for delivery in this process at most; more are dropped and counted.
    hooks_queue_size: int = Field(default=10_000, ge=1, le=1_000_000)
    # How long the previous secret still signs after a rotation.
    hooks_rotation_grace_seconds: float = Field(default=86400.0, ge=0, le=30 * 86400)
    # Fernet key(s) that encrypt hook secrets at rest, comma-separated: the first encrypts.
    # The dragonfly workers' sessions are signed with keys derived from them.
    secret_key: SecretStr | None = None
    # How long a dragonfly worker's session (its CF_Authorization cookie) lasts; the worker
    # handshakes again only once it has passed, so at least five minutes (docs/dragonfly.md).
    dragonfly_session_seconds: int = Field(default=86_400, ge=300, le=30 * 86400)
    # The directory whose *.yara files GET /dragonfly/rules serves; unset serves no rules.
    dragonfly_rules_dir: Path | None = None
    # Retention (docs/reliability.md): days each kind is kept after it ended, pruned by the
    # sweeper; the defaults and why are in lifecycle/retention.py. FINISHED scans (with their
    # attempts), plain failures, dead letters from when they were dead-lettered, the audit
    # trail, per-minute delivery counts, ended board sessions.
    finished_retention_days: float | None = FINISHED_DAYS
    failed_retention_days: float | None = FAILED_DAYS
    dead_letter_retention_days: float | None = DEAD_LETTER_DAYS
    audit_retention_days: float | None = AUDIT_DAYS
    delivery_retention_days: float | None = DELIVERY_DAYS
    board_session_retention_days: float | None = BOARD_SESSION_DAYS

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
