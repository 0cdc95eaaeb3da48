"""Where the watcher's alerts go: the Alertmanager v2 API, and a webhook signed with
Standard Webhooks. A sink either accepts a message or raises DeliveryError; the outbox
keeps the message until a later relay pass gets it through.

Both are safe to repeat. Alertmanager merges alerts by their label set, so the labels name
the alert (alertname, policy version, configured labels) and never a window or a count;
those go in annotations. Webhook receivers deduplicate by `webhook-id`, which is the
message's idempotency key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from mainframe import __version__
from mainframe.clock import Clock, SystemClock, rfc3339
from mainframe.watch.ports import AlertMessage, DeliveryError

ALERTS_PATH = "/api/v2/alerts"
DEFAULT_TIMEOUT_S = 10.0
USER_AGENT = f"mainframe-watch/{__version__}"
# Prefix of a Standard Webhooks secret; the rest is the base64 of the key.
SECRET_PREFIX = "whsec_"
# Standard Webhooks allows several signatures; Mainframe signs with at most the current and
# the previous secret, so a receiver can rotate without losing a message.
MAX_SECRETS = 2
# The Prometheus data model's label names; Alertmanager rejects anything else.
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Label names reserved for the alert's identity; configuration and messages may not set them.
RESERVED_LABELS = frozenset({"alertname", "policy_version"})
MAX_LABEL_VALUE = 128


class WebhookSecret:
    """One `whsec_<base64>` signing key, decoded and checked once."""

    def __init__(self, text: str) -> None:
        if not text.startswith(SECRET_PREFIX):
            raise ValueError(f"a webhook secret starts with {SECRET_PREFIX!r}")
        encoded = text.removeprefix(SECRET_PREFIX)
        try:
            # Unpadded base64 is common in the wild; the reference verifier accepts it too.
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a webhook secret is whsec_ followed by base64") from exc
        if len(key) < 16:
            raise ValueError("a webhook secret holds at least 16 bytes of key")
        self.key = key

    def __repr__(self) -> str:
        return "WebhookSecret(<redacted>)"


def parse_secrets(texts: Sequence[str]) -> tuple[WebhookSecret, ...]:
    """The current secret first, then (during a rotation) the previous one."""
    if not 1 <= len(texts) <= MAX_SECRETS:
        raise ValueError(f"give one secret, or two during a rotation (got {len(texts)})")
    return tuple(WebhookSecret(text) for text in texts)


def sign_webhook(
    secrets: Sequence[WebhookSecret], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers for `body`: one `v1` signature per secret, space
    separated, over `{msg_id}.{timestamp}.{body}` (timestamp in Unix seconds)."""
    if not secrets:
        raise ValueError("at least one secret is needed to sign")
    signed = b"%s.%d.%s" % (msg_id.encode(), timestamp, body)
    signatures = [
        "v1," + base64.b64encode(hmac.new(s.key, signed, hashlib.sha256).digest()).decode()
        for s in secrets
    ]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signatures),
    }


def _post(client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str]) -> None:
    try:
        response = client.post(
            url,
            content=body,
            headers={"User-Agent": USER_AGENT, "Content-Type": "application/json", **headers},
            follow_redirects=False,
        )
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{exc.__class__.__name__}: {exc}") from exc
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"answered {response.status_code}")


def alertname(alert: str) -> str:
    """`delivery_failure` → `MainframeWatchDeliveryFailure`."""
    return "MainframeWatch" + "".join(part.capitalize() for part in alert.split("_"))


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels as Alertmanager accepts them, or ValueError naming the bad one."""
    for name, value in labels.items():
        if not LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"label name {name!r} is not a Prometheus label name")
        if name in RESERVED_LABELS:
            raise ValueError(f"label {name!r} is set by the watcher")
        if not isinstance(value, str) or len(value) > MAX_LABEL_VALUE:
            raise ValueError(f"label {name!r} must be a string of at most {MAX_LABEL_VALUE}")
    return dict(labels)


class AlertmanagerSink:
    """POST one alert to Alertmanager's v2 API. A firing alert has no `endsAt`, so
    Alertmanager keeps it for `resolve_timeout` (5 min by default): the relay's re-send
    interval must stay below that. A resolved alert carries `endsAt`."""

    def __init__(
        self,
        base_url: str,
        *,
        client: httpx.Client | None = None,
        extra_labels: Mapping[str, str] | None = None,
        generator_url: str | None = None,
        name: str = "alertmanager",
        clock: Clock | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.name = name
        self._url = base_url.rstrip("/") + ALERTS_PATH
        self._client = client or httpx.Client(timeout=timeout)
        self._owns_client = client is None
        self._labels = check_labels(extra_labels or {})
        self._generator_url = generator_url
        self._clock = clock or SystemClock()

    def alert(self, message: AlertMessage) -> dict[str, Any]:
        """The Alertmanager `postableAlert` for `message`."""
        # Message labels are the engine's bounded ones (e.g. source); configuration adds
        # site labels; the identity labels come last so nothing can overwrite them.
        labels = {
            **{k: v for k, v in message.labels.items() if k not in RESERVED_LABELS},
            **self._labels,
            "alertname": alertname(message.alert),
        }
        # The policy version is not a label: a new version must resolve the same alert.
        annotations = {
            **message.annotations,
            "window": message.window_key,
            "policy_version": message.policy_version,
        }
        alert: dict[str, Any] = {
            "labels": labels,
            "annotations": annotations,
            "startsAt": rfc3339(message.starts_at_us),
        }
        if not message.firing:
            ended = message.ends_at_us if message.ends_at_us is not None else self._clock.now_us()
            alert["endsAt"] = rfc3339(ended)
        if self._generator_url:
            alert["generatorURL"] = self._generator_url
        return alert

    def deliver(self, message: AlertMessage) -> None:
        body = json.dumps([self.alert(message)], separators=(",", ":")).encode()
        _post(self._client, self._url, body, {})

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


class WebhookSink:
    """POST the alert as a Standard Webhooks message: `webhook-id` is the idempotency key,
    so a receiver drops a repeat; two secrets sign it during a rotation."""

    def __init__(
        self,
        url: str,
        secret: str | Sequence[str],
        *,
        client: httpx.Client | None = None,
        name: str = "webhook",
        clock: Clock | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.name = name
        self._url = url
        self._secrets = parse_secrets([secret] if isinstance(secret, str) else list(secret))
        self._client = client or httpx.Client(timeout=timeout)
        self._owns_client = client is None
        self._clock = clock or SystemClock()

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def deliver(self, message: AlertMessage) -> None:
        body = json.dumps(webhook_body(message), separators=(",", ":")).encode()
        timestamp = self._clock.now_us() // 1_000_000
        _post(
            self._client,
            self._url,
            body,
            sign_webhook(self._secrets, message.idempotency_key, timestamp, body),
        )


def webhook_body(message: AlertMessage) -> dict[str, Any]:
    """`{type, timestamp, data}`, the payload shape Standard Webhooks recommends."""
    state = "firing" if message.firing else "resolved"
    return {
        "type": f"watch.alert.{state}",
        "timestamp": rfc3339(message.ends_at_us if not message.firing else message.starts_at_us),
        "data": {
            "alert": message.alert,
            "policy_version": message.policy_version,
            "state": state,
            "window": message.window_key,
            "starts_at": rfc3339(message.starts_at_us),
            "ends_at": rfc3339(message.ends_at_us),
            "labels": dict(message.labels),
            "annotations": dict(message.annotations),
        },
    }
