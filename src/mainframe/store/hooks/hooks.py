"""The hooks of each endpoint: the owners' management calls and the dispatcher's reads and
bookkeeping. Signing secrets are stored only as Fernet tokens (store/hooks/hook_secrets.py). Every
stamp (creation, a rotation's grace, the last delivery) and the end of a rotation's grace are
taken from `mf_now()`, so every server process of a fleet agrees on them. Each owner's
change (create, enable, rotate, delete) writes its audit row in its own transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from mainframe.store.accounts import audit
from mainframe.store.accounts.audit import Action, Origin
from mainframe.store.accounts.owners import EndpointRecord, endpoint_by_name
from mainframe.store.engine.database import (
    Conflict,
    Database,
    NotFound,
    Row,
    Tx,
    first,
    record,
    transact,
    value,
)
from mainframe.store.engine.statements import statement
from mainframe.store.hooks.deliveries import Deliveries
from mainframe.store.hooks.hook_secrets import SecretBox

MAX_HOOKS_PER_ENDPOINT = 5  # a sixth is a 409 too_many_hooks (docs/hooks.md)
DEFAULT_ROTATION_GRACE_US = 86_400_000_000  # the previous secret signs for a day
CONSECUTIVE_FAILURES = "consecutive_failures"  # disabled_reason after too many failures
SECRET_UNREADABLE = "secret_unreadable"  # disabled_reason when no key opens the secret

LOCK_ENDPOINT = statement("lock_hook_endpoint")
COUNT_HOOKS = statement("count_hooks")
INSERT_HOOK = statement("insert_hook")
LIST_HOOKS = statement("list_hooks")
DELETE_HOOK = statement("delete_hook")
ROTATE_HOOK = statement("rotate_hook")
ENABLE_HOOK = statement("enable_hook")
TARGETS = statement("hook_targets")
NOTE_DELIVERED = statement("note_hook_delivered")
NOTE_FAILED = statement("note_hook_failed")
DISABLE_HOOK = statement("disable_hook")


@dataclass(frozen=True, slots=True)
class HookView:
    """A hook as its owner sees it: everything but the secret."""

    hook_id: int
    endpoint_id: int
    endpoint: str
    url: str
    queue: str | None
    rate_per_minute: int
    enabled: bool
    disabled_reason: str | None
    created_at: int
    consecutive_failures: int
    last_delivery_at: int | None


@dataclass(frozen=True, slots=True)
class Rotation:
    hook_id: int
    endpoint_id: int
    secret: str
    previous_valid_until: int


@dataclass(frozen=True, slots=True)
class HookTarget:
    """What the dispatcher needs to deliver to one enabled hook; secrets in the clear."""

    hook_id: int
    endpoint_id: int
    url: str
    queue: str | None
    rate_per_minute: int
    secret: str | None  # None when no configured key can open it
    previous_secret: str | None  # only while its rotation grace lasted, when read

    def signing_secrets(self) -> tuple[str, ...]:
        """The secrets that sign: current first, then the previous one during its grace."""
        return tuple(s for s in (self.secret, self.previous_secret) if s is not None)


class HooksUnavailable(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "hooks_unavailable",
            "no key to encrypt hook secrets with: set MAINFRAME_SECRET_KEY (a Fernet key)",
        )


class HookRow(NamedTuple):
    """A row of INSERT_HOOK, LIST_HOOKS and ENABLE_HOOK."""

    id: int
    endpoint_id: int
    url: str
    queue: str | None
    rate_per_minute: int
    enabled: bool
    disabled_reason: str | None
    created_at: int
    consecutive_failures: int
    last_delivery_at: int | None

    @classmethod
    def of(cls, row: Row) -> HookRow:
        """The hook of a row, by column name."""
        return record(cls, row)


class TargetRow(NamedTuple):
    """A row of TARGETS: the secrets still sealed."""

    id: int
    endpoint_id: int
    url: str
    queue: str | None
    rate_per_minute: int
    secret: str
    previous_secret: str | None

    @classmethod
    def of(cls, row: Row) -> TargetRow:
        """The target of a row of TARGETS, by column name."""
        return record(cls, row)


def _view(row: Row, endpoint: str) -> HookView:
    hook = HookRow.of(row)
    return HookView(
        hook_id=hook.id,
        endpoint_id=hook.endpoint_id,
        endpoint=endpoint,
        url=hook.url,
        queue=hook.queue,
        rate_per_minute=hook.rate_per_minute,
        enabled=bool(hook.enabled),
        disabled_reason=hook.disabled_reason,
        created_at=hook.created_at,
        consecutive_failures=hook.consecutive_failures,
        last_delivery_at=hook.last_delivery_at,
    )


async def _endpoint(tx: Tx, owner_id: int | None, name: str) -> EndpointRecord:
    # owner_id None is the operator at the database (the CLI): every endpoint is theirs.
    found = await endpoint_by_name(tx, name)
    if found is None or (owner_id is not None and found.owner_id != owner_id):
        raise NotFound(f"no endpoint named {name!r}")
    return found


async def _audit(
    tx: Tx, found: EndpointRecord, action: Action, hook_id: int, url: str, origin: Origin
) -> None:
    # Who is the endpoint's owner, whoever acted: the CLI (owner_id None) acts for them.
    detail = {"hook_id": hook_id, "url": url}
    await audit.record(
        tx, found.owner_id, action, origin=origin, endpoint=found.name, detail=detail
    )


class Hooks:
    """The hooks role of the store: one transaction per call."""

    def __init__(self, db: Database, *, box: SecretBox | None, rotation_grace_us: int) -> None:
        self.db = db
        self.box = box
        self.rotation_grace_us = rotation_grace_us
        self.deliveries = Deliveries(db)

    def _seal(self, secret: str) -> str:
        if self.box is None:
            raise HooksUnavailable()
        return self.box.seal(secret)

    # Owners ---------------------------------------------------------------------------------

    async def create(
        self,
        owner_id: int | None,
        endpoint: str,
        *,
        url: str,
        queue: str | None,
        rate_per_minute: int,
        secret: str,
        origin: Origin,
    ) -> HookView:
        """Add a hook signing with `secret` (the caller mints it and shows it once)."""
        sealed = self._seal(secret)

        async def add(tx: Tx) -> HookView:
            found = await _endpoint(tx, owner_id, endpoint)
            if await value(tx, LOCK_ENDPOINT, {"endpoint": found.id}) is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is revoked")
            if await value(tx, COUNT_HOOKS, {"endpoint": found.id}) >= MAX_HOOKS_PER_ENDPOINT:
                raise Conflict(
                    "too_many_hooks", f"an endpoint has at most {MAX_HOOKS_PER_ENDPOINT} hooks"
                )
            params = {
                "endpoint": found.id,
                "url": url,
                "queue": queue,
                "rate": rate_per_minute,
                "secret": sealed,
            }
            row = await first(tx, INSERT_HOOK, params)
            assert row is not None
            await _audit(tx, found, Action.HOOK_CREATED, row["id"], url, origin)
            return _view(row, found.name)

        return await transact(self.db, add)

    async def listing(self, owner_id: int | None, endpoint: str) -> list[HookView]:
        async with self.db.read() as tx:
            found = await _endpoint(tx, owner_id, endpoint)
            rows = await tx.rows(LIST_HOOKS, {"endpoint": found.id})
        return [_view(row, found.name) for row in rows]

    async def delete(
        self, owner_id: int | None, endpoint: str, hook_id: int, *, origin: Origin
    ) -> int:
        """Remove a hook; returns its endpoint's id."""

        async def delete(tx: Tx) -> int:
            found = await _endpoint(tx, owner_id, endpoint)
            url = await value(tx, DELETE_HOOK, {"hook": hook_id, "endpoint": found.id})
            if url is None:
                raise NotFound(f"no hook {hook_id}")
            await _audit(tx, found, Action.HOOK_DELETED, hook_id, url, origin)
            return found.id

        return await transact(self.db, delete)

    async def rotate(
        self, owner_id: int | None, endpoint: str, hook_id: int, *, secret: str, origin: Origin
    ) -> Rotation:
        """Sign with `secret` from now on, and with the old one too until the grace ends."""
        sealed = self._seal(secret)
        params = {"grace": self.rotation_grace_us, "secret": sealed, "hook": hook_id}

        async def rotate(tx: Tx) -> Rotation:
            found = await _endpoint(tx, owner_id, endpoint)
            row = await first(tx, ROTATE_HOOK, {**params, "endpoint": found.id})
            if row is None:
                raise NotFound(f"no hook {hook_id}")
            await _audit(tx, found, Action.HOOK_SECRET_ROTATED, hook_id, row["url"], origin)
            return Rotation(hook_id, found.id, secret, int(row["previous_valid_until"]))

        return await transact(self.db, rotate)

    async def enable(
        self, owner_id: int | None, endpoint: str, hook_id: int, *, origin: Origin
    ) -> HookView:
        """Turn a disabled hook back on, its failure count reset."""

        async def enable(tx: Tx) -> HookView:
            found = await _endpoint(tx, owner_id, endpoint)
            row = await first(tx, ENABLE_HOOK, {"hook": hook_id, "endpoint": found.id})
            if row is None:
                raise NotFound(f"no hook {hook_id}")
            await _audit(tx, found, Action.HOOK_ENABLED, hook_id, row["url"], origin)
            return _view(row, found.name)

        return await transact(self.db, enable)

    # The dispatcher -------------------------------------------------------------------------

    async def targets(self, endpoint_id: int) -> list[HookTarget]:
        """The enabled hooks of a live endpoint, secrets opened."""
        async with self.db.read() as tx:
            rows = await tx.rows(TARGETS, {"endpoint": endpoint_id})
        return [self._target(row) for row in rows]

    def _target(self, row: Row) -> HookTarget:
        box, target = self.box, TargetRow.of(row)
        return HookTarget(
            hook_id=target.id,
            endpoint_id=target.endpoint_id,
            url=target.url,
            queue=target.queue,
            rate_per_minute=target.rate_per_minute,
            secret=None if box is None else box.open(target.secret),
            previous_secret=None if box is None else box.open(target.previous_secret),
        )

    async def record_attempt(self, endpoint_id: int, *, failed: bool) -> None:
        """Count one delivery attempt in the current minute of the delivery counts."""
        await self.deliveries.record(endpoint_id, attempts=1, failures=int(failed))

    async def record_notification(
        self, hook_id: int, *, delivered: bool, disable_after: int
    ) -> bool:
        """Note how a notification ended; True when this failure disabled the hook."""
        if delivered:
            async with self.db.single() as tx:
                await tx.run(NOTE_DELIVERED, {"hook": hook_id})
            return False
        params = {"hook": hook_id, "reason": CONSECUTIVE_FAILURES, "at_least": disable_after}

        async def note_failed(tx: Tx) -> bool:
            await tx.run(NOTE_FAILED, {"hook": hook_id})
            disabled: int = await tx.run(DISABLE_HOOK, params)
            return disabled > 0

        return await transact(self.db, note_failed)

    async def disable(self, hook_id: int, *, reason: str) -> bool:
        """Disable an enabled hook; True when it was enabled."""
        params = {"hook": hook_id, "reason": reason, "at_least": 0}
        async with self.db.single() as tx:
            disabled: int = await tx.run(DISABLE_HOOK, params)
        return disabled > 0
