"""Alertmanager's v2 body and Standard Webhooks signatures, the latter checked only by the
reference verifier (never by our own signer)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from mainframe.clock import FakeClock
from mainframe.watch.ports import AlertMessage, DeliveryError
from mainframe.watch.sinks import (
    AlertmanagerSink,
    WebhookSecret,
    WebhookSink,
    alertname,
    check_labels,
    parse_secrets,
    sign_webhook,
)
from mainframe.watch.windows import Window

WINDOW = Window.from_key("2026-09-27T10:14:00Z/60s")
CURRENT = "whsec_" + base64.b64encode(b"current-secret-of-32-bytes-long!").decode()
PREVIOUS = "whsec_" + base64.b64encode(b"previous-secret-32-bytes-long!!!").decode()


def message(*, firing: bool = True, ends_at_us: int | None = None) -> AlertMessage:
    return AlertMessage(
        alert="delivery_failure",
        policy_version="v3",
        firing=firing,
        window_key=WINDOW.key,
        starts_at_us=WINDOW.end_us,
        ends_at_us=ends_at_us,
        labels={"source": "mainframe"},
        annotations={"summary": "12 of 40 deliveries failed", "failures": "12"},
    )


def recorder(status: int = 200) -> tuple[list[httpx.Request], httpx.Client]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={})

    return seen, httpx.Client(transport=httpx.MockTransport(handle))


def failing(error: Exception) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        raise error

    return httpx.Client(transport=httpx.MockTransport(handle))


# --- Alertmanager ----------------------------------------------------------------------


def test_a_firing_alert_is_one_postable_alert_without_ends_at() -> None:
    seen, client = recorder()
    sink = AlertmanagerSink(
        "http://am.test:9093/",
        client=client,
        extra_labels={"team": "notify", "env": "prod"},
        generator_url="http://watch.test/",
    )

    sink.deliver(message())

    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "http://am.test:9093/api/v2/alerts"
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.content)
    assert body == [
        {
            "labels": {
                "alertname": "MainframeWatchDeliveryFailure",
                "source": "mainframe",
                "team": "notify",
                "env": "prod",
            },
            "annotations": {
                "summary": "12 of 40 deliveries failed",
                "failures": "12",
                "window": "2026-09-27T10:14:00Z/60s",
                "policy_version": "v3",
            },
            "startsAt": "2026-09-27T10:15:00.000000Z",
            "generatorURL": "http://watch.test/",
        }
    ]


def test_a_resolved_alert_carries_ends_at_and_the_same_labels() -> None:
    seen, client = recorder()
    sink = AlertmanagerSink("http://am.test", client=client)
    resolved_at = WINDOW.end_us + 120_000_000

    sink.deliver(message())
    sink.deliver(message(firing=False, ends_at_us=resolved_at))

    fired, resolved = (json.loads(r.content)[0] for r in seen)
    assert "endsAt" not in fired
    assert resolved["endsAt"] == "2026-09-27T10:17:00.000000Z"
    assert resolved["startsAt"] == fired["startsAt"]
    # Alertmanager matches the resolve to the firing alert by its label set.
    assert resolved["labels"] == fired["labels"]
    datetime.fromisoformat(resolved["endsAt"])  # RFC 3339


def test_a_resolve_without_an_end_uses_the_clock() -> None:
    seen, client = recorder()
    clock = FakeClock(WINDOW.end_us + 5_000_000)
    AlertmanagerSink("http://am.test", client=client, clock=clock).deliver(message(firing=False))
    assert json.loads(seen[0].content)[0]["endsAt"] == "2026-09-27T10:15:05.000000Z"


def test_labels_never_carry_the_window_or_counts() -> None:
    _, client = recorder()
    alert = AlertmanagerSink("http://am.test", client=client).alert(message())
    assert WINDOW.key not in alert["labels"].values()
    assert "failures" not in alert["labels"]
    # A new policy version must still resolve the same alert, so it is no label either.
    assert set(alert["labels"]) == {"alertname", "source"}


def test_identity_labels_cannot_be_overwritten_by_a_message() -> None:
    _, client = recorder()
    hostile = AlertMessage(
        "delivery_failure", "v3", True, WINDOW.key, 0, None, labels={"alertname": "Other"}
    )
    alert = AlertmanagerSink("http://am.test", client=client).alert(hostile)
    assert alert["labels"]["alertname"] == "MainframeWatchDeliveryFailure"


@pytest.mark.parametrize("labels", [{"bad-name": "x"}, {"__name__": "x"}, {"alertname": "x"}])
def test_configured_labels_are_checked(labels: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="label"):
        check_labels(labels)


def test_alert_names_are_camel_case() -> None:
    assert alertname("observer_stale_checkpoint") == "MainframeWatchObserverStaleCheckpoint"


@pytest.mark.parametrize("status", [400, 404, 500, 503, 302])
def test_alertmanager_refusal_raises_delivery_error(status: int) -> None:
    _, client = recorder(status)
    with pytest.raises(DeliveryError, match=str(status)):
        AlertmanagerSink("http://am.test", client=client).deliver(message())


def test_alertmanager_transport_error_raises_delivery_error() -> None:
    sink = AlertmanagerSink("http://am.test", client=failing(httpx.ConnectError("refused")))
    with pytest.raises(DeliveryError, match="ConnectError"):
        sink.deliver(message())


# --- Standard Webhooks -----------------------------------------------------------------


def test_a_webhook_verifies_with_the_reference_library() -> None:
    seen, client = recorder()
    sink = WebhookSink("https://hooks.test/watch", CURRENT, client=client)

    sink.deliver(message())

    (request,) = seen
    headers = dict(request.headers)
    payload = Webhook(CURRENT).verify(request.content, headers)
    assert headers["webhook-id"] == "default/delivery_failure/v3/2026-09-27T10:14:00Z/60s/firing"
    assert headers["content-type"] == "application/json"
    assert payload["type"] == "watch.alert.firing"
    assert payload["data"]["window"] == WINDOW.key
    assert payload["data"]["state"] == "firing"
    assert payload["data"]["labels"] == {"source": "mainframe"}


def test_a_tampered_body_or_another_secret_does_not_verify() -> None:
    seen, client = recorder()
    WebhookSink("https://hooks.test/watch", CURRENT, client=client).deliver(message())
    headers = dict(seen[0].headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(CURRENT).verify(seen[0].content.replace(b"v3", b"v4"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(PREVIOUS).verify(seen[0].content, headers)


def test_during_a_rotation_both_secrets_verify() -> None:
    seen, client = recorder()
    sink = WebhookSink("https://hooks.test/watch", [CURRENT, PREVIOUS], client=client)

    sink.deliver(message(firing=False, ends_at_us=WINDOW.end_us + 60_000_000))

    request = seen[0]
    headers = dict(request.headers)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (CURRENT, PREVIOUS):
        payload = Webhook(secret).verify(request.content, headers)
        assert payload["type"] == "watch.alert.resolved"
        assert payload["data"]["ends_at"] == "2026-09-27T10:16:00.000000Z"


def test_a_repeat_carries_the_same_webhook_id() -> None:
    seen, client = recorder()
    sink = WebhookSink("https://hooks.test/watch", CURRENT, client=client)
    sink.deliver(message())
    sink.deliver(message())
    sink.deliver(message(firing=False, ends_at_us=WINDOW.end_us))
    ids = [r.headers["webhook-id"] for r in seen]
    assert ids[0] == ids[1] != ids[2]


def test_the_timestamp_comes_from_the_clock() -> None:
    seen, client = recorder()
    now = datetime.now(UTC)
    clock = FakeClock(int(now.timestamp()) * 1_000_000)
    WebhookSink("https://hooks.test/watch", CURRENT, client=client, clock=clock).deliver(message())
    assert seen[0].headers["webhook-timestamp"] == str(int(now.timestamp()))


def test_sign_webhook_is_reusable_and_verifiable() -> None:
    body = b'{"type":"scan.dead_lettered"}'
    timestamp = int(datetime.now(UTC).timestamp())
    headers = sign_webhook(parse_secrets([CURRENT]), "msg_1", timestamp, body)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert Webhook(CURRENT).verify(body, headers) == {"type": "scan.dead_lettered"}


def test_unpadded_secrets_are_accepted_like_the_reference_does() -> None:
    unpadded = "whsec_" + base64.b64encode(b"twenty-five-bytes-of-key!").decode().rstrip("=")
    body = b"{}"
    timestamp = int(datetime.now(UTC).timestamp())
    headers = sign_webhook(parse_secrets([unpadded]), "msg_2", timestamp, body)
    assert Webhook(unpadded).verify(body, headers) == {}


@pytest.mark.parametrize(
    ("secrets", "match"),
    [
        ([], "one secret"),
        ([CURRENT, PREVIOUS, CURRENT], "one secret"),
        (["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], "whsec_"),
        (["whsec_not base64!"], "base64"),
        (["whsec_" + base64.b64encode(b"short").decode()], "16 bytes"),
    ],
)
def test_bad_secrets_are_refused(secrets: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_secrets(secrets)


def test_a_secret_does_not_show_in_its_repr() -> None:
    assert "current" not in repr(WebhookSecret(CURRENT))


@pytest.mark.parametrize("status", [400, 401, 500, 301])
def test_webhook_refusal_raises_delivery_error(status: int) -> None:
    _, client = recorder(status)
    with pytest.raises(DeliveryError):
        WebhookSink("https://hooks.test/watch", CURRENT, client=client).deliver(message())


def test_webhook_timeout_raises_delivery_error() -> None:
    sink = WebhookSink("https://hooks.test", CURRENT, client=failing(httpx.ReadTimeout("slow")))
    with pytest.raises(DeliveryError, match="ReadTimeout"):
        sink.deliver(message())
