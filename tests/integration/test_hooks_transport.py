"""The dispatcher and the pinned transport against a real HTTPS receiver on loopback.

Every test runs behind a scripted resolver and a network backend that fails every
non-loopback connect, so a refused address cannot leave the machine even if the code under
test were wrong; `network.refused` shows whether it ever tried."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator, Sequence

import pytest
from prometheus_client import CollectorRegistry
from standardwebhooks.webhooks import Webhook

from mainframe.clock import SystemClock
from mainframe.hooks import body, signing
from mainframe.hooks.addresses import AddressPolicy
from mainframe.hooks.dispatcher import DeliveryConfig, Dispatcher
from mainframe.hooks.transport import PinnedTransport
from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.lifecycle.scans import FinalAttempt, ScanDeadLettered, ScanRef
from mainframe.metrics.hooks import HookMetrics
from mainframe.parsers import parse_cidrs
from mainframe.store.hooks.hooks import HookTarget
from tests.hookreceiver import Answer, Receiver, receiver
from tests.hooks_fakes import FakeResolver, LoopbackOnlyNetwork, MemoryHookBook
from tests.unit.test_hooks_addresses import REFUSED

pytestmark = pytest.mark.anyio
SECRET = signing.new_secret()
HOST = "hooks.test"  # resolved only by the scripted resolver


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shared_https() -> Iterator[Receiver]:
    with receiver(HOST) as running:
        yield running


@pytest.fixture
def https(shared_https: Receiver) -> Receiver:
    shared_https.received.clear()
    shared_https.script.clear()
    return shared_https


class Rig:
    def __init__(
        self,
        https: Receiver,
        answers: dict[str, Sequence[Sequence[str]]],
        allow: str = "127.0.0.0/8",  # the receiver, and nothing else
    ) -> None:
        self.resolver = FakeResolver(answers)
        self.network = LoopbackOnlyNetwork()
        self.registry = CollectorRegistry()
        self.sleeps: list[float] = []
        policy = AddressPolicy(parse_cidrs(allow))
        context = https.client_context()

        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        self.book = MemoryHookBook([])
        self.dispatcher = Dispatcher(
            self.book,
            transport=lambda: PinnedTransport(
                policy=policy, resolver=self.resolver, ssl_context=context, network=self.network
            ),
            metrics=HookMetrics(self.registry),
            clock=SystemClock(),
            config=DeliveryConfig(timeout_seconds=2.0),
            sleep=sleep,
            rng=random.Random(1),
        )

    async def deliver(self, url: str) -> str:
        hook = HookTarget(1, 1, url, None, 120, SECRET, None)
        self.book.hooks[1] = hook
        return await self.dispatcher.deliver(hook, body.notification(event(), now_us=now()))

    def attempts(self, result: str) -> float:
        found = self.registry.get_sample_value("mainframe_hook_attempts_total", {"result": result})
        return found or 0.0


def now() -> int:
    return time.time_ns() // 1000


def event() -> ScanDeadLettered:
    scan = ScanRef(5, 1, "pypi", "default", "left-pad", "1.3.0", "scan", True, "feed", now())
    final = FinalAttempt(3, "failed", "boom\u202e", None, now())
    return ScanDeadLettered(scan, DeadLetterReason.ATTEMPTS_EXHAUSTED, 3, "w1", now(), now(), final)


async def test_delivery_pins_the_resolved_address_and_keeps_the_hostname(https: Receiver) -> None:
    rig = Rig(https, {HOST: [["127.0.0.1"]]})
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "delivered"
    [got] = https.received
    assert got.headers["host"] == f"{HOST}:{https.port}"  # Host stays the name, TLS checked it
    payload = Webhook(SECRET).verify(got.body, got.headers)
    assert payload["type"] == "scan.dead_lettered"
    assert payload["data"]["final_attempt"]["summary"] == "boom"
    assert rig.network.connected == ["127.0.0.1"] and rig.network.refused == []


async def test_the_certificate_is_checked_against_the_hostname(https: Receiver) -> None:
    rig = Rig(https, {"other.test": [["127.0.0.1"]]})
    assert await rig.deliver(f"https://other.test:{https.port}/in") == "failed"
    assert https.received == []
    assert rig.attempts("transport_error") + rig.attempts("connect_error") == 3


@pytest.mark.parametrize(("address", "reason"), REFUSED, ids=[a for a, _ in REFUSED])
async def test_every_refused_range_is_refused_without_retry(
    https: Receiver, address: str, reason: str
) -> None:
    rig = Rig(https, {HOST: [[address]]}, allow="")
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "refused"
    assert rig.resolver.calls == [HOST]  # one attempt: a refusal is not retried
    assert rig.network.connected == [] and rig.network.refused == []
    assert https.received == [] and rig.sleeps == []
    assert rig.attempts("refused") == 1


async def test_one_refused_address_among_several_refuses_the_target(https: Receiver) -> None:
    rig = Rig(https, {HOST: [["127.0.0.1", "10.0.0.7"]]})
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "refused"
    assert https.received == [] and rig.network.connected == []


async def test_an_ip_literal_in_a_refused_range_is_refused_without_resolving(
    https: Receiver,
) -> None:
    rig = Rig(https, {})
    assert await rig.deliver("https://[::ffff:169.254.169.254]/latest/meta-data") == "refused"
    assert rig.resolver.calls == [] and rig.network.refused == []


async def test_a_name_rebound_between_attempts_is_refused_and_not_retried(
    https: Receiver,
) -> None:
    https.answer(Answer(503))
    rig = Rig(https, {HOST: [["127.0.0.1"], ["169.254.169.254"], ["127.0.0.1"]]})
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "refused"
    assert len(https.received) == 1  # the first attempt; the rebound second is refused
    assert rig.resolver.calls == [HOST, HOST]  # resolved again per attempt, no third
    assert rig.network.refused == [] and rig.network.connected == ["127.0.0.1"]


async def test_a_redirect_to_the_metadata_address_is_not_followed(https: Receiver) -> None:
    https.answer(Answer(302, {"location": "http://169.254.169.254/latest/meta-data/"}))
    rig = Rig(https, {HOST: [["127.0.0.1"]]})
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "failed"
    assert len(https.received) == 1 and rig.sleeps == []
    assert rig.network.connected == ["127.0.0.1"] and rig.network.refused == []
    assert rig.attempts("3xx") == 1


async def test_503_retries_400_does_not_and_retry_after_is_honoured(https: Receiver) -> None:
    https.answer(Answer(503), Answer(429, {"retry-after": "4"}), Answer(200))
    rig = Rig(https, {HOST: [["127.0.0.1"]]})
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "delivered"
    assert len(https.received) == 3 and rig.sleeps[1] == 4.0
    ids = {r.headers["webhook-id"] for r in https.received}
    assert len(ids) == 1
    https.answer(Answer(400))
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "failed"
    assert len(https.received) == 4


@pytest.mark.slow  # seconds of real waiting: in make test, not make check
async def test_a_slow_receiver_times_out_and_a_huge_answer_is_read_only_in_part(
    https: Receiver,
) -> None:
    https.answer(Answer(200, delay=3.0), Answer(200, delay=3.0), Answer(200, delay=3.0))
    rig = Rig(https, {HOST: [["127.0.0.1"]]})
    started = time.monotonic()
    assert await rig.deliver(f"https://{HOST}:{https.port}/in") == "failed"
    assert rig.attempts("timeout") == 3 and time.monotonic() - started < 8.5
    https.answer(Answer(200, body=b"x" * 5_000_000))
    assert await asyncio.wait_for(rig.deliver(f"https://{HOST}:{https.port}/in"), 5) == "delivered"
