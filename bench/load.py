"""Load processes: aiohttp clients that use the public API as users do, and report back.

Each process runs `concurrency` coroutines over keep-alive `ClientSession`s (one per
server; coroutine i talks to server (offset + i) mod n). Four kinds of load:

- `ceiling`: `GET /healthz`, the trivial route of the same stack, as fast as it answers;
- `intake`: `POST /api/v1/scans`, one new scan per request, as a source;
- `fill`: `count` new scans through `POST /api/v1/scans/batch` (`batch` per request), or
  through the single route when `batch` is 1;
- `loop`: the closed worker loop, each coroutine one worker. With `fetch` (complete-and-fetch)
  a worker polls `POST /api/v1/jobs?batch=N` only when it holds no job, and reports each
  result with `?next=N`: one `/jobs/{id}/result?next=1` per scan at N = 1, one
  `/jobs/results?next=N` for the N results otherwise; the reply's `next` jobs are its next
  work, and an empty or missing `next` sends it back to polling (a server without
  complete-and-fetch thus gets the two-request loop). Without `fetch`, the two-request loop:
  poll, then report through `/jobs/{id}/result` (N = 1) or `/jobs/results`; with `count` it
  stops after leasing that many or on the first empty poll (a drain).

Timed kinds count the responses that arrive inside [measure_from, measure_until); nothing is
sent after `deadline`. Latencies are kept for requests sent inside the window.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
import orjson

# Seconds a load process may run past its deadline before it is abandoned.
EXTRA_SECONDS = 60.0
# Pause after a transport error or a refused poll, and after an empty poll.
ERROR_PAUSE_SECONDS = 0.05
EMPTY_PAUSE_SECONDS = 0.01
REQUEST_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class LoadPlan:
    kind: str  # ceiling | intake | fill | loop
    urls: tuple[str, ...]
    tokens: tuple[str, ...]  # source tokens (intake, fill), worker tokens (loop), or none
    concurrency: int
    measure_from: float  # time.monotonic(), system-wide on Linux: shared by the processes
    measure_until: float
    deadline: float
    batch: int = 1
    count: int = 0  # fill: scans to submit; loop: scans to lease (a drain); 0 = timed
    fetch: bool = False  # loop: report with `?next=batch` (complete-and-fetch); timed only
    label: str = "s"  # scan names are {label}-{proc}-{n}
    proc: int = 0  # this process's index among the plan's processes
    offset: int = 0  # the server of this process's first coroutine


@dataclass
class LoadStats:
    """What one load process saw; latencies in milliseconds."""

    requests: int = 0  # responses inside the window
    items: int = 0  # scans created (intake, fill), accepted (loop), or 200s (ceiling), in it
    requests_total: int = 0
    items_total: int = 0
    leased_total: int = 0  # jobs handed out, by polls and by `next`
    fetched_total: int = 0  # of which by a result reply's `next`
    fetch_replies: int = 0  # result replies that carried `next` (0: the server ignores it)
    fetch_refused: int = 0  # result requests refused because of `next` (then resent without)
    statuses: dict[int, int] = field(default_factory=dict)  # HTTP status -> responses
    item_statuses: dict[int, int] = field(default_factory=dict)  # per item of a batch route
    errors: int = 0  # transport errors and timeouts
    empty_polls: int = 0
    # The request; for the loop, every request that handed out jobs: polls, and with
    # complete-and-fetch the result requests whose reply carried `next`.
    latency_ms: list[float] = field(default_factory=list)
    result_ms: list[float] = field(default_factory=list)  # the loop's result reports
    last_done: float = 0.0

    def merge(self, other: LoadStats) -> None:
        for key, value in asdict(other).items():
            mine = getattr(self, key)
            if isinstance(mine, dict):
                for status, n in value.items():
                    mine[status] = mine.get(status, 0) + n
            elif key == "last_done":
                self.last_done = max(mine, value)
            else:
                setattr(self, key, mine + value)


class Tickets:
    """Scan numbers handed out to a process's coroutines, at most `limit` in all."""

    def __init__(self, limit: int) -> None:
        self.next = 0
        self.limit = limit

    def take(self, n: int) -> range:
        first = self.next
        last = first + n if self.limit == 0 else min(first + n, self.limit)
        self.next = last
        return range(first, last)


@dataclass
class Shared:
    """What a load process's coroutines share besides their LoadStats."""

    tickets: Tickets
    # Turned off for the whole process when a server refuses `next`: one refusal is enough to
    # know, and every later result then goes out as the two-request loop's.
    fetch: bool


Task = Callable[
    [aiohttp.ClientSession, LoadPlan, dict[str, str], LoadStats, Shared], Awaitable[None]
]


def load_process(plan: LoadPlan, out: Connection) -> None:
    """Entry point of one load process: run the plan, send back its LoadStats as a dict."""
    try:
        import uvloop

        stats = uvloop.run(_drive(plan))
    except ImportError:
        stats = asyncio.run(_drive(plan))
    out.send(asdict(stats))
    out.close()


