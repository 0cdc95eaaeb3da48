"""The watcher's configuration: one TOML file (`watch.toml`, documented key by key in
`watch.example.toml`), read with tomllib into a strict model: one `[source]` (the source
named `default`) or several `[sources.NAME]`, each resolved into a SourcePlan. An unknown
key, a wrong type or a contradiction stops the watcher with one line naming the key."""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mainframe.parsers import check_database_url, parse_retention_days
from mainframe.watch.policies import DeliveryPolicy, ObserverPolicy
from mainframe.watch.ports import DEFAULT_SOURCE
from mainframe.watch.quota import QuotaPolicy
from mainframe.watch.retention import (
    DELIVERED_OUTBOX_DAYS,
    POLL_LOG_DAYS,
    WatchRetention,
    days_us,
)
from mainframe.watch.sinks import check_labels, parse_secrets

DEFAULT_DATABASE_URL = "sqlite:///./watch.db"
# Versions and sink names become label values: keep them short and plain.
LABEL_VALUE = r"^[A-Za-z0-9._-]{1,32}$"
SINK_NAME = r"^[a-z0-9_-]{1,32}$"
SOURCE_TYPES = frozenset({"mainframe", "prometheus"})
# A source's name: a label value and a key in every watcher table.
SOURCE_NAME = r"^[A-Za-z0-9._-]{1,64}$"
SourceName = Annotated[str, Field(pattern=SOURCE_NAME)]
SINK_TYPES = frozenset({"alertmanager", "webhook"})


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid; the message names the key."""


def default_owner() -> str:
    """What this watcher calls itself when it leases a window: host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]


def _from_env(info: ValidationInfo, variable: str) -> str:
    environ: Mapping[str, str] = (info.context or {}).get("environ", os.environ)
    value = environ.get(variable, "").strip()
    if not value:
        raise ValueError(f"environment variable {variable} is not set")
    return value


class _Credential(_Strict):
    token: SecretStr | None = None
    # Name of an environment variable that holds the token (keeps it out of the file).
    token_env: str | None = None

    @model_validator(mode="after")
    def _one_token(self, info: ValidationInfo) -> Self:
        if self.token is not None and self.token_env is not None:
            raise ValueError("give token or token_env, not both")
        if self.token_env is not None:
            self.token = SecretStr(_from_env(info, self.token_env))
        return self

    def bearer(self) -> str | None:
        return None if self.token is None else self.token.get_secret_value()


class DeliveryConfig(_Strict):
    version: Annotated[str, Field(pattern=LABEL_VALUE)] = "v1"
    # Fire when failures / attempts exceeds this over at least min_attempts attempts...
    ratio: Annotated[float, Field(ge=0, lt=1)] = 0.1
    min_attempts: Annotated[int, Field(ge=1)] = 20
    # ...or when failures reach this count whatever the volume (0 turns it off).
    absolute_failures: Annotated[int, Field(ge=0)] = 10

    def policy(self) -> DeliveryPolicy:
        return DeliveryPolicy(self.version, self.ratio, self.min_attempts, self.absolute_failures)


class ObserverConfig(_Strict):
    version: Annotated[str, Field(pattern=LABEL_VALUE)] = "v1"
    max_checkpoint_age_seconds: Annotated[float, Field(gt=0)] = 300.0
    max_throttle_exhaustions: Annotated[int, Field(ge=1)] = 3
    max_outbox_age_seconds: Annotated[float, Field(gt=0)] = 300.0

    def policy(self) -> ObserverPolicy:
        return ObserverPolicy(
            self.version,
            self.max_checkpoint_age_seconds,
            self.max_throttle_exhaustions,
            self.max_outbox_age_seconds,
        )


class AlertmanagerSinkConfig(_Strict):
    type: Literal["alertmanager"]
    url: HttpUrl
    name: Annotated[str, Field(pattern=SINK_NAME)] = "alertmanager"
    # Extra labels on every alert (e.g. team, env): bounded values, no ids.
    labels: dict[str, str] = Field(default_factory=dict)
    generator_url: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10.0

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return check_labels(value)


class WebhookSinkConfig(_Strict):
    type: Literal["webhook"]
    url: HttpUrl
    name: Annotated[str, Field(pattern=SINK_NAME)] = "webhook"
    # The current secret first; during a rotation the previous one second.
    secrets: list[SecretStr] | None = None
    # Or an environment variable holding one secret, or two separated by a space.
    secret_env: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10.0

    @model_validator(mode="after")
    def _secrets(self, info: ValidationInfo) -> Self:
        if (self.secrets is None) == (self.secret_env is None):
            raise ValueError("give exactly one of secrets or secret_env")
        if self.secret_env is not None:
            self.secrets = [SecretStr(s) for s in _from_env(info, self.secret_env).split()]
        parse_secrets(self.secret_values())
        return self

    def secret_values(self) -> list[str]:
        return [s.get_secret_value() for s in self.secrets or []]


