"""The hooks role on SQLite and PostgreSQL: owners' management, the secret at rest, and the
dispatcher's reads and bookkeeping. The database's clock is the test's FakeClock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from cryptography.fernet import Fernet
from sqlalchemy import select

from mainframe.clock import MICROS, FakeClock
from mainframe.hooks import signing
from mainframe.store import Conflict, NotFound
from mainframe.store.engine.schema import hooks
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.hooks.deliveries import MINUTE_US
from mainframe.store.hooks.hook_secrets import SecretBox
from mainframe.store.hooks.hooks import HookView
from tests.integration.conftest import blocking_store

GRACE_US = 3_600_000_000


@dataclass
class Hooked:
    store: Any  # a Blocking proxy of the Store (tests/blocking.py)
    clock: FakeClock
    database_url: str
    loop: BlockingPortal
    owner_id: int
    other_owner_id: int
    endpoint_id: int

    def create(self, url: str = "https://hooks.example.com/in", **kw: object) -> int:
        view = self.store.hooks.create(
            self.owner_id,
            "pypi",
            url=url,
            queue=kw.get("queue"),
            rate_per_minute=int(kw.get("rate", 120)),  # type: ignore[call-overload]
            secret=str(kw.get("secret", signing.new_secret())),
            origin="api",
        )
        hook_id: int = view.hook_id
        return hook_id

    @contextmanager
    def another_store(self, box: SecretBox | None) -> Iterator[Any]:
        """A second store on the same database: another process, holding `box`'s key."""
        other = blocking_store(self.database_url, self.loop, self.clock, hook_box=box)
        try:
            yield other
        finally:
            other.close()

    def stored_secret(self) -> str:
        """The one hook's secret column as a dump of the database would show it."""
        engine = create_store_engine(self.database_url)
        try:
            with engine.connect() as conn:
                return str(conn.execute(select(hooks.c.secret)).scalar_one())
        finally:
            engine.dispose()


@pytest.fixture
def hooked(database_url: str, loop: BlockingPortal) -> Iterator[Hooked]:
    clock = FakeClock()
    store = blocking_store(
        database_url,
        loop,
        clock,
        hook_box=SecretBox([Fernet.generate_key()]),
        rotation_grace_us=GRACE_US,
    )
    owner = store.authentication.authenticate(store.owners.create_owner("alice"))
    other = store.authentication.authenticate(store.owners.create_owner("mallory"))
    assert owner is not None and other is not None
    assert owner.owner_id is not None and other.owner_id is not None
    endpoint = store.owners.create_endpoint(
        store.owners.owner_id("alice"), "pypi", open_intake=False, origin="cli"
    )
    store.owners.create_endpoint(
        store.owners.owner_id("mallory"), "npm", open_intake=False, origin="cli"
    )
    yield Hooked(store, clock, database_url, loop, owner.owner_id, other.owner_id, endpoint.id)
    store.close()


def test_create_list_delete(hooked: Hooked) -> None:
    first = hooked.create(queue="default", rate=30)
    second = hooked.create("https://other.example.com/")
    views = hooked.store.hooks.listing(hooked.owner_id, "pypi")
    assert [(v.hook_id, v.queue, v.rate_per_minute, v.enabled) for v in views] == [
        (first, "default", 30, True),
        (second, None, 120, True),
    ]
    assert views[0].created_at == hooked.clock.now_us() and views[0].consecutive_failures == 0
    assert views[0].endpoint == "pypi" and views[0].last_delivery_at is None
    assert (
        hooked.store.hooks.delete(hooked.owner_id, "pypi", first, origin="api")
        == hooked.endpoint_id
    )
    assert [v.hook_id for v in hooked.store.hooks.listing(hooked.owner_id, "pypi")] == [second]
    with pytest.raises(NotFound):
        hooked.store.hooks.delete(hooked.owner_id, "pypi", first, origin="api")


def test_at_most_five_hooks_per_endpoint(hooked: Hooked) -> None:
    for _ in range(5):
        hooked.create()
    with pytest.raises(Conflict) as refused:
        hooked.create()
    assert refused.value.code == "too_many_hooks"


def test_creations_at_once_keep_the_cap(hooked: Hooked) -> None:
    role = hooked.store.target.hooks  # the raw role: the creations race on the store's loop

    async def create() -> HookView:
        view: HookView = await role.create(
            hooked.owner_id, "pypi", url="https://hooks.example.com/in", queue=None,
            rate_per_minute=60, secret=signing.new_secret(), origin="api",
        )  # fmt: skip
        return view

    async def race() -> list[object]:
        return await asyncio.gather(*(create() for _ in range(8)), return_exceptions=True)

    results = hooked.store.run(race)
    assert sum(isinstance(r, HookView) for r in results) == 5
    refused = [r for r in results if not isinstance(r, HookView)]
    assert [getattr(r, "code", r) for r in refused] == ["too_many_hooks"] * 3
    assert len(hooked.store.hooks.listing(hooked.owner_id, "pypi")) == 5


def test_another_owners_endpoint_and_hook_are_not_found(hooked: Hooked) -> None:
    hook_id = hooked.create()
    mallory = hooked.other_owner_id
    for call in (
        lambda: hooked.store.hooks.listing(mallory, "pypi"),
        lambda: hooked.store.hooks.delete(mallory, "pypi", hook_id, origin="api"),
        lambda: hooked.store.hooks.enable(mallory, "pypi", hook_id, origin="api"),
        lambda: hooked.store.hooks.rotate(mallory, "pypi", hook_id, secret="whsec_x", origin="api"),
        lambda: hooked.store.hooks.delete(mallory, "npm", hook_id, origin="api"),
        lambda: hooked.store.hooks.enable(hooked.owner_id, "pypi", hook_id + 1, origin="api"),
        lambda: hooked.store.hooks.rotate(
            hooked.owner_id, "pypi", hook_id + 1, secret="whsec_x", origin="api"
        ),
    ):
        with pytest.raises(NotFound):
            call()