async def _drive(plan: LoadPlan) -> LoadStats:
    stats = LoadStats()
    shared = Shared(Tickets(plan.count), fetch=plan.fetch)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
    sessions = [
        aiohttp.ClientSession(
            url,
            connector=aiohttp.TCPConnector(limit=plan.concurrency * 2, keepalive_timeout=120),
            timeout=timeout,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        for url in plan.urls
    ]
    task = TASKS[plan.kind]
    try:
        coroutines = []
        for i in range(plan.concurrency):
            headers = {"Content-Type": "application/json"}
            if plan.tokens:
                headers["Authorization"] = f"Bearer {plan.tokens[i % len(plan.tokens)]}"
            session = sessions[(plan.offset + i) % len(sessions)]
            coroutines.append(task(session, plan, headers, stats, shared))
        budget = plan.deadline - time.monotonic() + EXTRA_SECONDS
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*coroutines), timeout=budget)
    finally:
        for session in sessions:
            await session.close()
    return stats


async def _call(
    session: aiohttp.ClientSession,
    method: str,
    path: str,
    headers: dict[str, str],
    stats: LoadStats,
    body: bytes | None = None,
) -> tuple[int, bytes]:
    """One request; (0, b"") after a transport error or timeout."""
    try:
        async with session.request(method, path, data=body, headers=headers) as response:
            return response.status, await response.read()
    except (aiohttp.ClientError, TimeoutError):
        stats.errors += 1
        await asyncio.sleep(ERROR_PAUSE_SECONDS)
        return 0, b""


def _record(
    stats: LoadStats,
    plan: LoadPlan,
    started: float,
    status: int,
    items: int,
    latencies: list[float],
) -> float | None:
    """Count one response; return its latency in ms when it was sent inside the window."""
    done = time.monotonic()
    stats.statuses[status] = stats.statuses.get(status, 0) + 1
    stats.requests_total += 1
    stats.items_total += items
    stats.last_done = done
    if plan.measure_from <= done < plan.measure_until:
        stats.requests += 1
        stats.items += items
    if not plan.measure_from <= started < plan.measure_until:
        return None
    latencies.append((done - started) * 1000)
    return latencies[-1]


def scan_body(plan: LoadPlan, n: int) -> dict[str, Any]:
    """A new scan as a registry feed would submit it: unique name, a small payload."""
    name = f"{plan.label}-{plan.proc}-{n}"
    return {
        "name": name,
        "version": "1.0.0",
        "kind": "malware",
        "payload": {"urls": [f"https://files.example/{name}-1.0.0.tar.gz"]},
    }


async def _ceiling(session: Any, plan: LoadPlan, headers: Any, stats: LoadStats, _: Any) -> None:
    while (started := time.monotonic()) < plan.deadline:
        status, _body = await _call(session, "GET", "/healthz", {}, stats)
        _record(stats, plan, started, status, int(status == 200), stats.latency_ms)


async def _intake(
    session: Any, plan: LoadPlan, headers: Any, stats: LoadStats, shared: Shared
) -> None:
    while (started := time.monotonic()) < plan.deadline:
        (n,) = shared.tickets.take(1)
        body = orjson.dumps(scan_body(plan, n))
        status, _body = await _call(session, "POST", "/api/v1/scans", headers, stats, body)
        _record(stats, plan, started, status, int(status == 201), stats.latency_ms)


async def _fill(
    session: Any, plan: LoadPlan, headers: Any, stats: LoadStats, shared: Shared
) -> None:
    await asyncio.sleep(max(0.0, plan.measure_from - time.monotonic()))
    while (started := time.monotonic()) < plan.deadline:
        numbers = shared.tickets.take(plan.batch)
        if not numbers:
            return
        if plan.batch == 1:
            body = orjson.dumps(scan_body(plan, numbers[0]))
            status, _body = await _call(session, "POST", "/api/v1/scans", headers, stats, body)
            created = int(status == 201)
        else:
            body = orjson.dumps({"scans": [scan_body(plan, n) for n in numbers]})
            path = "/api/v1/scans/batch"
            status, raw = await _call(session, "POST", path, headers, stats, body)
            created = _count_items(stats, raw, status, created_status=201)
        _record(stats, plan, started, status, created, stats.latency_ms)


def _count_items(stats: LoadStats, raw: bytes, status: int, *, created_status: int) -> int:
    """Tally a batch reply's per-item statuses; return how many had `created_status`."""
    if status != 200:
        return 0
    good = 0
    for item in orjson.loads(raw)["results"]:
        code = int(item["status"])
        stats.item_statuses[code] = stats.item_statuses.get(code, 0) + 1
        good += code == created_status
    return good


