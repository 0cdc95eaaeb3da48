"""Concurrency end to end: 32 workers drain 5,000 scans through real server processes (two on
PostgreSQL, one on SQLite) while results fail, leases are abandoned and stale results are
replayed. Afterwards every scan is in exactly one terminal state, no assignment was ever handed
out twice, and every accepted result is what the scan ended with. A smaller test races two
workers through two PostgreSQL servers for one scan at a time."""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mainframe.settings import Settings
from mainframe.store import open_store
from mainframe.store.accounts.owners import OPERATOR
from tests.serverproc import ServerProcess, cli

SCANS = 5_000
WORKERS = 32
MAX_BATCH = 5
# Short leases so abandoned ones lapse, are reassigned and dead-lettered within the test.
JOB_TIMEOUT = 1.5
MAX_ATTEMPTS = 3
SWEEP_SECONDS = 1.0
SERVER_ENV = {
    "MAINFRAME_JOB_TIMEOUT": str(JOB_TIMEOUT),
    "MAINFRAME_MAX_JOB_ATTEMPTS": str(MAX_ATTEMPTS),
    "MAINFRAME_SWEEP_SECONDS": str(SWEEP_SECONDS),
}
# What a worker does with an ordinary job: cumulative thresholds over random(); the rest finish.
ABANDON = 0.03
FAIL_FOR_GOOD = 0.06
FAIL_RETRYABLE = 0.16
# Chance, per job, that a worker sends one of its accepted results again, as after a lost
# answer: it must get the first answer again and change nothing.
STALE_REPLAY = 0.01
# Scans that fail retryably on every attempt, or are abandoned on every lease, so that both
# dead-letter reasons occur in numbers rather than by the luck of three bad draws in a row.
POISON_FAIL = 0.01
POISON_ABANDON = 0.01
CONNECTIONS_PER_SERVER = 24
# Scans with a plain history (one lease, finished) whose attempt history is read back too.
DETAIL_SAMPLE = 300
# Seconds from the first submission until every scan must be settled: generous, because the
# 2-core machine may be shared (a quiet run takes well under a minute); a stuck scan still fails.
DRAIN_DEADLINE = 240.0
SWEEP_DEADLINE = 4 * (JOB_TIMEOUT + SWEEP_SECONDS)
# Client and server read the same wall clock; allow for rounding to microseconds.
CLOCK_SLACK = 0.002
STALE_CODES = {"already_terminal", "not_lease_holder", "stale_assignment"}


@functools.cache
def poison(scan_id: int) -> str | None:
    """'fail' or 'abandon' for the scans every worker treats the same way; fixed per scan id."""
    roll = random.Random(scan_id).random()
    if roll < POISON_FAIL:
        return "fail"
    return "abandon" if roll < POISON_FAIL + POISON_ABANDON else None


@dataclass(frozen=True, slots=True)
class Lease:
    scan_id: int
    attempt: int
    assignment_id: str
    worker: str
    asked_at: float  # wall-clock time the poll was sent
    got_at: float  # wall-clock time its response arrived


@dataclass(frozen=True, slots=True)
class Report:
    lease: Lease
    outcome: str
    retryable: bool
    status: int
    error: str | None
    done_at: float
    replay: bool = False
    answer: Any = None  # what an accepted result was told about its scan

    @property
    def body(self) -> dict[str, Any]:
        return result_body(self.lease, self.outcome, self.retryable)

    @property
    def closes_scan(self) -> bool:
        return (
            self.outcome == "finished" or not self.retryable or self.lease.attempt >= MAX_ATTEMPTS
        )


def result_body(lease: Lease, outcome: str, retryable: bool) -> dict[str, Any]:
    return {
        "attempt": lease.attempt,
        "assignment_id": lease.assignment_id,
        "outcome": outcome,
        "retryable": retryable,
        "summary": f"{outcome} by {lease.worker}",
        "result": {"worker": lease.worker, "assignment_id": lease.assignment_id},
    }


