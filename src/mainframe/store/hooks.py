"""The hooks of each endpoint: the owners' management calls and the dispatcher's reads and
bookkeeping. Signing secrets are stored only as Fernet tokens (store/hook_secrets.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from mainframe.store import deliveries
from mainframe.store.errors import Conflict, NotFound
from mainframe.store.hook_secrets import SecretBox
from mainframe.store.schema import endpoints, hooks
from mainframe.store.uow import UnitOfWork

MAX_HOOKS_PER_ENDPOINT = 5  # the issue: a sixth is a 409 too_many_hooks
DEFAULT_ROTATION_GRACE_US = 86_400_000_000  # the previous secret signs for a day
CONSECUTIVE_FAILURES = "consecutive_failures"  # disabled_reason after too many failures
SECRET_UNREADABLE = "secret_unreadable"  # disabled_reason when no key opens the secret


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
    previous_secret: str | None
    previous_valid_until: int | None

    def signing_secrets(self, now_us: int) -> tuple[str, ...]:
        """Current first; the previous one while its rotation grace lasts."""
        found: tuple[str, ...] = () if self.secret is None else (self.secret,)
        live = self.previous_valid_until is not None and now_us < self.previous_valid_until
        if live and self.previous_secret is not None:
            found += (self.previous_secret,)
        return found


class HooksUnavailable(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "hooks_unavailable",
            "no key to encrypt hook secrets with: set MAINFRAME_SECRET_KEY (a Fernet key)",
        )


_VIEW = select(
    hooks.c.id,
    hooks.c.endpoint_id,
    endpoints.c.name.label("endpoint"),
    hooks.c.url,
    hooks.c.queue,
    hooks.c.rate_per_minute,
    hooks.c.enabled,
    hooks.c.disabled_reason,
    hooks.c.created_at,
    hooks.c.consecutive_failures,
    hooks.c.last_delivery_at,
).select_from(hooks.join(endpoints, endpoints.c.id == hooks.c.endpoint_id))


def _view(row: Any) -> HookView:
    return HookView(
        row.id,
        row.endpoint_id,
        row.endpoint,
        row.url,
        row.queue,
        row.rate_per_minute,
        bool(row.enabled),
        row.disabled_reason,
        row.created_at,
        row.consecutive_failures,
        row.last_delivery_at,
    )


def _endpoint(conn: Connection, owner_id: int | None, name: str, *, lock: bool = False) -> Any:
    # owner_id None is the operator at the database (the CLI): every endpoint is theirs.
    query = select(endpoints.c.id, endpoints.c.owner_id, endpoints.c.revoked_at).where(
        endpoints.c.name == name
    )
    row = conn.execute(query.with_for_update() if lock else query).first()
    if row is None or (owner_id is not None and row.owner_id != owner_id):
        raise NotFound(f"no endpoint named {name!r}")
    return row


def _hook_view(conn: Connection, endpoint_id: int, hook_id: int) -> HookView:
    row = conn.execute(
        _VIEW.where(hooks.c.id == hook_id, hooks.c.endpoint_id == endpoint_id)
    ).first()
    if row is None:
        raise NotFound(f"no hook {hook_id}")
    return _view(row)


class Hooks:
    """The hooks role of the store: one unit of work per call."""

    def __init__(self, uow: UnitOfWork, *, box: SecretBox | None, rotation_grace_us: int) -> None:
        self.uow = uow
        self.box = box
        self.rotation_grace_us = rotation_grace_us

    def _seal(self, secret: str) -> str:
        if self.box is None:
            raise HooksUnavailable()
        return self.box.seal(secret)

    # Owners ---------------------------------------------------------------------------------

    def create(
        self,
        owner_id: int | None,
        endpoint: str,
        *,
        url: str,
        queue: str | None,
        rate_per_minute: int,
        secret: str,
    ) -> HookView:
        """Add a hook signing with `secret` (the caller mints it and shows it once)."""
        sealed = self._seal(secret)
        now = self.uow.now()
        with self.uow.write() as tx:
            found = _endpoint(tx.conn, owner_id, endpoint, lock=True)
            if found.revoked_at is not None:
                raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is revoked")
            count = tx.conn.scalar(
                select(func.count()).select_from(hooks).where(hooks.c.endpoint_id == found.id)
            )
            if (count or 0) >= MAX_HOOKS_PER_ENDPOINT:
                raise Conflict(
                    "too_many_hooks", f"an endpoint has at most {MAX_HOOKS_PER_ENDPOINT} hooks"
                )
            values = {
                "endpoint_id": found.id,
                "url": url,
                "queue": queue,
                "rate_per_minute": rate_per_minute,
                "enabled": True,
                "secret": sealed,
                "created_at": now,
            }
            new_id = tx.conn.execute(insert(hooks).values(**values)).inserted_primary_key
            assert new_id is not None
            return _hook_view(tx.conn, found.id, new_id[0])

    def listing(self, owner_id: int | None, endpoint: str) -> list[HookView]:
        with self.uow.read() as tx:
            found = _endpoint(tx.conn, owner_id, endpoint)
            rows = tx.conn.execute(
                _VIEW.where(hooks.c.endpoint_id == found.id).order_by(hooks.c.id)
            )
            return [_view(row) for row in rows]

    def delete(self, owner_id: int | None, endpoint: str, hook_id: int) -> int:
        """Remove a hook; returns its endpoint's id."""
        with self.uow.write() as tx:
            found = _endpoint(tx.conn, owner_id, endpoint)
            gone = tx.conn.execute(
                delete(hooks).where(hooks.c.id == hook_id, hooks.c.endpoint_id == found.id)
            )
            if gone.rowcount == 0:
                raise NotFound(f"no hook {hook_id}")
            return int(found.id)

    def rotate(self, owner_id: int | None, endpoint: str, hook_id: int, *, secret: str) -> Rotation:
        """Sign with `secret` from now on, and with the old one too until the grace ends."""
        sealed = self._seal(secret)
        now = self.uow.now()
        until = now + self.rotation_grace_us
        with self.uow.write() as tx:
            found = _endpoint(tx.conn, owner_id, endpoint)
            # The old token moves as it is: rotating never needs to read the old secret.
            moved = tx.conn.execute(
                update(hooks)
                .where(hooks.c.id == hook_id, hooks.c.endpoint_id == found.id)
                .values(previous_secret=hooks.c.secret, previous_valid_until=until, secret=sealed)
            )
            if moved.rowcount == 0:
                raise NotFound(f"no hook {hook_id}")
        return Rotation(hook_id, int(found.id), secret, until)

    def enable(self, owner_id: int | None, endpoint: str, hook_id: int) -> HookView:
        """Turn a disabled hook back on, its failure count reset."""
        with self.uow.write() as tx:
            found = _endpoint(tx.conn, owner_id, endpoint)
            tx.conn.execute(
                update(hooks)
                .where(hooks.c.id == hook_id, hooks.c.endpoint_id == found.id)
                .values(enabled=True, disabled_reason=None, consecutive_failures=0)
            )
            return _hook_view(tx.conn, found.id, hook_id)

    # The dispatcher -------------------------------------------------------------------------

    def targets(self, endpoint_id: int) -> list[HookTarget]:
        """The enabled hooks of a live endpoint, secrets opened."""
        with self.uow.read() as tx:
            rows = tx.conn.execute(
                select(hooks)
                .join(endpoints, endpoints.c.id == hooks.c.endpoint_id)
                .where(
                    hooks.c.endpoint_id == endpoint_id,
                    hooks.c.enabled.is_(True),
                    endpoints.c.revoked_at.is_(None),
                )
                .order_by(hooks.c.id)
            ).all()
        return [self._target(row) for row in rows]

    def _target(self, row: Any) -> HookTarget:
        target = HookTarget(
            row.id,
            row.endpoint_id,
            row.url,
            row.queue,
            row.rate_per_minute,
            None,
            None,
            row.previous_valid_until,
        )
        if self.box is None:
            return target
        return replace(
            target,
            secret=self.box.open(row.secret),
            previous_secret=self.box.open(row.previous_secret),
        )

    def record_attempt(self, endpoint_id: int, *, at_us: int, failed: bool) -> None:
        """Count one delivery attempt in the per-minute delivery counts."""
        with self.uow.write() as tx:
            deliveries.record(
                tx.conn, endpoint_id=endpoint_id, at_us=at_us, attempts=1, failures=int(failed)
            )

    def record_notification(
        self, hook_id: int, *, delivered: bool, at_us: int, disable_after: int
    ) -> bool:
        """Note how a notification ended; True when this failure disabled the hook."""
        with self.uow.write() as tx:
            if delivered:
                tx.conn.execute(
                    update(hooks)
                    .where(hooks.c.id == hook_id)
                    .values(consecutive_failures=0, last_delivery_at=at_us)
                )
                return False
            tx.conn.execute(
                update(hooks)
                .where(hooks.c.id == hook_id)
                .values(consecutive_failures=hooks.c.consecutive_failures + 1)
            )
            return _disable(tx.conn, hook_id, CONSECUTIVE_FAILURES, at_least=disable_after)

    def disable(self, hook_id: int, *, reason: str) -> bool:
        """Disable an enabled hook; True when it was enabled."""
        with self.uow.write() as tx:
            return _disable(tx.conn, hook_id, reason, at_least=0)


def _disable(conn: Connection, hook_id: int, reason: str, *, at_least: int) -> bool:
    done = conn.execute(
        update(hooks)
        .where(
            hooks.c.id == hook_id,
            hooks.c.enabled.is_(True),
            hooks.c.consecutive_failures >= at_least,
        )
        .values(enabled=False, disabled_reason=reason)
    )
    return bool(done.rowcount)