async def _loop(
    session: Any, plan: LoadPlan, headers: Any, stats: LoadStats, shared: Shared
) -> None:
    if plan.fetch:
        await _fetch_loop(session, plan, headers, stats, shared)
    else:
        await _poll_loop(session, plan, headers, stats, shared)


async def _poll_loop(
    session: Any, plan: LoadPlan, headers: Any, stats: LoadStats, shared: Shared
) -> None:
    """The two-request loop: a poll for every batch, then its results."""
    while time.monotonic() < plan.deadline:
        if plan.count and stats.leased_total >= plan.count:
            return
        jobs = await _poll(session, plan, headers, stats)
        if jobs is None:
            continue
        if not jobs:
            if plan.count:
                return
            await asyncio.sleep(EMPTY_PAUSE_SECONDS)
            continue
        await _complete(session, plan, headers, stats, shared, jobs, fetch=False)


async def _fetch_loop(
    session: Any, plan: LoadPlan, headers: Any, stats: LoadStats, shared: Shared
) -> None:
    """Complete-and-fetch: poll only with empty hands; every report asks for the next jobs."""
    jobs: list[dict[str, Any]] = []
    while time.monotonic() < plan.deadline:
        if jobs:
            jobs = await _complete(session, plan, headers, stats, shared, jobs, fetch=True)
            continue
        jobs = await _poll(session, plan, headers, stats) or []
        if not jobs:
            await asyncio.sleep(EMPTY_PAUSE_SECONDS)
    if jobs:
        # Report what the last reply handed out, asking for nothing more: a bench run must not
        # leave leases behind it (they would hold scans PENDING for the lease's 900 s).
        await _complete(session, plan, headers, stats, shared, jobs, fetch=False)


async def _poll(
    session: Any, plan: LoadPlan, headers: Any, stats: LoadStats
) -> list[dict[str, Any]] | None:
    """One job poll: the jobs leased, [] for an empty poll, None when refused or failed."""
    started = time.monotonic()
    path = f"/api/v1/jobs?batch={plan.batch}"
    status, raw = await _call(session, "POST", path, headers, stats)
    _record(stats, plan, started, status, 0, stats.latency_ms)
    if status != 200:
        await asyncio.sleep(ERROR_PAUSE_SECONDS)
        return None
    jobs: list[dict[str, Any]] = orjson.loads(raw)
    stats.leased_total += len(jobs)
    stats.empty_polls += not jobs
    return jobs


def _result_body(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "outcome": "finished",
        "attempt": job["attempt"],
        "assignment_id": job["assignment_id"],
        "summary": "clean",
        "result": {"verdict": "clean"},
    }


def _batch_body(jobs: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(
        {"results": [{"scan_id": job["scan_id"], **_result_body(job)} for job in jobs]}
    )


async def _complete(
    session: Any,
    plan: LoadPlan,
    headers: Any,
    stats: LoadStats,
    shared: Shared,
    jobs: list[dict[str, Any]],
    *,
    fetch: bool,
) -> list[dict[str, Any]]:
    """Report `jobs` (one result, or the batch route when batch > 1), asking for `batch` next
    jobs when `fetch`; return the jobs the reply handed out."""
    if plan.batch == 1:
        path = f"/api/v1/jobs/{jobs[0]['scan_id']}/result"
        body = orjson.dumps(_result_body(jobs[0]))
    else:
        path, body = "/api/v1/jobs/results", _batch_body(jobs)
    asked = fetch and shared.fetch
    started = time.monotonic()
    query = f"?next={plan.batch}" if asked else ""
    status, raw = await _call(session, "POST", path + query, headers, stats, body)
    if asked and _refuses_next(status, raw):
        _record(stats, plan, started, status, 0, stats.result_ms)
        stats.fetch_refused += 1
        shared.fetch = False
        return await _complete(session, plan, headers, stats, shared, jobs, fetch=False)
    if plan.batch == 1:
        accepted = int(status == 200)
    else:
        accepted = _count_items(stats, raw, status, created_status=200)
    latency = _record(stats, plan, started, status, accepted, stats.result_ms)
    handed = _next_jobs(raw) if asked else None
    if handed is None:
        return []
    stats.fetch_replies += 1
    stats.fetched_total += len(handed)
    stats.leased_total += len(handed)
    if latency is not None:  # this request handed out work, as a poll does
        stats.latency_ms.append(latency)
    return handed


def _refuses_next(status: int, raw: bytes) -> bool:
    """A 400 or 422 naming `next`: a server that validates its query and does not know it."""
    return status in (400, 422) and b"next" in raw


def _next_jobs(raw: bytes) -> list[dict[str, Any]] | None:
    """The reply's `next` jobs; None when the reply carries no `next` (or is no JSON object)."""
    try:
        reply = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    handed = reply.get("next") if isinstance(reply, dict) else None
    return handed if isinstance(handed, list) else None


TASKS: dict[str, Task] = {"ceiling": _ceiling, "intake": _intake, "fill": _fill, "loop": _loop}
