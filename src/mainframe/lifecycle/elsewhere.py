"""Whether a poll may lease a retry: a scan whose last attempt a worker failed (or let lapse)
goes to another worker of its endpoint when one is asking, for a while after it is due; past
that bound, or with no other worker asking, anyone gets it. The SQL twin is in
`store/work/leasing.py` (`ELSEWHERE`); tests hold the two equal. No database, no clock."""

from __future__ import annotations

# Another worker is asking when its token was used this recently. Token use is written at most every
# `COARSE_US` of store/accounts/authentication.py and flushed every few seconds, so a worker that
# keeps polling always reads as asking; one that stopped reads so for at most this long.
ASKING_US = 30_000_000


def may_lease(
    *,
    worker: str,
    last_worker: str | None,
    due_at: int,
    now: int,
    bound_us: int,
    others_asking: bool,
) -> bool:
    """Whether `worker` may lease a due scan whose last attempt was `last_worker`'s
    (None: never leased). `bound_us` 0 turns the rule off."""
    if last_worker is None or last_worker != worker:
        return True
    return due_at <= now - bound_us or not others_asking


def others_asking(*, worker: str, last_used: dict[str, int | None], now: int) -> bool:
    """Whether a worker other than `worker` used its token within `ASKING_US`;
    `last_used` maps each worker of the endpoint to its token's last use."""
    return any(
        name != worker and used is not None and used > now - ASKING_US
        for name, used in last_used.items()
    )
