"""Standard Webhooks signatures, made by the reference `standardwebhooks` package: one
`v1,` signature per live secret over `id.timestamp.body`, current secret first."""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # a secret is whsec_ + base64 of 32 random bytes (docs/hooks.md)


def new_secret() -> str:
    """A fresh signing secret as receivers configure it."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def new_message_id() -> str:
    """A `webhook-id`: unique per notification, repeated on each of its attempts."""
    return "msg_" + uuid.uuid4().hex


def signature(secrets_: Sequence[str], *, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: space-separated, one per secret, in the given order."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    # The reference signer takes text; the body is UTF-8 JSON, so it encodes back to the
    # exact bytes sent.
    text = body.decode()
    return " ".join(Webhook(s).sign(msg_id, moment, text) for s in secrets_)


def headers(secrets_: Sequence[str], *, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers and the content type for one attempt."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secrets_, msg_id=msg_id, timestamp=timestamp, body=body),
    }
