"""The parsers behind settings that other layers use too: a database URL, CIDR lists, hook
retry pauses and Fernet keys. A leaf module: settings, the store, the hooks and the watcher all
import it, and it imports none of them."""

from __future__ import annotations

import ipaddress

from cryptography.fernet import Fernet

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_DATABASE_URL = "sqlite:///./mainframe.db"
SUPPORTED_URL_PREFIXES = ("sqlite://", "postgresql://", "postgresql+psycopg://")


# How the server reaches PostgreSQL: directly, or through a pooler such as PgBouncer in
# session or transaction pooling (docs/scale-out.md). A pooler passes on only a few startup
# parameters, and in transaction pooling no prepared statement or session setting outlives a
# transaction.
POOLER_MODES = ("none", "session", "transaction")
# Query parameters that carry a secret in a libpq URL.
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


def check_database_url(url: str) -> str:
    """The URL unchanged if Mainframe can open it; ValueError (for settings) otherwise."""
    if not url.startswith(SUPPORTED_URL_PREFIXES):
        raise ValueError("must start with sqlite:// or postgresql://")
    return url


def libpq_url(url: str) -> str:
    """A PostgreSQL URL as libpq, psycopg and asyncpg read it (no SQLAlchemy driver suffix).

    The URL is otherwise passed on untouched: libpq's multi-host form
    (`postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`) is theirs to read."""
    scheme, sep, rest = url.partition("://")
    return "postgresql" + sep + rest if scheme.startswith("postgresql") else url


def redact_url(url: str) -> str:
    """The URL with any password removed, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    location, query_sep, query = rest.partition("?")
    authority, slash, path = location.partition("/")
    user, at, hosts = authority.rpartition("@")
    if at:
        authority = user.partition(":")[0] + "@" + hosts
    if query:
        kept = [p for p in query.split("&") if p.partition("=")[0] not in _SECRET_PARAMS]
        query = "&".join(kept)
        query_sep = "?" if query else ""
    return f"{scheme}{sep}{authority}{slash}{path}{query_sep}{query}"


def parse_cidrs(text: str) -> tuple[IPNetwork, ...]:
    """Comma-separated CIDRs (or single addresses); ValueError naming the bad one."""
    networks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError as exc:
            raise ValueError(f"{part!r} is not a CIDR range") from exc
    return tuple(networks)


def parse_backoff(text: str) -> tuple[float, ...]:
    """`MAINFRAME_HOOKS_BACKOFF_SECONDS`: comma-separated non-negative seconds, one per retry
    (the last repeats)."""
    try:
        steps = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        steps = ()
    if not 1 <= len(steps) <= 4 or not all(0 <= s <= 300 for s in steps):  # NaN fails too
        raise ValueError("give one to four comma-separated seconds, each between 0 and 300")
    return steps


def parse_keys(text: str) -> list[bytes]:
    """Comma-separated Fernet keys; ValueError when one is not a Fernet key."""
    keys = [part.strip().encode() for part in text.split(",") if part.strip()]
    if not keys:
        raise ValueError("give at least one Fernet key")
    for key in keys:
        Fernet(key)  # raises ValueError for anything but 32 url-safe base64 bytes
    return keys


# The word that keeps rows forever wherever a retention in days is configured.
KEEP_FOREVER = "never"
# The longest retention a number may give (a century): keeps microseconds inside 64 bits.
MAX_RETENTION_DAYS = 36_500.0


def parse_retention_days(value: object) -> float | None:
    """A retention in days (fractional allowed, 0 prunes at once) or `never` (None: kept
    forever); ValueError for anything else, negative, NaN or beyond a century."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == KEEP_FOREVER:
            return None
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"give a number of days or {KEEP_FOREVER!r}") from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"give a number of days or {KEEP_FOREVER!r}")
    days = float(value)
    if not 0 <= days <= MAX_RETENTION_DAYS:  # NaN fails too
        raise ValueError(f"give between 0 and {MAX_RETENTION_DAYS:g} days, or {KEEP_FOREVER!r}")
    return days