SinkConfig = Annotated[AlertmanagerSinkConfig | WebhookSinkConfig, Field(discriminator="type")]


class _SourceCommon(_Credential):
    """What every source may set beside its type's keys: its share of the quota, and where
    it needs them its own window, policies and sinks (the top-level ones otherwise)."""

    # The source's allowance across every watcher on the database (docs/watch.md, "The
    # quota"): requests per second with a burst after a quiet spell, and requests in flight.
    requests_per_second: Annotated[float, Field(gt=0, le=10_000)] | None = None
    burst: Annotated[int, Field(ge=1, le=10_000)] = 1
    max_concurrency: Annotated[int, Field(ge=1, le=1_000)] | None = None
    window_seconds: Annotated[int, Field(ge=1, le=86400)] | None = None
    settle_seconds: Annotated[float, Field(ge=0, le=3600)] | None = None
    lookback_seconds: Annotated[int, Field(ge=1, le=7 * 86400)] | None = None
    delivery: DeliveryConfig | None = None
    observer: ObserverConfig | None = None
    sinks: Annotated[list[SinkConfig], Field(min_length=1)] | None = None

    def quota(self) -> QuotaPolicy:
        return QuotaPolicy(self.requests_per_second, self.burst, self.max_concurrency)


class MainframeSourceConfig(_SourceCommon):
    type: Literal["mainframe"]
    url: HttpUrl
    timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10.0

    @model_validator(mode="after")
    def _token_required(self) -> Self:
        if self.token is None:
            raise ValueError("an owner token is required: give token or token_env")
        return self


class PrometheusSourceConfig(_SourceCommon):
    type: Literal["prometheus"]
    url: HttpUrl
    attempts_query: Annotated[str, Field(min_length=1)]
    failures_query: Annotated[str, Field(min_length=1)]
    timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 10.0


SourceConfig = Annotated[
    MainframeSourceConfig | PrometheusSourceConfig, Field(discriminator="type")
]


# Days, fractional allowed, or "never" (None): kept forever.
RetentionDays = Annotated[float | None, BeforeValidator(parse_retention_days)]


class RetentionConfig(_Strict):
    # Windows that ended this long ago are forgotten with their poll log (never one still
    # inside lookback_seconds).
    poll_log_days: RetentionDays = POLL_LOG_DAYS
    # Alerts every sink took this long ago are forgotten (never an undelivered one).
    delivered_outbox_days: RetentionDays = DELIVERED_OUTBOX_DAYS

    def policy(self) -> WatchRetention:
        return WatchRetention(days_us(self.poll_log_days), days_us(self.delivered_outbox_days))


class TelemetryConfig(_Strict):
    host: str = "127.0.0.1"
    # Where the watcher's own /metrics listens, apart from Mainframe's; port 0 turns it off.
    port: Annotated[int, Field(ge=0, le=65535)] = 9464