@dataclass
class Ledger:
    """Everything the workers saw, appended from one event loop (no locks needed)."""

    expected: int
    leases: list[Lease] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    settled: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def lease(self, lease: Lease) -> None:
        self.leases.append(lease)

    def abandon(self, lease: Lease) -> None:
        if lease.attempt >= MAX_ATTEMPTS:
            self.settle(lease.scan_id)  # the sweeper will dead-letter it

    def report(self, report: Report) -> None:
        self.reports.append(report)
        if report.replay:
            return
        # A refused result at the cap means the lease lapsed and was reaped; below the cap,
        # another worker holds the scan now and will settle it.
        if (report.status == 200 and report.closes_scan) or (
            report.status == 409 and report.lease.attempt >= MAX_ATTEMPTS
        ):
            self.settle(report.lease.scan_id)

    def settle(self, scan_id: int) -> None:
        self.settled.add(scan_id)
        if len(self.settled) >= self.expected:
            self.done.set()


class Api:
    """One aiohttp session per server; any 5xx fails the test at once."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.sessions = [
            aiohttp.ClientSession(
                base_url=url,
                timeout=aiohttp.ClientTimeout(total=60),
                connector=aiohttp.TCPConnector(limit=CONNECTIONS_PER_SERVER),
            )
            for url in urls
        ]

    async def call(
        self, server: int, method: str, path: str, token: str, body: Any = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with self.sessions[server % len(self.sessions)].request(
            method, path, json=body, headers=headers
        ) as resp:
            payload = await resp.json()
            assert resp.status < 500, (method, path, resp.status, payload)
            return resp.status, payload

    async def close(self) -> None:
        for session in self.sessions:
            await session.close()


class Worker:
    """A scanner that polls, then finishes, fails or abandons each job by its own seeded dice."""

    def __init__(self, index: int, token: str, api: Api, ledger: Ledger) -> None:
        self.name, self.token, self.api, self.ledger = f"w{index:02d}", token, api, ledger
        self.server = index
        self.rng = random.Random(1000 + index)
        self.accepted: list[Report] = []

    async def run(self, deadline: float) -> None:
        while not self.ledger.done.is_set() and time.time() < deadline:
            leases = await self.poll()
            if not leases:
                await asyncio.sleep(self.rng.uniform(0.1, 0.3))
                continue
            plans = [(lease, self.choose(lease)) for lease in leases]
            for lease, plan in plans:
                if plan is None:
                    self.ledger.abandon(lease)
            todo = [(lease, plan) for lease, plan in plans if plan is not None]
            if len(todo) > 1 and self.rng.random() < 0.5:
                await self.report_batch(todo)
            else:
                for lease, plan in todo:
                    await self.report_one(lease, plan)
            for _ in leases:
                if self.accepted and self.rng.random() < STALE_REPLAY:
                    await self.replay(self.rng.choice(self.accepted))

    async def poll(self) -> list[Lease]:
        asked = time.time()
        path = f"/api/v1/jobs?batch={self.rng.randint(1, MAX_BATCH)}"
        status, jobs = await self.api.call(self.server, "POST", path, self.token)
        assert status == 200, jobs
        got = time.time()
        leases = [
            Lease(job["scan_id"], job["attempt"], job["assignment_id"], self.name, asked, got)
            for job in jobs
        ]
        for lease in leases:
            self.ledger.lease(lease)
        return leases

    def choose(self, lease: Lease) -> tuple[str, bool] | None:
        """(outcome, retryable), or None to abandon the lease."""
        fate = poison(lease.scan_id)
        roll = self.rng.random()
        if fate == "abandon" or (fate is None and roll < ABANDON):
            return None
        if fate == "fail" or FAIL_FOR_GOOD <= roll < FAIL_RETRYABLE:
            return ("failed", True)
        if roll < FAIL_FOR_GOOD:
            return ("failed", False)
        return ("finished", True)

    async def report_one(self, lease: Lease, plan: tuple[str, bool]) -> None:
        path = f"/api/v1/jobs/{lease.scan_id}/result"
        status, body = await self.api.call(
            self.server, "POST", path, self.token, result_body(lease, *plan)
        )
        error = body.get("error") if status != 200 else None
        self.record(lease, plan, status, error, body if status == 200 else None)

    async def report_batch(self, todo: list[tuple[Lease, tuple[str, bool]]]) -> None:
        items = [{"scan_id": lease.scan_id, **result_body(lease, *plan)} for lease, plan in todo]
        status, body = await self.api.call(
            self.server, "POST", "/api/v1/jobs/results", self.token, {"results": items}
        )
        assert status == 200, body
        assert [item["scan_id"] for item in body["results"]] == [x["scan_id"] for x in items]
        for (lease, plan), item in zip(todo, body["results"], strict=True):
            self.record(lease, plan, item["status"], item.get("error"), item.get("scan"))

    def record(
        self, lease: Lease, plan: tuple[str, bool], status: int, error: str | None, answer: Any
    ) -> None:
        assert status in (200, 409), (lease, status, error)
        report = Report(lease, plan[0], plan[1], status, error, time.time(), answer=answer)
        self.ledger.report(report)
        if status == 200:
            self.accepted.append(report)

    async def replay(self, old: Report) -> None:
        """Send an accepted result again, to either server, as a worker whose answer was lost
        would: it gets the first answer again."""
        server = self.rng.randrange(len(self.api.urls))
        path = f"/api/v1/jobs/{old.lease.scan_id}/result"
        status, body = await self.api.call(server, "POST", path, self.token, old.body)
        self.ledger.report(
            Report(
                old.lease,
                old.outcome,
                old.retryable,
                status,
                body.get("error"),
                time.time(),
                replay=True,
                answer=body if status == 200 else old.answer,
            )
        )


# Set-up ---------------------------------------------------------------------------------------


def create_accounts(database_url: str, workers: int) -> tuple[str, str, list[str]]:
    """(owner token, source token, worker tokens).

    The owner, endpoint and source go through the CLI. The worker tokens are issued by the
    store the CLI's `token create` wraps: 32 CLI processes cost ~1 CPU-second each, over half
    of this test's time budget on a two-core machine.
    """
    cli(database_url, "db", "upgrade")  # as an operator would, before any other command
    owner = cli(database_url, "owner", "create", "ops")
    cli(database_url, "endpoint", "create", "fleet", "--owner", "ops")
    source = cli(database_url, "token", "create", "--endpoint", "fleet", "--source", "feed")

    async def issue() -> list[str]:
        store = open_store(Settings(database_url=database_url))
        try:
            return [
                (
                    await store.owners.create_token(
                        OPERATOR, "fleet", role="worker", principal=f"w{i:02d}", origin="cli"
                    )
                )[1]
                for i in range(workers)
            ]
        finally:
            await store.close()

    return owner, source, asyncio.run(issue())


def start_servers(stack: ExitStack, database_url: str, workdir: Path) -> list[ServerProcess]:
    count = 1 if database_url.startswith("sqlite") else 2
    return [
        stack.enter_context(ServerProcess(database_url, workdir, **SERVER_ENV))
        for _ in range(count)
    ]


async def submit_scans(api: Api, source: str, count: int, *, tasks: int = 32) -> list[int]:
    """Submit `count` distinct scans from `tasks` concurrent producers; return their ids."""
    ids: list[int] = []

    async def producer(index: int) -> None:
        for n in range(index, count, tasks):
            body = {"name": f"pkg-{n:05d}", "version": "1.0.0"}
            status, scan = await api.call(index, "POST", "/api/v1/scans", source, body)
            assert status == 201, scan
            assert scan["status"] == "QUEUED", scan
            ids.append(scan["scan_id"])

    await asyncio.gather(*(producer(i) for i in range(tasks)))
    assert len(set(ids)) == count
    return ids


async def list_scans(api: Api, owner: str, query: str = "") -> list[dict[str, Any]]:
    scans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        path = f"/api/v1/scans?limit=500{query}" + (f"&cursor={cursor}" if cursor else "")
        status, page = await api.call(len(scans) // 500, "GET", path, owner)
        assert status == 200, page
        scans += page["scans"]
        cursor = page["next_cursor"]
        if cursor is None:
            return scans


async def wait_for_sweeper(api: Api, owner: str) -> None:
    """Abandoned leases at the cap lapse, then the sweeper dead-letters them."""
    deadline = time.time() + SWEEP_DEADLINE
    while True:
        live = [
            s
            for status in ("PENDING", "QUEUED")
            for s in await list_scans(api, owner, f"&status={status}")
        ]
        if not live or time.time() > deadline:
            assert not live, f"{len(live)} scans still live, e.g. {live[:3]}"
            return
        await asyncio.sleep(0.25)


async def fetch_details(api: Api, owner: str, ids: list[int]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    pending = iter(ids)

    async def reader(index: int) -> None:
        for scan_id in pending:
            status, scan = await api.call(index, "GET", f"/api/v1/scans/{scan_id}", owner)
            assert status == 200, scan
            found[scan_id] = scan

    await asyncio.gather(*(reader(i) for i in range(16)))
    return found


# Checks ---------------------------------------------------------------------------------------


def by_scan(leases: list[Lease]) -> dict[int, list[Lease]]:
    grouped: dict[int, list[Lease]] = defaultdict(list)
    for lease in leases:
        grouped[lease.scan_id].append(lease)
    return {k: sorted(v, key=lambda x: x.attempt) for k, v in grouped.items()}


def check_leases(ledger: Ledger, scan_ids: list[int]) -> dict[int, list[Lease]]:
    """No assignment handed out twice; attempts run 1, 2, ... within the budget."""
    ids = Counter(lease.assignment_id for lease in ledger.leases)
    assert not [a for a, n in ids.items() if n > 1], "an assignment id was handed out twice"
    pairs = Counter((lease.scan_id, lease.attempt) for lease in ledger.leases)
    twice = [
        (pair, [x.worker for x in ledger.leases if (x.scan_id, x.attempt) == pair])
        for pair, n in pairs.items()
        if n > 1
    ]
    assert not twice, f"(scan, attempt) leased more than once: {twice[:5]}"
    grouped = by_scan(ledger.leases)
    assert set(grouped) == set(scan_ids), "some scans were never leased, or unknown ones were"
    for scan_id, leases in grouped.items():
        attempts = [lease.attempt for lease in leases]
        assert attempts == list(range(1, len(attempts) + 1)), (scan_id, attempts)
        assert len(attempts) <= MAX_ATTEMPTS, (scan_id, attempts)
    return grouped


def accepted_by_scan(ledger: Ledger) -> dict[int, dict[int, Report]]:
    accepted: dict[int, dict[int, Report]] = defaultdict(dict)
    for report in ledger.reports:
        if report.status == 200 and not report.replay:
            attempt = report.lease.attempt
            assert attempt not in accepted[report.lease.scan_id], ("accepted twice", report)
            accepted[report.lease.scan_id][attempt] = report
    return accepted


def check_refusals(ledger: Ledger) -> None:
    """A result sent again gets its first answer; a fresh one is refused only after its lease
    lapsed."""
    first = {
        (r.lease.scan_id, r.lease.attempt): r.answer
        for r in ledger.reports
        if r.status == 200 and not r.replay
    }
    for report in ledger.reports:
        if report.replay:
            assert report.status == 200, ("a replayed result was refused", report)
            key = (report.lease.scan_id, report.lease.attempt)
            assert report.answer == first[key], ("a replay answered otherwise", report)
        if report.status == 409:
            assert report.error in STALE_CODES, report
            if not report.replay:
                held = report.done_at - report.lease.asked_at
                assert held >= JOB_TIMEOUT - CLOCK_SLACK, ("refused within its lease", report)


def check_reclaims(leases: list[Lease], accepted: dict[int, Report]) -> None:
    """A scan is leased again only after a retryable failure or once its lease lapsed."""
    for before, after in itertools.pairwise(leases):
        prior = accepted.get(before.attempt)
        if prior is not None:
            assert prior.outcome == "failed" and prior.retryable, ("re-leased", prior, after)
        else:
            assert after.got_at - before.asked_at >= JOB_TIMEOUT - CLOCK_SLACK, (before, after)


def expected_end(leases: list[Lease], accepted: dict[int, Report]) -> dict[str, Any]:
    """The scan's end state implied by what the workers were told."""
    last = leases[-1]
    final = accepted.get(last.attempt)
    end: dict[str, Any] = {"attempt_count": last.attempt, "worker": last.worker}
    if final is None:  # abandoned, or lapsed before its result: only the sweeper can end it
        assert last.attempt == MAX_ATTEMPTS, ("live lease never settled", last)
        return end | {
            "status": "FAILED",
            "fail_reason": "lease_expired",
            "dead_letter": True,
            "result": None,
        }
    end["result"] = final.body["result"]
    if final.outcome == "finished":
        return end | {"status": "FINISHED", "fail_reason": None, "dead_letter": False}
    if not final.retryable:
        return end | {"status": "FAILED", "fail_reason": "failed", "dead_letter": False}
    assert last.attempt == MAX_ATTEMPTS, ("retryable failure never re-leased", final)
    return end | {"status": "FAILED", "fail_reason": "attempts_exhausted", "dead_letter": True}