def test_a_revoked_endpoint_takes_no_hooks_and_delivers_to_none(hooked: Hooked) -> None:
    hooked.create()
    hooked.store.revocations.revoke(hooked.owner_id, "pypi", origin="api")
    assert hooked.store.hooks.targets(hooked.endpoint_id) == []
    with pytest.raises(Conflict) as refused:
        hooked.create()
    assert refused.value.code == "endpoint_revoked"


def test_the_secret_is_not_in_the_database_but_the_dispatcher_can_sign(hooked: Hooked) -> None:
    secret = signing.new_secret()
    hooked.create(secret=secret)
    stored = hooked.stored_secret()
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    [target] = hooked.store.hooks.targets(hooked.endpoint_id)
    assert target.signing_secrets() == (secret,)


def test_rotation_signs_with_both_until_the_grace_ends_by_the_database_clock(
    hooked: Hooked,
) -> None:
    old, new = signing.new_secret(), signing.new_secret()
    hook_id = hooked.create(secret=old)
    rotation = hooked.store.hooks.rotate(hooked.owner_id, "pypi", hook_id, secret=new, origin="api")
    assert rotation.previous_valid_until == hooked.clock.now_us() + GRACE_US
    assert (rotation.secret, rotation.endpoint_id) == (new, hooked.endpoint_id)
    [target] = hooked.store.hooks.targets(hooked.endpoint_id)
    assert target.signing_secrets() == (new, old)
    hooked.clock.advance((GRACE_US - 1) / MICROS)
    [target] = hooked.store.hooks.targets(hooked.endpoint_id)
    assert target.signing_secrets() == (new, old)
    hooked.clock.advance(1 / MICROS)
    [target] = hooked.store.hooks.targets(hooked.endpoint_id)
    assert target.signing_secrets() == (new,)


def test_a_lost_key_leaves_secrets_unreadable_not_wrong_until_rotated(hooked: Hooked) -> None:
    hook_id = hooked.create()
    with hooked.another_store(SecretBox([Fernet.generate_key()])) as blind:
        [target] = blind.hooks.targets(hooked.endpoint_id)
        assert target.secret is None and target.signing_secrets() == ()
        # The recovery: a fresh secret under the new key; the unreadable one never co-signs.
        fresh = signing.new_secret()
        blind.hooks.rotate(hooked.owner_id, "pypi", hook_id, secret=fresh, origin="api")
        [target] = blind.hooks.targets(hooked.endpoint_id)
        assert target.signing_secrets() == (fresh,)


def test_ten_failed_notifications_disable_and_enable_resets(hooked: Hooked) -> None:
    hook_id = hooked.create()
    role = hooked.store.hooks
    for _ in range(9):
        assert not role.record_notification(hook_id, delivered=False, disable_after=10)
    assert role.record_notification(hook_id, delivered=False, disable_after=10)
    [view] = role.listing(hooked.owner_id, "pypi")
    assert (view.enabled, view.disabled_reason, view.consecutive_failures) == (
        False,
        "consecutive_failures",
        10,
    )
    assert role.targets(hooked.endpoint_id) == []
    assert not role.record_notification(hook_id, delivered=False, disable_after=10)
    enabled = role.enable(hooked.owner_id, "pypi", hook_id, origin="api")
    assert (enabled.enabled, enabled.disabled_reason, enabled.consecutive_failures) == (
        True,
        None,
        0,
    )
    hooked.clock.advance(5)
    role.record_notification(hook_id, delivered=True, disable_after=10)
    assert role.listing(hooked.owner_id, "pypi")[0].last_delivery_at == hooked.clock.now_us()


def test_disabling_answers_true_once(hooked: Hooked) -> None:
    hook_id = hooked.create()
    assert hooked.store.hooks.disable(hook_id, reason="secret_unreadable")
    assert not hooked.store.hooks.disable(hook_id, reason="secret_unreadable")
    [view] = hooked.store.hooks.listing(hooked.owner_id, "pypi")
    assert (view.enabled, view.disabled_reason) == (False, "secret_unreadable")


def test_every_attempt_adds_to_the_minute_of_the_database_clock(hooked: Hooked) -> None:
    now = hooked.clock.now_us()
    minute = now - now % MINUTE_US
    for failed in (True, True, False):
        hooked.store.hooks.record_attempt(hooked.endpoint_id, failed=failed)
    hooked.clock.advance(60)
    hooked.store.hooks.record_attempt(hooked.endpoint_id, failed=True)
    deliveries = hooked.store.deliveries
    first = deliveries.totals(hooked.owner_id, start_us=minute, end_us=minute + MINUTE_US)
    assert (first.attempts, first.failures) == (3, 2)
    later = deliveries.totals(
        hooked.owner_id, start_us=minute + MINUTE_US, end_us=minute + 2 * MINUTE_US
    )
    assert (later.attempts, later.failures) == (1, 1)


def test_without_a_key_hooks_cannot_be_created(hooked: Hooked) -> None:
    with hooked.another_store(None) as keyless, pytest.raises(Conflict) as refused:
        keyless.hooks.create(
            hooked.owner_id, "pypi", url="https://x.example/", queue=None, rate_per_minute=1,
            secret="whsec_x", origin="api",
        )  # fmt: skip
    assert refused.value.code == "hooks_unavailable"
