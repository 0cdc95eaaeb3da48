"""One delivery attempt: sign for this moment, POST through a fresh pinned transport with
no redirects, read a bounded amount of the answer, and classify what happened."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from mainframe import __version__
from mainframe.clock import MICROS, Clock
from mainframe.hooks import policy, signing
from mainframe.hooks.body import Notification
from mainframe.hooks.transport import RefusedAddress
from mainframe.store import HookTarget

USER_AGENT = f"Mainframe-Hooks/{__version__}"


async def post(
    transport: httpx.AsyncBaseTransport,
    target: HookTarget,
    note: Notification,
    *,
    msg_id: str,
    clock: Clock,
    timeout: float,
    max_response_bytes: int,
    log: Any,
) -> policy.Attempt:
    """Send `note` to `target` once; every failure becomes an Attempt, never an exception."""
    now = clock.now_us()
    headers = signing.headers(
        target.signing_secrets(), msg_id=msg_id, timestamp=now // MICROS, body=note.body
    )
    headers["user-agent"] = USER_AGENT
    try:
        # The outer bound covers resolution and a receiver that drips its answer slowly.
        async with (
            asyncio.timeout(timeout),
            httpx.AsyncClient(
                transport=transport, timeout=timeout, follow_redirects=False, trust_env=False
            ) as client,
            client.stream("POST", target.url, content=note.body, headers=headers) as response,
        ):
            await _read_bounded(response, max_response_bytes)
            retry_after = response.headers.get("retry-after")
            return policy.from_status(response.status_code, retry_after, now_us=clock.now_us())
    except RefusedAddress as exc:
        log.warning(
            "hook_address_refused", hook_id=target.hook_id, address=exc.address, reason=exc.reason
        )
        return policy.Attempt(policy.AttemptResult.REFUSED)
    except (TimeoutError, httpx.TimeoutException):
        return policy.Attempt(policy.AttemptResult.TIMEOUT)
    except httpx.ConnectError:
        return policy.Attempt(policy.AttemptResult.CONNECT_ERROR)
    except httpx.HTTPError:
        return policy.Attempt(policy.AttemptResult.TRANSPORT_ERROR)


async def _read_bounded(response: httpx.Response, limit: int) -> None:
    # The receiver's answer is never used; reading a bounded amount lets it finish.
    if response.is_stream_consumed:  # a test transport that has read it already
        return
    seen = 0
    async for chunk in response.aiter_raw():
        seen += len(chunk)
        if seen >= limit:
            return