def check_scan(scan: dict[str, Any], end: dict[str, Any]) -> None:
    seen = {
        "status": scan["status"],
        "attempt_count": scan["attempt_count"],
        "worker": scan["worker"],
        "fail_reason": scan["fail_reason"],
        "dead_letter": scan["dead_lettered_at"] is not None,
        "result": scan["result"],
    }
    assert seen == end, (scan["scan_id"], seen, end)


def detail_sample(
    grouped: dict[int, list[Lease]], accepted: dict[int, dict[int, Report]]
) -> list[int]:
    """Every scan with more than one attempt or a non-finished end, and some of the rest."""
    eventful, plain = [], []
    for scan_id, leases in grouped.items():
        done = accepted.get(scan_id, {})
        simple = len(leases) == 1 and 1 in done and done[1].outcome == "finished"
        (plain if simple else eventful).append(scan_id)
    return eventful + random.Random(3).sample(sorted(plain), min(DETAIL_SAMPLE, len(plain)))


def check_history(scan: dict[str, Any], leases: list[Lease], accepted: dict[int, Report]) -> None:
    """The server's attempt history names the worker we saw lease each attempt."""
    history = [(a["attempt"], a["worker"], a["outcome"]) for a in scan["attempts"]]
    want = [
        (
            lease.attempt,
            lease.worker,
            accepted[lease.attempt].outcome if lease.attempt in accepted else "lease_expired",
        )
        for lease in leases
    ]
    assert history == want, (scan["scan_id"], history, want)


