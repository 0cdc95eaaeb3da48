"""Signatures verify with the reference `standardwebhooks` verifier only, never our own;
during a rotation each of the two signatures verifies with its own secret."""

from __future__ import annotations

import base64
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from mainframe.hooks import signing

BODY = b'{"type":"scan.ready","timestamp":"2026-09-21T14:13:20.000000Z","data":{"k":"\xc3\xa9"}}'


def test_secret_is_whsec_and_32_random_bytes() -> None:
    secret = signing.new_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert secret != signing.new_secret()


def test_headers_verify_with_the_reference_package() -> None:
    secret, now = signing.new_secret(), int(time.time())
    msg_id = signing.new_message_id()
    headers = signing.headers([secret], msg_id=msg_id, timestamp=now, body=BODY)
    assert headers["webhook-id"] == msg_id and msg_id.startswith("msg_")
    assert headers["webhook-timestamp"] == str(now)
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(BODY, headers)["data"] == {"k": "é"}


def test_a_changed_body_or_another_secret_does_not_verify() -> None:
    secret, now = signing.new_secret(), int(time.time())
    headers = signing.headers([secret], msg_id="msg_1", timestamp=now, body=BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"ready", b"reade"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(BODY, headers)


def test_rotation_signs_with_both_current_first_and_each_verifies_alone() -> None:
    current, previous, now = signing.new_secret(), signing.new_secret(), int(time.time())
    headers = signing.headers([current, previous], msg_id="msg_2", timestamp=now, body=BODY)
    first, second = headers["webhook-signature"].split(" ")
    for secret, own in ((current, first), (previous, second)):
        alone = {**headers, "webhook-signature": own}
        Webhook(secret).verify(BODY, alone)
    with pytest.raises(WebhookVerificationError):
        Webhook(current).verify(BODY, {**headers, "webhook-signature": second})
