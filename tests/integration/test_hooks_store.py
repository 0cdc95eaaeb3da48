"""The hooks role on SQLite and PostgreSQL: owners' management, the secret at rest, and the
dispatcher's reads and bookkeeping."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from mainframe.clock import FakeClock
from mainframe.hooks import signing
from mainframe.store import Budget, Conflict, NotFound, Store
from mainframe.store.deliveries import MINUTE_US, window_totals
from mainframe.store.engine import create_store_engine
from mainframe.store.hook_secrets import SecretBox
from mainframe.store.schema import hooks

GRACE_US = 3_600_000_000


@dataclass
class Hooked:
    store: Store
    clock: FakeClock
    owner_id: int
    other_owner_id: int
    endpoint_id: int

    def create(self, url: str = "https://hooks.example.com/in", **kw: object) -> int:
        view = self.store.hooks.create(
            self.owner_id,
            "pypi",
            url=url,
            queue=kw.get("queue"),  # type: ignore[arg-type]
            rate_per_minute=int(kw.get("rate", 120)),  # type: ignore[call-overload]
            secret=str(kw.get("secret", signing.new_secret())),
        )
        return view.hook_id


@pytest.fixture
def hooked(database_url: str) -> Iterator[Hooked]:
    clock = FakeClock()
    engine = create_store_engine(database_url)
    store = Store.build(
        engine,
        Budget.of(job_timeout=30, max_attempts=3),
        clock=clock,
        hook_box=SecretBox([Fernet.generate_key()]),
        rotation_grace_us=GRACE_US,
    )
    owner = store.accounts.authenticate(store.accounts.create_owner("alice"))
    other = store.accounts.authenticate(store.accounts.create_owner("mallory"))
    assert owner is not None and other is not None
    assert owner.owner_id is not None and other.owner_id is not None
    endpoint = store.accounts.create_endpoint("pypi", owner="alice", open_intake=False)
    store.accounts.create_endpoint("npm", owner="mallory", open_intake=False)
    yield Hooked(store, clock, owner.owner_id, other.owner_id, endpoint.id)
    store.dispose()


def test_create_list_delete(hooked: Hooked) -> None:
    first = hooked.create(queue="default", rate=30)
    second = hooked.create("https://other.example.com/")
    views = hooked.store.hooks.listing(hooked.owner_id, "pypi")
    assert [(v.hook_id, v.queue, v.rate_per_minute, v.enabled) for v in views] == [
        (first, "default", 30, True),
        (second, None, 120, True),
    ]
    assert views[0].created_at == hooked.clock.now_us() and views[0].consecutive_failures == 0
    assert hooked.store.hooks.delete(hooked.owner_id, "pypi", first) == hooked.endpoint_id
    assert [v.hook_id for v in hooked.store.hooks.listing(hooked.owner_id, "pypi")] == [second]
    with pytest.raises(NotFound):
        hooked.store.hooks.delete(hooked.owner_id, "pypi", first)


def test_at_most_five_hooks_per_endpoint(hooked: Hooked) -> None:
    for _ in range(5):
        hooked.create()
    with pytest.raises(Conflict) as refused:
        hooked.create()
    assert refused.value.code == "too_many_hooks"


def test_another_owners_endpoint_and_hook_are_not_found(hooked: Hooked) -> None:
    hook_id = hooked.create()
    mallory = hooked.other_owner_id
    for call in (
        lambda: hooked.store.hooks.listing(mallory, "pypi"),
        lambda: hooked.store.hooks.delete(mallory, "pypi", hook_id),
        lambda: hooked.store.hooks.enable(mallory, "pypi", hook_id),
        lambda: hooked.store.hooks.rotate(mallory, "pypi", hook_id, secret="whsec_x"),
        lambda: hooked.store.hooks.delete(mallory, "npm", hook_id),
    ):
        with pytest.raises(NotFound):
            call()


def test_a_revoked_endpoint_takes_no_hooks_and_delivers_to_none(hooked: Hooked) -> None:
    hooked.create()
    hooked.store.accounts.revoke(hooked.owner_id, "pypi")
    assert hooked.store.hooks.targets(hooked.endpoint_id) == []
    with pytest.raises(Conflict) as refused:
        hooked.create()
    assert refused.value.code == "endpoint_revoked"


def test_the_secret_is_not_in_the_database_but_the_dispatcher_can_sign(hooked: Hooked) -> None:
    secret = signing.new_secret()
    hooked.create(secret=secret)
    with hooked.store.engine.connect() as conn:
        stored = conn.execute(select(hooks.c.secret)).scalar_one()
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    [target] = hooked.store.hooks.targets(hooked.endpoint_id)
    assert target.signing_secrets(hooked.clock.now_us()) == (secret,)


def test_rotation_signs_with_both_until_the_grace_ends(hooked: Hooked) -> None:
    old, new = signing.new_secret(), signing.new_secret()
    hook_id = hooked.create(secret=old)
    rotation = hooked.store.hooks.rotate(hooked.owner_id, "pypi", hook_id, secret=new)
    assert rotation.previous_valid_until == hooked.clock.now_us() + GRACE_US
    [target] = hooked.store.hooks.targets(hooked.endpoint_id)
    assert target.signing_secrets(hooked.clock.now_us()) == (new, old)
    hooked.clock.advance(GRACE_US / 1e6)
    assert target.signing_secrets(hooked.clock.now_us()) == (new,)


def test_a_lost_key_leaves_secrets_unreadable_not_wrong(hooked: Hooked) -> None:
    hooked.create()
    blind = Store.build(
        hooked.store.engine,
        Budget.of(job_timeout=30, max_attempts=3),
        hook_box=SecretBox([Fernet.generate_key()]),
    )
    [target] = blind.hooks.targets(hooked.endpoint_id)
    assert target.secret is None and target.signing_secrets(0) == ()


def test_ten_failed_notifications_disable_and_enable_resets(hooked: Hooked) -> None:
    hook_id = hooked.create()
    role, now = hooked.store.hooks, hooked.clock.now_us()
    for _ in range(9):
        assert not role.record_notification(hook_id, delivered=False, at_us=now, disable_after=10)
    assert role.record_notification(hook_id, delivered=False, at_us=now, disable_after=10)
    [view] = role.listing(hooked.owner_id, "pypi")
    assert (view.enabled, view.disabled_reason, view.consecutive_failures) == (
        False,
        "consecutive_failures",
        10,
    )
    assert role.targets(hooked.endpoint_id) == []
    enabled = role.enable(hooked.owner_id, "pypi", hook_id)
    assert (enabled.enabled, enabled.disabled_reason, enabled.consecutive_failures) == (
        True,
        None,
        0,
    )
    role.record_notification(hook_id, delivered=True, at_us=now + 5, disable_after=10)
    assert role.listing(hooked.owner_id, "pypi")[0].last_delivery_at == now + 5


def test_every_attempt_adds_to_the_delivery_counts(hooked: Hooked) -> None:
    now = hooked.clock.now_us()
    for failed in (True, True, False):
        hooked.store.hooks.record_attempt(hooked.endpoint_id, at_us=now, failed=failed)
    with hooked.store.engine.connect() as conn:
        totals = window_totals(
            conn,
            endpoint_ids=[hooked.endpoint_id],
            start_us=now - now % MINUTE_US,
            end_us=now - now % MINUTE_US + MINUTE_US,
        )
    assert (totals.attempts, totals.failures) == (3, 2)


def test_without_a_key_hooks_cannot_be_created(hooked: Hooked) -> None:
    keyless = Store.build(hooked.store.engine, Budget.of(job_timeout=30, max_attempts=3))
    with pytest.raises(Conflict) as refused:
        keyless.hooks.create(
            hooked.owner_id, "pypi", url="https://x.example/", queue=None, rate_per_minute=1,
            secret="whsec_x",
        )  # fmt: skip
    assert refused.value.code == "hooks_unavailable"