def check_logs(servers: list[ServerProcess], scans: list[dict[str, Any]], refused: int) -> None:
    """Each dead letter is logged once, by one process; each refusal is logged."""
    events = [event for server in servers for event in server.log_events()]
    assert not [e for e in events if e["event"] == "unhandled_error"], "a request failed"
    logged = Counter(e["scan_id"] for e in events if e["event"] == "scan_dead_lettered")
    assert [k for k, n in logged.items() if n > 1] == [], "a dead letter was logged twice"
    dead = {s["scan_id"]: s["fail_reason"] for s in scans if s["dead_lettered_at"] is not None}
    assert set(logged) == set(dead)
    reasons = {e["scan_id"]: e["reason"] for e in events if e["event"] == "scan_dead_lettered"}
    assert reasons == dead
    assert sum(e["event"] == "stale_result_rejected" for e in events) == refused


# The tests ------------------------------------------------------------------------------------


async def drain(
    urls: list[str], source: str, worker_tokens: list[str], ledger: Ledger
) -> tuple[list[int], float]:
    """Submit every scan while the workers drain them; return the ids and the time it took."""
    api = Api(urls)
    try:
        started = time.time()
        workers = [Worker(i, token, api, ledger) for i, token in enumerate(worker_tokens)]
        scan_ids, *_ = await asyncio.gather(
            submit_scans(api, source, SCANS), *(w.run(started + DRAIN_DEADLINE) for w in workers)
        )
        assert ledger.done.is_set(), f"only {len(ledger.settled)} of {SCANS} scans settled"
        return scan_ids, time.time() - started
    finally:
        await api.close()


