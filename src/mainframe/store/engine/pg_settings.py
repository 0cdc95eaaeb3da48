"""The PostgreSQL session settings the store relies on, and where each way of connecting gets
them: in the startup packet (directly), one SET after connecting (session pooling), or from
the role's defaults in the database, which `mainframe db upgrade` writes and the server
checks at start-up (transaction pooling, where nothing set on a session outlives its
transaction). Also what a server learns of its host at start-up: whether it takes writes."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from mainframe.store.engine.database import Tx, value
from mainframe.store.engine.statements import statement

# What the store's statements rely on, in the units pg_settings reports. A transaction left
# idle (none of ours waits between statements) is ended within 30 s. JIT compiling a hot CTE
# costs more than running it. Every prepared statement runs its generic plan, the one the
# plan tests pin (tests/integration/test_plans.py): left to choose, PostgreSQL keeps planning
# a statement whose generic plan looks dearer than its custom ones, and planning the whole
# result request costs more than running it. A search that needs its values planned asks for
# that itself (store/operator/dead_letters.py).
RELIED_ON = {
    "jit": "off",
    "plan_cache_mode": "force_generic_plan",
    "idle_in_transaction_session_timeout": "30000",
}
# A server host that vanishes (its link down, its process gone) must not keep its row locks
# until TCP gives up after minutes or hours: the database drops a peer that stops answering
# within ~10 s. Behind a pooler they guard the pooler's link instead; a Unix socket shows 0.
KEEPALIVES = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
APPLICATION_NAME = "mainframe"
# The encoding as PostgreSQL spells it back. asyncpg asks for `'utf-8'`; a pooler compares the
# client's spelling with what each server connection reports (`UTF8`), finds them different
# and sends a SET before every transaction (docs/scale-out.md, *Behind PgBouncer*).
CLIENT_ENCODING = {"client_encoding": "UTF8"}

SETTINGS_IN_FORCE = statement("settings_in_force")
HOST_WRITABLE = statement("host_writable")
ROLE_DEFAULTS = statement("role_defaults")


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    """How the server connects (`MAINFRAME_DATABASE_POOLER`) and the bounds it keeps: on one
    statement, in the database, and on one call's work, link included, in the server."""

    pooler: str = "none"
    statement_timeout_ms: int = 30_000
    deadline_s: float = 5.0  # 0: no bound
    pooler_prepares: bool = False  # a pooler that keeps prepared statements (PgBouncer >= 1.21)

    def deadline(self, *, lasting: bool = False) -> float | None:
        """The bound on one call's database work, in seconds (None: none). A lasting call (an
        operator's action over a whole endpoint) may run a statement as long as the
        database allows, and then some."""
        if not self.deadline_s or (lasting and not self.statement_timeout_ms):
            return None
        if lasting:
            return self.statement_timeout_ms / 1000 + self.deadline_s
        return self.deadline_s

    @property
    def prepares(self) -> bool:
        """Whether a connection may keep prepared statements: not in transaction pooling,
        unless the pooler keeps them itself."""
        return self.pooler != "transaction" or self.pooler_prepares

    def relied_on(self) -> dict[str, str]:
        """Every setting the store relies on, with the value it needs."""
        return RELIED_ON | {"statement_timeout": str(self.statement_timeout_ms)}

    def role_defaults(self) -> dict[str, str]:
        """What `mainframe db upgrade` makes the role's defaults in the database."""
        return self.relied_on() | KEEPALIVES

    def startup(self) -> dict[str, str]:
        """The startup parameters: all of them directly; a pooler refuses all but a few."""
        named = {"application_name": APPLICATION_NAME} | CLIENT_ENCODING
        if self.pooler == "none":
            return self.role_defaults() | named
        return named

    def sets_after_connect(self) -> bool:
        """Session pooling keeps a session's settings for its client: set them once."""
        return self.pooler == "session"


def not_in_force(policy: SessionPolicy, found: dict[str, str]) -> dict[str, str]:
    """The relied-on settings whose value in the session is not the one the store needs,
    each with the value found."""
    wanted = policy.relied_on()
    return {
        name: found.get(name, "?") for name, value in wanted.items() if found.get(name) != value
    }


def names_json(policy: SessionPolicy) -> str:
    """The relied-on settings (their names are the keys) as SETTINGS_IN_FORCE takes them."""
    return orjson.dumps(policy.relied_on()).decode()


async def host_writable(tx: Tx) -> bool:
    """Whether the PostgreSQL host this session reached takes writes."""
    return bool(await value(tx, HOST_WRITABLE))


async def settings_found(tx: Tx, policy: SessionPolicy) -> dict[str, str]:
    """The relied-on settings that are not in force in this PostgreSQL session, with their
    values."""
    rows = await tx.rows(SETTINGS_IN_FORCE, {"names": names_json(policy)})
    return not_in_force(policy, {row["name"]: row["setting"] for row in rows})
