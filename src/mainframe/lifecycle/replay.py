"""When a result for an assignment that already closed is a replay and when it is a conflict.

A replay is the same request sent again because its answer was lost: it gets the first answer.
The same assignment with other content is a conflict (409 `result_conflict`), never answered
as if it had been accepted. Content is compared by a digest of the result as it means: the
fields a worker sends, with the defaults filled in and fields that do not apply left out, and
the free-form `result` as JSON with sorted keys. Pure: no database, no clock."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

# Bumped if what the digest covers ever changes, so that old and new digests never compare
# equal by accident (a stored digest of another version is treated as unknown).
DIGEST_VERSION = "r1"
# The digest an operator's close stores: a worker's result never equals it, so a worker
# that reports on an attempt an operator failed gets a conflict, not the operator's answer.
OPERATOR_CLOSE = "operator"


def result_digest(
    *,
    outcome: str,
    retryable: bool,
    summary: str | None,
    artifact: str | None,
    result: str | None,
    retry_after: float | None,
) -> str:
    """The digest of a result's content; `result` is its JSON text (None when absent)."""
    failed = outcome != "finished"
    normalised: list[Any] = [
        outcome,
        retryable if failed else None,  # a success is never retried, whatever it says
        summary,
        artifact,
        _canonical(result),
        # Only a retryable failure waits; a float prints the same for the same value.
        float(retry_after) if failed and retryable and retry_after is not None else None,
    ]
    body = orjson.dumps(normalised)
    # 128 bits say "the same content" as well as 256 do, in half the bytes of every attempt.
    return f"{DIGEST_VERSION}:{hashlib.blake2b(body, digest_size=16).hexdigest()}"


def _canonical(result: str | None) -> str | None:
    if result is None:
        return None
    return orjson.dumps(orjson.loads(result), option=orjson.OPT_SORT_KEYS).decode()


def is_replay(accepted: str | None, digest: str) -> bool:
    """Whether a result with `digest` repeats the one accepted with digest `accepted`.

    An attempt closed before digests were kept (None) cannot be compared: it is answered as
    a replay, as it was before, rather than refusing a worker's honest resend."""
    return accepted is None or accepted == digest