class WatchConfig(_Strict):
    database_url: str = DEFAULT_DATABASE_URL
    window_seconds: Annotated[int, Field(ge=1, le=86400)] = 60
    # Wait this long after a window closes before asking: late deliveries, scrape lag.
    settle_seconds: Annotated[float, Field(ge=0, le=3600)] = 30.0
    # How far back closed windows are (re)evaluated; bounded by the source's retention.
    lookback_seconds: Annotated[int, Field(ge=1, le=7 * 86400)] = 900
    # How long a watcher holds a window while it polls it; another may take it after.
    lease_seconds: Annotated[float, Field(gt=0, le=3600)] = 300.0
    poll_interval_seconds: Annotated[float, Field(gt=0, le=3600)] = 15.0
    # Polls of one window per invocation before it counts as a throttle exhaustion.
    max_attempts: Annotated[int, Field(ge=1, le=20)] = 5
    owner: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        default_factory=default_owner
    )
    # Firing alerts are re-sent this often (Alertmanager forgets them after resolve_timeout).
    resend_interval_seconds: Annotated[float, Field(gt=0, le=3600)] = 60.0
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # One source (named "default"), or several by name: [sources.NAME].
    source: SourceConfig | None = None
    sources: dict[SourceName, SourceConfig] = Field(default_factory=dict)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    observer: ObserverConfig = Field(default_factory=ObserverConfig)
    # Every source's sinks, unless it names its own.
    sinks: list[SinkConfig] = Field(default_factory=list)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        return check_database_url(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.source is None and not self.sources:
            raise ValueError("source: required key is missing (or give [sources.NAME] tables)")
        if self.source is not None and self.sources:
            raise ValueError("give one [source] table or [sources.NAME] tables, not both")
        _distinct_sinks(self.sinks, "sinks")
        for plan in self.plans():
            where = "" if self.source is not None else f"sources.{plan.name}."
            _check_plan(plan, self.poll_interval_seconds, where)
        return self

    def plans(self) -> list[SourcePlan]:
        """Each source with its settings resolved: its own where it set them, the top-level
        ones otherwise; in the order of the file."""
        named = {DEFAULT_SOURCE: self.source} if self.source is not None else self.sources
        return [self._plan(name, source) for name, source in named.items() if source is not None]

    def _plan(self, name: str, source: SourceConfig) -> SourcePlan:
        def own(value: Any, default: Any) -> Any:
            return default if value is None else value

        return SourcePlan(
            name=name,
            source=source,
            window_seconds=own(source.window_seconds, self.window_seconds),
            settle_seconds=own(source.settle_seconds, self.settle_seconds),
            lookback_seconds=own(source.lookback_seconds, self.lookback_seconds),
            delivery=own(source.delivery, self.delivery),
            observer=own(source.observer, self.observer),
            sinks=own(source.sinks, self.sinks),
            own_sinks=source.sinks is not None,
        )


@dataclass(frozen=True)
class SourcePlan:
    """One source as the watcher runs it: its name, its keys and its resolved settings."""

    name: str
    source: SourceConfig
    window_seconds: int
    settle_seconds: float
    lookback_seconds: int
    delivery: DeliveryConfig
    observer: ObserverConfig
    sinks: list[SinkConfig]
    own_sinks: bool

    @property
    def quota(self) -> QuotaPolicy:
        return self.source.quota()


def _check_plan(plan: SourcePlan, poll_interval_s: float, where: str) -> None:
    if not plan.sinks:
        also = " (and there are no top-level [[sinks]])" if where else ""
        raise ValueError(f"{where}sinks: required key is missing{also}")
    _distinct_sinks(plan.sinks, f"{where}sinks")
    if plan.lookback_seconds < plan.window_seconds:
        raise ValueError(f"{where}lookback_seconds must be at least window_seconds")
    if isinstance(plan.source, MainframeSourceConfig) and plan.window_seconds % 60:
        raise ValueError(
            f"{where}window_seconds must be a whole number of minutes for the mainframe source"
        )
    detection = plan.window_seconds + plan.settle_seconds + poll_interval_s
    if plan.observer.max_checkpoint_age_seconds <= detection:
        raise ValueError(
            f"{where}observer.max_checkpoint_age_seconds must exceed window_seconds + "
            f"settle_seconds + poll_interval_seconds ({detection:g}), or it always fires"
        )


def _distinct_sinks(sinks: list[SinkConfig], where: str) -> None:
    names = [sink.name for sink in sinks]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"{where}: two sinks are named {name!r}: give each a distinct name")


def load_config(path: Path, *, environ: Mapping[str, str] | None = None) -> WatchConfig:
    """Read and check `path`; environment lookups (token_env, secret_env) use `environ`."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return parse_config(raw, origin=str(path), environ=environ)


def parse_config(
    raw: Mapping[str, Any], *, origin: str = "watch.toml", environ: Mapping[str, str] | None = None
) -> WatchConfig:
    context = {"environ": os.environ if environ is None else environ}
    try:
        return WatchConfig.model_validate(raw, context=context)
    except ValidationError as exc:
        raise ConfigError(f"{origin}: {describe(exc)}") from exc


def describe(exc: ValidationError) -> str:
    """The first error, as `key.path: what is wrong`."""
    first = exc.errors()[0]
    path = key_path(first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    kind, ctx = first["type"], first.get("ctx") or {}
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "union_tag_invalid":
        message = f"type must be one of {ctx['expected_tags']} (got {ctx['tag']!r})"
    elif kind == "union_tag_not_found":
        message = "type is required"
    elif kind == "too_short":
        message = "needs at least one entry"
    elif first["loc"] and first["loc"][-1] == "[key]":
        path = path.removesuffix(".[key]")
        message = "a source's name is 1 to 64 letters, digits, '.', '_' or '-'"
    return f"{path}: {message}" if path else message


def key_path(loc: tuple[int | str, ...]) -> str:
    """`("sinks", 1, "webhook", "url")` → `sinks[1].url` (the union's tag is dropped)."""
    text = ""
    for i, part in enumerate(loc):
        parent = loc[i - 1] if i else None
        if isinstance(part, int):
            text += f"[{part}]"
        elif (
            (parent == "source" and part in SOURCE_TYPES)
            or (i > 1 and loc[i - 2] == "sources" and part in SOURCE_TYPES)
            or (isinstance(parent, int) and part in SINK_TYPES)
        ):
            continue
        else:
            text += f".{part}" if text else part
    return text