async def verify(
    urls: list[str], owner: str, scan_ids: list[int], ledger: Ledger
) -> list[dict[str, Any]]:
    api = Api(urls)
    try:
        await wait_for_sweeper(api, owner)
        scans = await list_scans(api, owner)
        grouped = check_leases(ledger, scan_ids)
        accepted = accepted_by_scan(ledger)
        check_refusals(ledger)
        assert sorted(s["scan_id"] for s in scans) == sorted(scan_ids)
        for scan in scans:
            leases, done = grouped[scan["scan_id"]], accepted.get(scan["scan_id"], {})
            check_reclaims(leases, done)
            check_scan(scan, expected_end(leases, done))
        details = await fetch_details(api, owner, detail_sample(grouped, accepted))
        for scan_id, scan in details.items():
            check_history(scan, grouped[scan_id], accepted.get(scan_id, {}))
        return scans
    finally:
        await api.close()


def summary(label: str, scans: list[dict[str, Any]], ledger: Ledger, seconds: float) -> str:
    """One line: throughput, leases, results and refusals, and how the scans ended."""
    statuses = Counter((s["status"], s["fail_reason"]) for s in scans)
    refused = sum(r.status == 409 for r in ledger.reports)
    replays = sum(r.replay for r in ledger.reports)
    return (
        f"{label}: {SCANS} scans submitted and drained in {seconds:.1f}s "
        f"({SCANS / seconds:.0f}/s), "
        f"{len(ledger.leases)} leases, {len(ledger.reports)} results, {refused} x 409 "
        f"({replays} replays answered as the first time); "
        f"ends {dict(sorted(statuses.items(), key=str))}"
    )


@pytest.mark.slow
def test_workers_drain_every_scan_to_one_terminal_state(database_url: str, tmp_path: Path) -> None:
    owner, source, worker_tokens = create_accounts(database_url, WORKERS)
    ledger = Ledger(expected=SCANS)
    with ExitStack() as stack:
        servers = start_servers(stack, database_url, tmp_path)
        urls = [server.url for server in servers]
        scan_ids, seconds = asyncio.run(drain(urls, source, worker_tokens, ledger))
        scans = asyncio.run(verify(urls, owner, scan_ids, ledger))
        counts = Counter(s["status"] for s in scans)
        assert counts["FINISHED"] + counts["FAILED"] == SCANS
        dead = Counter(s["fail_reason"] for s in scans if s["dead_lettered_at"] is not None)
        assert set(dead) <= {"attempts_exhausted", "lease_expired"}, dead
        assert dead["attempts_exhausted"] > 0 and dead["lease_expired"] > 0, dead
        check_logs(servers, scans, sum(r.status == 409 for r in ledger.reports))
    print(summary(f"{database_url.split(':')[0]} x{len(urls)}", scans, ledger, seconds))


def scan_names(rounds: int) -> Iterator[dict[str, str]]:
    for n in range(rounds):
        yield {"name": f"race-{n:04d}", "version": "1.0.0"}


async def race(urls: list[str], source: str, tokens: list[str], rounds: int) -> Counter[str]:
    """One scan at a time; both workers poll at once through different servers."""
    api = Api(urls)
    wins: Counter[str] = Counter()
    try:
        for body in scan_names(rounds):
            status, scan = await api.call(0, "POST", "/api/v1/scans", source, body)
            assert status == 201, scan
            polls = await asyncio.gather(
                *(
                    api.call(i, "POST", "/api/v1/jobs?batch=2", token)
                    for i, token in enumerate(tokens)
                )
            )
            got = [(i, job) for i, (status, jobs) in enumerate(polls) for job in jobs]
            assert all(status == 200 for status, _ in polls), polls
            assert [job["scan_id"] for _, job in got] == [scan["scan_id"]], polls
            winner, job = got[0]
            wins[f"w{winner}"] += 1
            fields = {"attempt": job["attempt"], "assignment_id": job["assignment_id"]}
            path = f"/api/v1/jobs/{job['scan_id']}/result"
            status, done = await api.call(
                winner, "POST", path, tokens[winner], {**fields, "outcome": "finished"}
            )
            assert status == 200 and done["status"] == "FINISHED", done
            loser = 1 - winner
            status, refused = await api.call(
                loser, "POST", path, tokens[loser], {**fields, "outcome": "finished"}
            )
            assert status == 409 and refused["error"] == "already_terminal", refused
        return wins
    finally:
        await api.close()


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_two_workers_racing_across_servers_never_share_a_scan(
    database_url: str, tmp_path: Path
) -> None:
    _owner, source, tokens = create_accounts(database_url, 2)
    with ExitStack() as stack:
        servers = start_servers(stack, database_url, tmp_path)
        wins = asyncio.run(race([s.url for s in servers], source, tokens, rounds=200))
    assert sum(wins.values()) == 200
    print(f"race: 200 scans, wins by server {dict(sorted(wins.items()))}")
