"""Every figure an operator triages from equals what a plain model of the scans says, after
every step of a random day, on SQLite and PostgreSQL (hypothesis's stateful testing).

The steps drive the real store of an in-process server whose clock is a FakeClock the steps
move: sources, the owner and anonymous senders submit; two workers per endpoint lease, report
(finished, failed for good, failed to be retried, with summaries that share causes) and let
leases lapse; the sweeper reaps and prunes past the retention; the owner redrives by id,
filter and cause, pauses and resumes queues, fails scans and revokes an endpoint. After each
step every figure is read as an operator reads it — `mainframe stats`, each `/metrics` gauge
after a reconciliation, the process counters, the causes (count, facets, hours, example) over
the API and on the board, the dead-letter listing's count under each filter, the overview,
the board's cards and pills, its "N dead letters match", "Redrive all N…" and the
confirmation's count — and compared with the model (tests/integration/scan_model.py), which
decides each from the rules the README and docs/ state. Which scans a cause's key holds is
read from the scans table (its `cause` column, plain SQL), so a cause's figures are held to
the rows it counts even where the grouping itself is wrong (`cause_grouping` holds that
apart).

KNOWN_BROKEN names invariants neither read nor checked while a known bug is being fixed.
INVARIANTS says what each one holds."""

from __future__ import annotations

import functools
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, currently_in_test_context, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Engine, text

from mainframe.api.app import create_app
from mainframe.cli.stats import stats_figures
from mainframe.clock import MICROS, FakeClock
from mainframe.lifecycle.elsewhere import ASKING_US
from mainframe.metrics import Metrics
from mainframe.metrics.reconcile import reconcile_once
from mainframe.settings import Settings
from mainframe.store import Conflict, Principal, Report, ScanSpec, StoreError, Unauthorized
from mainframe.store.accounts.authentication import COARSE_US
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from mainframe.store.operator.dead_letters import DeadLetterFilter
from mainframe.store.operator.redrive import Redriven
from mainframe.sweeper import prune_once, sweep_once
from mainframe.wiring import build_runtime
from tests.blocking import Blocking
from tests.conftest import DATABASES, _pg_url, drop_pg_database, fresh_pg_database
from tests.integration.conftest import add_endpoint, issue
from tests.integration.scan_model import (
    OUTCOMES,
    PENDING,
    QUARANTINED,
    QUEUED,
    REVOKED,
    STATES,
    SUMMARIES,
    Model,
    Scan,
    sparkline,
)

# What each invariant holds. A name in KNOWN_BROKEN is neither read nor checked.
INVARIANTS = {
    "model": "the scans table holds what the model holds, scan by scan (the model is in step)",
    "stats_states": "`mainframe stats`: live scans by state, a paused queue's apart",
    "stats_paused": "`mainframe stats` has the state `paused`",
    "stats_outcomes": "`mainframe stats`: scans by outcome",
    "stats_oldest": "`mainframe stats`: how long the oldest leasable scan has waited",
    "metric_queue": "packages_queue{state} after a reconciliation, a paused queue's apart",
    "metric_paused_state": 'packages_queue{state="paused"} after a reconciliation',
    "metric_outcomes": "packages_scan_outcomes{outcome} after a reconciliation",
    "metric_oldest": "packages_oldest_queued_age_seconds, over the scans a poll could lease",
    "metric_queue_paused": "mainframe_queue_paused{endpoint,queue} after a reconciliation",
    "queue_paused_at_once": "mainframe_queue_paused, set by the process that paused or resumed",
    "process_counters": "packages_{dead_lettered,fail,success}_total, attempt failures",
    "cause_grouping": "dead letters share a cause exactly when a person would group them",
    "cause_counts": "each cause's count is its dead letters now; no cause without one",
    "cause_facets": "each cause's queues, kinds and workers add up to its dead letters",
    "cause_hours": "each cause's last 24 hours are its dead letters per hour",
    "cause_example": "each cause's example is one of its dead letters",
    "list_counts": "the dead-letter listing's count, unfiltered and under each filter",
    "overview_counts": "the overview's counts per endpoint and its totals",
    "overview_oldest": "the overview's oldest due scan per endpoint, over leasable scans",
    "board_cards": "the board's endpoint cards: depths by state, a paused queue's apart",
    "board_pills": "the board's pills count what each lists",
    "board_dead_matched": "the board's 'N dead letters match' and 'Redrive all N…'",
    "board_confirm": "the redrive confirmation's count: what the redrive would requeue",
    "board_causes": "the board's Causes view",
    "board_causes_by_endpoint": "the board's Causes view of one endpoint",
    "lease_due_work": "a poll leases only due scans, and as many as it may",
    "retry_elsewhere": "a scan a worker failed goes to another worker that asks, for a while",
    "redrive_outcome": "what a redrive requeues and skips, and why",
    "redrive_audit": "a redrive's audit entry: its count and the ids it requeued",
}
KNOWN_BROKEN: frozenset[str] = frozenset()

ENDPOINTS = ("pypi", "npm")  # one owner's; pypi takes anonymous scans into quarantine
QUEUES = ("default", "priority")
WORKERS = ("w1", "w2")  # each endpoint's two workers (the names repeat across endpoints)
NAMES = ("numpy", "left-pad", "requests")
KINDS = ("scan", "sdist")
PILLS = ("all", "queued", "pending", "finished", "failed", "dead")
JOB_TIMEOUT_S = 30
MAX_ATTEMPTS = 2
# Retentions a random day reaches; dead letters outlive the 24-hour sparkline, so some are
# counted and not drawn.
RETENTION_DAYS = {"finished": 0.25, "failed": 0.5, "dead_lettered": 1.5}
# How long a scan a worker failed (or let lapse) is kept from that worker while another one
# asks: the bound's default. Another worker asks when its token was used within ASKING_US by
# the last use the flush wrote, which trails its last request by up to COARSE_US: so it
# surely asks within ASKING_US - COARSE_US of its last poll, and surely not past ASKING_US.
RETRY_ELSEWHERE_US = 60 * MICROS
MAX_SCANS = 24  # every listing fits one page, of the board (50) and of the API (PAGE)
PAGE = 500
# Random days per database, within about a minute each on the 2-core machine of
# CONTRIBUTING.md; PostgreSQL's steps cost about twice SQLite's (a round trip per statement).
SETTINGS = {
    kind: settings(
        max_examples=examples,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    for kind, examples in (("sqlite", 12), ("postgresql", 6))
}
# A submission: endpoint, queue, name, kind, and who sends it.
SUBMISSIONS = st.tuples(
    st.sampled_from(ENDPOINTS),
    st.sampled_from(QUEUES),
    st.sampled_from(NAMES),
    st.sampled_from(KINDS),
    st.sampled_from(("source", "owner", "anonymous")),
)
# A worker's result: how the attempt ended, and what it said.
Result = tuple[str, str]
FAILURES = st.sampled_from([summary for summary in SUMMARIES if summary is not None])
RESULTS = st.tuples(st.sampled_from(("retryable", "finished", "permanent")), FAILURES)
# How far the clock moves in one step: seconds, past every lease granted before, or hours.
TIME_STEPS = st.one_of(
    st.integers(1, 20),
    st.just(JOB_TIMEOUT_S + 1),
    st.just(JOB_TIMEOUT_S + 1),
    st.integers(1, 30).map(lambda h: h * 3600),
)
Filter = dict[str, str]
Fresh = Callable[[], tuple[str, Callable[[], None]]]  # a database URL and how to drop it


def checked(*invariants: str) -> bool:
    """Whether any of the invariants is checked (a figure only they need is read only then)."""
    unknown = KNOWN_BROKEN - INVARIANTS.keys()
    assert not unknown, f"KNOWN_BROKEN names what is no invariant: {sorted(unknown)}"
    return any(name not in KNOWN_BROKEN for name in invariants)


@dataclass
class Deployment:
    """One example's world: a fresh database, the server in process on it, one owner with two
    endpoints, a source and two workers on each."""

    client: TestClient  # runs the app (its lifespan, its event loop)
    http: httpx.AsyncClient  # requests to the app, sent on the app's own loop
    store: Any  # the app's Store as a blocking proxy on the app's loop (tests/blocking.py)
    metrics: Metrics  # the server process's own
    clock: FakeClock
    engine: Engine  # plain SQL on the same database
    owner_secret: str
    owner: Principal
    sources: dict[str, Principal]
    workers: dict[tuple[str, str], Principal]
    drop: Callable[[], None]

    @classmethod
    def open(cls, url: str, drop: Callable[[], None]) -> Deployment:
        settings = Settings(
            database_url=url,
            job_timeout=JOB_TIMEOUT_S,
            max_job_attempts=MAX_ATTEMPTS,
            retry_base_seconds=0,
            # Only the test reconciles: one in the background would hide a gauge that lags.
            metrics_refresh_seconds=86_400,
            board_session_seconds=30 * 86_400,
            finished_retention_days=RETENTION_DAYS["finished"],
            failed_retention_days=RETENTION_DAYS["failed"],
            dead_letter_retention_days=RETENTION_DAYS["dead_lettered"],
        )
        clock = FakeClock()
        runtime = build_runtime(settings, clock=clock)
        app = create_app(settings, runtime=runtime, sweeper=False)
        client = TestClient(app).__enter__()
        try:
            return cls._provisioned(client, app, runtime, clock, url, drop)
        except BaseException:
            client.__exit__(None, None, None)
            drop()
            raise

    @classmethod
    def _provisioned(
        cls,
        client: TestClient,
        app: Any,
        runtime: Any,
        clock: FakeClock,
        url: str,
        drop: Callable[[], None],
    ) -> Deployment:
        assert client.portal is not None
        store = Blocking(runtime.store, client.portal)
        owner_secret = store.owners.create_owner("alice")
        for endpoint in ENDPOINTS:
            add_endpoint(store, "alice", endpoint, open_intake=endpoint == "pypi")

        def principal(secret: str) -> Principal:
            found: Principal | None = store.authentication.authenticate(secret)
            assert found is not None
            return found

        return cls(
            client=client,
            http=client.portal.call(_http, app),
            store=store,
            metrics=runtime.metrics,
            clock=clock,
            engine=create_store_engine(url),
            owner_secret=owner_secret,
            owner=principal(owner_secret),
            sources={e: principal(issue(store, e, "source", "feed")) for e in ENDPOINTS},
            workers={
                (e, w): principal(issue(store, e, "worker", w)) for e in ENDPOINTS for w in WORKERS
            },
            drop=drop,
        )

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        """One request, as one call onto the app's loop (a TestClient request is eight)."""
        return self.send("GET", path, **kwargs)

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A request of any method, sent on the app's loop."""
        assert self.client.portal is not None
        request = functools.partial(self.http.request, method, path, **kwargs)
        response: httpx.Response = self.client.portal.call(request)
        return response

    def close(self) -> None:
        assert self.client.portal is not None
        self.client.portal.call(self.http.aclose)
        self.client.__exit__(None, None, None)
        self.engine.dispose()
        self.drop()


async def _http(app: Any) -> httpx.AsyncClient:
    # Loopback over plain HTTP, where the board's session cookie is not Secure.
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


class Divergence(AssertionError):
    """A figure that is not what the model says; the message names the invariant."""


class FiguresMachine(RuleBasedStateMachine):
    """Random steps on the real store, every figure checked against the model after each."""

    fresh: Fresh  # a new database for each example (set by the test for its database)

    def __init__(self) -> None:
        super().__init__()
        self.d = Deployment.open(*self.fresh())
        self.model = Model(
            job_timeout_us=JOB_TIMEOUT_S * MICROS,
            max_attempts=MAX_ATTEMPTS,
            kept_us={k: round(days * 86_400 * MICROS) for k, days in RETENTION_DAYS.items()},
        )
        self.polled: dict[tuple[str, str], int] = {}  # when each worker last asked for work
        self.started = self.d.clock.now_us()
        self.story: list[str] = []

    def teardown(self) -> None:
        self.d.close()

    def say(self, text: str) -> None:
        """What a step did, printed with a failing example (and kept, for a replayed day)."""
        self.story.append(text)
        if currently_in_test_context():
            note(text)

    @property
    def now(self) -> int:
        return self.d.clock.now_us()

    @property
    def owner_id(self) -> int:
        assert self.d.owner.owner_id is not None
        return self.d.owner.owner_id

    def expect(self, invariant: str, found: object, wanted: object, what: str) -> None:
        """Fail, naming the invariant and the figure, where `found` is not `wanted`."""
        assert invariant in INVARIANTS, invariant
        if found == wanted or invariant in KNOWN_BROKEN:
            return
        message = f"[{invariant}] {what}: found {found!r}, the model says {wanted!r}"
        scans = "".join(f"\n  {s.short()}" for s in sorted(self.model.scans.values(), key=_id))
        paused = sorted(self.model.paused)
        elapsed = (self.now - self.started) / MICROS
        state = f"at t+{elapsed:g} s, paused {paused}, the model's scans:{scans}"
        if currently_in_test_context():  # hypothesis prints the steps with their notes
            note(f"{message}\n{state}")
            raise Divergence(message)
        raise Divergence("\n".join([message, "the day so far:", *self.story, state]))

    # ---- steps -----------------------------------------------------------------------------

    @initialize(backlog=st.lists(SUBMISSIONS, min_size=1, max_size=8))
    def submit_backlog(self, backlog: list[tuple[str, str, str, str, str]]) -> None:
        """The day starts with a few scans (so the other steps soon have work)."""
        for submission in backlog:
            self.submit(*submission)

    @precondition(lambda self: len(self.model.scans) < MAX_SCANS)
    @rule(submission=SUBMISSIONS)
    def submit_one(self, submission: tuple[str, str, str, str, str]) -> None:
        self.submit(*submission)

    def submit(self, endpoint: str, queue: str, name: str, kind: str, sender: str) -> None:
        m, now = self.model, self.now
        caller = {"source": self.d.sources[endpoint], "owner": self.d.owner}.get(sender)
        what = f"submit {name}:{kind} to {endpoint}/{queue} as {sender}"
        spec = ScanSpec(name, "1", queue, kind, None)
        try:
            named = None if sender == "source" else endpoint
            record, created = self.d.store.intake.submit(caller, endpoint=named, spec=spec)
        except StoreError as exc:
            self.say(f"{what}: refused ({type(exc).__name__})")
            self.expect("model", type(exc).__name__, self._refusal(endpoint, sender), what)
            return
        self.say(f"{what}: #{record.id}, created={created}")
        self.expect("model", None, self._refusal(endpoint, sender), what)
        live = m.live_key((endpoint, name, kind))
        if live is not None:
            self.expect("model", (record.id, created), (live.id, False), f"{what}: a live key")
            if live.status == QUARANTINED and sender == "source":
                m.promoted(live, now)
            return
        self.expect("model", created, True, f"{what}: a new key")
        status = QUARANTINED if sender == "anonymous" else QUEUED
        m.submitted(Scan(record.id, endpoint, queue, name, kind, sender == "source", status), now)

    def _refusal(self, endpoint: str, sender: str) -> str | None:
        """Who may submit where: only pypi takes anonymous scans, and a revoked endpoint's
        tokens get 401 while its owner gets 409."""
        revoked = endpoint in self.model.revoked
        if sender == "anonymous" and (endpoint != "pypi" or revoked):
            return "Unauthorized"
        if revoked:
            return "Conflict" if sender == "owner" else "Unauthorized"
        return None

    @rule(
        endpoint=st.sampled_from(ENDPOINTS),
        worker=st.sampled_from(WORKERS),
        batch=st.integers(1, 3),
        results=st.lists(RESULTS, max_size=3),
    )
    def work(self, endpoint: str, worker: str, batch: int, results: list[Result]) -> None:
        """A worker's round: it polls for up to `batch` scans and reports on the first of
        them, one result each in `results`; the rest it keeps (until their leases lapse)."""
        leased = self.lease(endpoint, worker, batch)
        if leased and results:
            self.report(leased[: len(results)], results)

    @rule(
        endpoint=st.sampled_from(ENDPOINTS),
        worker=st.sampled_from(WORKERS),
        summaries=st.lists(FAILURES, min_size=1, max_size=3),
    )
    def bad_round(self, endpoint: str, worker: str, summaries: list[str]) -> None:
        """A worker with a bad day: it polls and fails every scan it got, asking for a retry
        (the way a fleet's dead letters pile up)."""
        leased = self.lease(endpoint, worker, len(summaries))
        if leased:
            self.report(leased, [("retryable", summary) for summary in summaries])

    @precondition(lambda self: any(s.status == PENDING for s in self.model.scans.values()))
    @rule(pick=st.integers(min_value=0), results=st.lists(RESULTS, min_size=1, max_size=3))
    def report_held(self, pick: int, results: list[Result]) -> None:
        """One worker's results, in one batch, for scans it has held since an earlier round;
        late ones (a lease lapsed, not yet reaped) are accepted too."""
        m = self.model
        held = _pick([s for s in m.scans.values() if s.status == PENDING], pick)
        mine = [
            s for s in sorted(m.scans.values(), key=_id)
            if s.status == PENDING and (s.endpoint, s.holder) == (held.endpoint, held.holder)
        ]  # fmt: skip
        self.report(mine[: len(results)], results)

    def lease(self, endpoint: str, worker: str, batch: int) -> list[Scan]:
        """The job poll: this endpoint's lapsed leases reaped, then due scans leased."""
        m, now = self.model, self.now
        what = f"{endpoint}/{worker} polls for {batch}"
        try:
            jobs = self.d.store.leasing.lease(self.d.workers[endpoint, worker], batch)
        except Unauthorized:
            self.say(f"{what}: 401")
            self.expect("model", endpoint in m.revoked, True, f"{what}: refused")
            return []
        self.expect("model", endpoint in m.revoked, False, f"{what}: a revoked endpoint's")
        reaped = [s.id for s in m.reap(now, endpoint)]
        due = {s.id for s in m.scans.values() if s.endpoint == endpoint and m.leasable(s, now)}
        leased = [job.scan_id for job in jobs]
        self.say(f"{what}: reaped {reaped}, leased {leased} of the due {sorted(due)}")
        self.expect("lease_due_work", sorted(set(leased) - due), [], f"{what}: leased, not due")
        other = next(w for w in WORKERS if w != worker)
        asked = self.polled.get((endpoint, other))
        since = None if asked is None else now - asked
        # A poll may pass over what its worker just failed while the other may be asking;
        # never over anything else.
        may_skip = since is not None and since < ASKING_US
        others = {
            i
            for i in due
            if not (may_skip and _was_failed_by(m.scans[i].skippable_by, worker, now))
        }
        least = min(batch, len(others))
        self.expect(
            "lease_due_work",
            least <= len(leased) <= batch,
            True,
            f"{what}: {len(leased)} leased, {len(due)} due of which {len(others)} not its own",
        )
        if since is not None and since <= ASKING_US - COARSE_US:
            own = [i for i in leased if _was_failed_by(m.scans[i].failed_by, worker, now)]
            self.expect("retry_elsewhere", own, [], f"{what}: its own failures while {other} asks")
        self.polled[endpoint, worker] = now
        # Its token's use, as the request notes it and the periodic flush writes it.
        self.d.store.authentication.note(self.d.workers[endpoint, worker].digest)
        self.d.store.authentication.flush()
        for job in jobs:
            scan = m.scans[job.scan_id]
            self.expect("model", job.attempt, scan.attempts + 1, f"{what}: #{scan.id}'s attempt")
            m.leased(scan, worker, job.assignment_id, now)
        return [m.scans[scan_id] for scan_id in sorted(leased)]

    def report(self, scans: list[Scan], results: list[Result]) -> None:
        """The holder's results for `scans` (one worker's), in one batch."""
        m, now = self.model, self.now
        endpoint, holder = scans[0].endpoint, scans[0].holder
        assert holder is not None
        items = [
            (scan.id, Report(*_said(outcome), scan.attempts, scan.assignment, summary, None, None))
            for scan, (outcome, summary) in zip(scans, results, strict=False)
        ]
        done = self.d.store.results.report_many(self.d.workers[endpoint, holder], items)
        errors = [(item.scan_id, item.error.code) for item in done if item.error is not None]
        self.expect("model", errors, [], f"results by {endpoint}/{holder} refused")
        for scan, (outcome, summary) in zip(scans, results, strict=False):
            said, retryable = _said(outcome)
            became = m.closed(
                scan, now, outcome=said, retryable=retryable, summary=summary, by_worker=True
            )
            self.say(f"#{scan.id}: {holder} reports {outcome}, {summary!r} -> {became}")

    @precondition(lambda self: any(s.live for s in self.model.scans.values()))
    @rule(
        held=st.sampled_from((True, True, True, False)),
        pick=st.integers(min_value=0),
        retryable=st.booleans(),
        summary=st.sampled_from(list(SUMMARIES)),
    )
    def operator_fails(self, held: bool, pick: int, retryable: bool, summary: str | None) -> None:
        """The owner fails a live scan: the attempt of one a worker holds as the worker would,
        or one nobody holds for good (a retryable fail of it is refused)."""
        m, now = self.model, self.now
        chosen = [s for s in m.scans.values() if s.live and (s.status == PENDING) == held]
        if not chosen:
            self.say(f"the owner finds no {'held' if held else 'unleased'} scan to fail")
            return
        scan = _pick(chosen, pick)
        what = f"the owner fails #{scan.id} ({scan.status}), retryable={retryable}"
        try:
            self.d.store.interventions.fail(
                self.owner_id, scan.id, retryable=retryable, summary=summary
            )
        except Conflict as exc:
            self.say(f"{what}: {exc.code}")
            self.expect("model", scan.status != PENDING and retryable, True, f"{what}: refused")
            return
        if scan.status == PENDING:
            became = m.closed(
                scan, now, outcome="failed", retryable=retryable, summary=summary, by_worker=False
            )
        else:
            self.expect("model", retryable, False, f"{what}: accepted")
            m.failed_unleased(scan, now)
            became = "failed"
        self.say(f"{what}, {summary!r} -> {became}")

    @rule(seconds=TIME_STEPS, sweeper=st.booleans())
    def time_passes(self, seconds: int, sweeper: bool) -> None:
        """A few seconds, past every lease granted until now, or hours; then, if its period
        came, the sweeper reaps every endpoint's lapsed leases and prunes what is past its
        retention (sweeper.py)."""
        self.d.clock.advance(seconds)
        if not sweeper:
            self.say(f"{seconds} s pass")
            return
        reaped = self.model.reap(self.now, None)
        found = self.d.store.run(sweep_once, self.d.store.target)
        gone = self.model.prune(self.now)
        self.d.store.run(prune_once, self.d.store.target)
        reaped_ids, gone_ids = [s.id for s in reaped], [s.id for s in gone]
        self.say(f"{seconds} s pass; the sweeper reaps {reaped_ids} and prunes {gone_ids}")
        self.expect("model", found, len(reaped), "lapsed leases the sweeper reaped")

    @precondition(lambda self: any(True for _ in self.model.dead_letters()))
    @rule(picks=st.lists(st.integers(min_value=0), min_size=1, max_size=3), stray=st.booleans())
    def redrive_ids(self, picks: list[int], stray: bool) -> None:
        dead = sorted(self.model.dead_letters(), key=_id)
        ids = [dead[p % len(dead)].id for p in picks]
        if stray:  # a live scan's id, or one nobody has
            ids.append(next((s.id for s in self.model.scans.values() if s.live), 10**6))
        done = self.d.store.dead_letters.redrive_ids(self.owner_id, ids, origin="cli")
        self._redriven(f"redrive ids {ids}", ids, done)

    @precondition(lambda self: any(True for _ in self.model.dead_letters()))
    @rule(endpoint=st.sampled_from((None, *ENDPOINTS)), queue=st.sampled_from((None, *QUEUES)))
    def redrive_filter(self, endpoint: str | None, queue: str | None) -> None:
        f = {k: v for k, v in (("endpoint", endpoint), ("queue", queue)) if v is not None}
        matched = [s.id for s in self._redrivable() if _matches(s, f, {})]
        dead_letters = DeadLetterFilter(endpoint=endpoint, queue=queue)
        self._redrive_filter(f"redrive {f}", dead_letters, matched)

    @precondition(lambda self: any(True for _ in self.model.dead_letters()))
    @rule(pick=st.integers(min_value=0))
    def redrive_cause(self, pick: int) -> None:
        keys = self.cause_keys()
        named = sorted({key for key in keys.values() if key is not None})
        if not named:
            self.say("no dead letter has a cause to redrive by")
            return
        key = named[pick % len(named)]
        matched = [s.id for s in self._redrivable() if keys.get(s.id) == key]
        self._redrive_filter(f"redrive cause {key}", DeadLetterFilter(cause=key), matched)

    def _redrivable(self) -> list[Scan]:
        """Dead letters a filter redrive takes, newest first (docs/board.md: a revoked
        endpoint's stay dead)."""
        dead = [s for s in self.model.dead_letters() if s.endpoint not in self.model.revoked]
        return sorted(dead, key=lambda s: (s.dead_at, s.id), reverse=True)

    def _redrive_filter(self, what: str, f: DeadLetterFilter, ids: list[int]) -> None:
        """A filter redrive confirming the count the model says it matches."""
        try:
            done = self.d.store.dead_letters.redrive_filter(
                self.owner_id, f, confirm=len(ids), origin="cli"
            )
        except Conflict as exc:
            self.say(f"{what}, confirming {len(ids)}: {exc.code}, {exc}")
            self.expect("redrive_outcome", exc.code, None, f"{what}, confirming {len(ids)}")
            return
        self._redriven(what, ids, done)

    def _redriven(self, what: str, ids: list[int], done: Redriven) -> None:
        requeued, skipped = self.model.redrive(ids, self.now)
        self.say(f"{what}: requeued {requeued}, skipped {skipped}")
        found = (done.redriven, {s.scan_id: s.reason for s in done.skipped})
        self.expect("redrive_outcome", found, (len(requeued), skipped), what)
        if not checked("redrive_audit"):
            return
        [entry] = self.api("/api/v1/audit?limit=1")["entries"]
        found_entry = (entry["action"], entry["count"])
        self.expect("redrive_audit", found_entry, ("redrive", len(requeued)), f"{what}: audited")
        # The first 100 it requeued, in the order it requeued them, whatever named them.
        named = entry["detail"]["requeued_ids"]
        left_out = sorted(set(requeued[:100]) - set(named))
        self.expect("redrive_audit", left_out, [], f"{what}: requeued ids its audit entry omits")

    @rule(endpoint=st.sampled_from(ENDPOINTS), queue=st.sampled_from(QUEUES), pause=st.booleans())
    def pause_or_resume(self, endpoint: str, queue: str, pause: bool) -> None:
        what = f"{'pause' if pause else 'resume'} {endpoint}/{queue}"
        act = self.d.store.queues.pause if pause else self.d.store.queues.resume
        revoked = endpoint in self.model.revoked
        try:
            act(self.owner_id, endpoint, queue, by="alice", origin="cli")
        except Conflict:
            self.say(f"{what}: refused, the endpoint is revoked")
            self.expect("model", revoked, True, f"{what}: refused")
            return
        self.say(what)
        self.expect("model", revoked, False, f"{what}: of a revoked endpoint")
        (self.model.paused.add if pause else self.model.paused.discard)((endpoint, queue))

    @precondition(lambda self: not self.model.revoked and any(self.model.dead_letters()))
    @rule(endpoint=st.sampled_from(ENDPOINTS))
    def revoke(self, endpoint: str) -> None:
        ended = self.model.revoke(endpoint, self.now)
        found = self.d.store.revocations.revoke(self.owner_id, endpoint, origin="cli")
        self.say(f"revoke {endpoint}: dead-letters {[s.id for s in ended]}")
        self.expect("model", found, len(ended), f"scans the revocation of {endpoint} ended")

    # ---- reading the figures ---------------------------------------------------------------

    def api(self, path: str) -> Any:
        headers = {"Authorization": f"Bearer {self.d.owner_secret}"}
        response = self.d.get(path, headers=headers)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    def board(self, path: str) -> str:
        """A board page, signing in (again, once the session ended) when sent to."""
        for _ in range(2):
            response = self.d.get(path)
            if response.status_code == 200:
                return response.text
            assert response.status_code == 303, (path, response.status_code, response.text)
            assert response.headers["location"].startswith("/board/sign-in"), path
            self.sign_in()
        raise AssertionError(f"{path}: signed in, and sent to sign in again")

    def sign_in(self) -> None:
        form = self.d.get("/board/sign-in")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None, form.text
        data = {"csrf": csrf.group(1), "token": self.d.owner_secret}
        done = self.d.send("POST", "/board/sign-in", data=data)
        assert done.status_code == 303, done.text

    def cause_keys(self) -> dict[int, str | None]:
        """Each dead letter's cause key as the scans table holds it (plain SQL)."""
        with self.d.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT id, cause FROM scans WHERE dead_lettered_at IS NOT NULL")
            )
            return {int(scan_id): cause for scan_id, cause in rows}

    # ---- the invariants --------------------------------------------------------------------

    @invariant()
    def figures(self) -> None:
        now, keys = self.now, self.cause_keys()
        self.check_rows()
        self.check_stats(now)
        self.check_metrics(now)
        self.check_counters()
        self.check_causes(now, keys)
        self.check_listing(keys)
        self.check_overview(now)
        self.check_board(now, keys)

    def check_rows(self) -> None:
        """The model is in step: every scan's row says what the model says of it."""
        if not checked("model"):
            return
        with self.d.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT scans.id, endpoints.name, queue, scans.name, kind, status,"
                    " attempt_count, dead_lettered_at, fail_reason, worker"
                    " FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id"
                )
            ).all()
        found = {
            int(id_): (endpoint, queue, name, kind, status, attempts, dead, reason,
                       worker if status == PENDING else None)
            for id_, endpoint, queue, name, kind, status, attempts, dead, reason, worker in rows
        }  # fmt: skip
        self.expect("model", sorted(found), sorted(self.model.scans), "the scans that exist")
        for s in self.model.scans.values():
            holder = s.holder if s.status == PENDING else None
            wanted = (s.endpoint, s.queue, s.name, s.kind, s.status, s.attempts, s.dead_at,
                      s.reason, holder)  # fmt: skip
            what = f"#{s.id}: endpoint, queue, name, kind, status, attempts, dead, reason, holder"
            self.expect("model", found[s.id], wanted, what)

    def check_stats(self, now: int) -> None:
        if not checked("stats_states", "stats_paused", "stats_outcomes", "stats_oldest"):
            return
        m = self.model
        figures = stats_figures(self.d.store.listings.snapshot())
        states, found = m.states(now), dict(figures["queue"])
        self.expect("stats_paused", found.pop("paused", None), states.pop("paused"), "paused")
        self.expect("stats_states", found, states, "`mainframe stats`: live scans by state")
        self.expect("stats_outcomes", figures["outcomes"], m.outcomes(), "`mainframe stats`")
        age, wanted = figures["oldest_queued_age_seconds"], m.oldest_due_age(now) or 0.0
        self.expect("stats_oldest", age, wanted, "`mainframe stats`: the oldest due scan's age")

    def check_metrics(self, now: int) -> None:
        """Every gauge of a fresh registry after one reconciliation; `mainframe_queue_paused`
        of the server's own registry too, which nothing has reconciled since it started."""
        m = self.model
        if checked("metric_queue", "metric_paused_state", "metric_outcomes", "metric_oldest",
                   "metric_queue_paused"):  # fmt: skip
            fresh = Metrics()
            assert self.d.store.run(reconcile_once, self.d.store.target, fresh)
            value = _samples(fresh)
            states = {s: float(n) for s, n in m.states(now).items()}
            found = {s: value("packages_queue", {"state": s}) for s in STATES}
            paused = 'packages_queue{state="paused"}'
            self.expect("metric_paused_state", found.pop("paused"), states.pop("paused"), paused)
            self.expect("metric_queue", found, states, "packages_queue{state}")
            outcomes = {o: value("packages_scan_outcomes", {"outcome": o}) for o in OUTCOMES}
            wanted = {o: float(n) for o, n in m.outcomes().items()}
            self.expect("metric_outcomes", outcomes, wanted, "packages_scan_outcomes{outcome}")
            age, oldest = value("packages_oldest_queued_age_seconds"), m.oldest_due_age(now)
            self.expect("metric_oldest", age, oldest or 0.0, "packages_oldest_queued_age_seconds")
            self.expect(
                "metric_queue_paused",
                _paused_gauge(value, m.revoked),
                _paused_gauge(m.paused_gauge, m.revoked),
                "mainframe_queue_paused{endpoint,queue}",
            )
        own = _samples(self.d.metrics)
        self.expect(
            "queue_paused_at_once",
            _paused_gauge(own, m.revoked),
            _paused_gauge(m.paused_gauge, m.revoked),
            "mainframe_queue_paused{endpoint,queue} of the process, not reconciled since",
        )

    def check_counters(self) -> None:
        """The process counters (docs/observability.md: revocations left out)."""
        m, own = self.model, _samples(self.d.metrics)
        found = {
            "dead_lettered": own("packages_dead_lettered_total"),
            "fail": own("packages_fail_total"),
            "success": own("packages_success_total"),
            **{o: own("packages_attempt_failures_total", {"outcome": o}) for o in ATTEMPTS},
        }
        wanted = {
            "dead_lettered": float(m.dead_lettered_total),
            "fail": float(m.fail_total),
            "success": float(m.success_total),
            **{o: float(m.attempt_failures[o]) for o in ATTEMPTS},
        }
        self.expect("process_counters", found, wanted, "the process counters")

    def check_causes(self, now: int, keys: dict[int, str | None]) -> None:
        dead = list(self.model.dead_letters())
        by_key = _groups(dead, lambda s: keys.get(s.id))
        self.expect("cause_grouping", by_key, _groups(dead, lambda s: s.cause), "causes (ids)")
        if not checked("cause_counts", "cause_facets", "cause_hours", "cause_example"):
            return
        for endpoint in (None, *ENDPOINTS):
            mine = [s for s in dead if endpoint in (None, s.endpoint)]
            query = urlencode({"limit": PAGE} | ({"endpoint": endpoint} if endpoint else {}))
            shown = self.api(f"/api/v1/dead-letters/causes?{query}")["causes"]
            view = f"the causes of {endpoint or 'every endpoint'}"
            found = {c["cause"]: c["count"] for c in shown}
            self.expect("cause_counts", found, dict(Counter(keys.get(s.id) for s in mine)), view)
            for cause in shown:
                held = [s for s in mine if keys.get(s.id) == cause["cause"]]
                what = f"{view}: {cause['pattern']!r}"
                self.check_facets(cause, held, what)
                bars = sparkline([s.dead_at for s in held if s.dead_at is not None], now)
                self.expect("cause_hours", cause["last_24_hours"], bars, f"{what}, per hour")
                example, ids = cause["example_scan_id"], sorted(s.id for s in held)
                self.expect("cause_example", example in ids, True, f"{what}: #{example} of {ids}")

    def check_facets(self, cause: dict[str, Any], held: list[Scan], what: str) -> None:
        """Each facet adds up to the cause's dead letters, value by value (a value may be
        named with its endpoint)."""
        for facet, attribute in (("queues", "queue"), ("kinds", "kind"), ("workers", "holder")):
            wanted = Counter(getattr(s, attribute) for s in held)
            if facet == "workers" and any(s.cause == REVOKED for s in held):
                # A revoked scan that was QUEUED ended without a worker: only bounded.
                total = sum(item["dead_letters"] for item in cause[facet])
                self.expect("cause_facets", total <= len(held), True, f"{what}: {cause[facet]}")
                continue
            found = _by_value(cause[facet], wanted)
            self.expect("cause_facets", found, dict(wanted), f"{what}: {facet} {cause[facet]}")

    def check_listing(self, keys: dict[int, str | None]) -> None:
        """The dead-letter listing's rows and count, unfiltered and under each filter."""
        if not checked("model", "list_counts"):
            return
        dead = list(self.model.dead_letters())
        for f in _views(keys, queues=True, causes=True):
            page = self.api(f"/api/v1/dead-letters?{urlencode(f | {'limit': str(PAGE)})}")
            wanted = sorted(s.id for s in dead if _matches(s, f, keys))
            found = sorted(item["scan_id"] for item in page["scans"])
            self.expect("model", found, wanted, f"the dead letters listed under {f}")
            self.expect("list_counts", page["count"], len(wanted), f"the listing's count, {f}")

    def check_overview(self, now: int) -> None:
        """The overview per endpoint; a QUEUED count may include or leave out a paused
        queue's, as long as a `paused` count shows which."""
        if not checked("overview_counts", "overview_oldest"):
            return
        overview = self.api("/api/v1/overview")
        totals: Counter[str] = Counter()
        for card in overview["endpoints"]:
            endpoint, counts = card["endpoint"], dict(card["counts"])
            totals.update(counts)
            wanted = _depths(self.model, now, endpoint)
            if "paused" not in counts:
                wanted["queued"] += wanted.pop("paused")
            self.expect("overview_counts", counts, wanted, f"the overview of {endpoint}")
            age, oldest = (
                card["oldest_queued_age_seconds"],
                self.model.oldest_due_age(now, endpoint),
            )
            self.expect("overview_oldest", age, oldest, f"the overview of {endpoint}: oldest due")
        found = overview["totals"]
        self.expect("overview_counts", found, {k: totals[k] for k in found}, "overview totals")

    def check_board(self, now: int, keys: dict[int, str | None]) -> None:
        """The Dead page under no filter and each queue: its pills (counted by the overview's
        totals, or under a queue by the rows), its 'N dead letters match' and 'Redrive all
        N…', and the endpoint cards every board page shows; the redrive confirmation under no
        filter and each cause; the Causes view, of every endpoint and of each. (An endpoint's
        pills and a cause's match count read the store as the overview and the listing do,
        held above per endpoint and per cause.)"""
        m = self.model
        for f in _views(keys, endpoints=False, queues=True):
            if not checked("board_cards", "board_pills", "board_dead_matched"):
                break
            html = self.board(f"/board?{urlencode({'status': 'dead'} | f)}")
            if not f:
                for endpoint in ENDPOINTS:
                    wanted = {k: str(n) for k, n in _depths(m, now, endpoint).items()}
                    found = _card(html, endpoint)
                    self.expect("board_cards", found, wanted, f"the card of {endpoint}")
            scans = [s for s in m.scans.values() if _matches(s, f, keys)]
            found = _pills(html)
            apart = "paused" in found  # a Paused pill, listing a paused queue's scans apart
            pills = {
                pill: str(sum(1 for s in scans if _in_pill(m, s, pill, now, apart=apart)))
                for pill in (*PILLS, "paused")
                if pill != "paused" or apart
            }
            self.expect("board_pills", found, pills, f"the pills under {f}")
            dead = int(pills["dead"])
            # A revoked endpoint's dead letters are never requeued, so the button offers the
            # others: "Redrive all N" when that is every match, "Redrive N" when it is fewer.
            redrivable = sum(
                1 for s in scans if s.dead_at is not None and s.endpoint not in m.revoked
            )
            what = f"the Dead page under {f}: 'N match' and 'Redrive (all) N'"
            wanted = (dead, redrivable or None, (redrivable == dead) if redrivable else None)
            self.expect("board_dead_matched", _matched(html), wanted, what)
        for f in _views(keys, endpoints=False, causes=True):
            if not checked("board_confirm"):
                break
            confirm = _confirm(self.board(f"/board/redrive?{urlencode({'status': 'dead'} | f)}"))
            redrivable = [s for s in m.dead_letters() if _matches(s, f, keys)]
            wanted_confirm = sum(1 for s in redrivable if s.endpoint not in m.revoked)
            self.expect("board_confirm", confirm, wanted_confirm, f"the confirmation under {f}")
        for one in (None, *ENDPOINTS):
            view = "board_causes" if one is None else "board_causes_by_endpoint"
            if not checked(view):
                continue
            mine = [s for s in m.dead_letters() if one in (None, s.endpoint)]
            html = self.board("/board/causes" + (f"?endpoint={one}" if one else ""))
            wanted_rows = dict(Counter(keys.get(s.id) for s in mine))
            self.expect(view, _cause_rows(html), wanted_rows, f"the Causes view of {one}")


# ---- the test ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", DATABASES)
def test_every_figure_follows_the_model(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run_state_machine_as_test(_machine(kind, request, tmp_path), settings=SETTINGS[kind])


# Days that broke a figure, each as short as found: replayed step by step on both databases
# with every figure checked after each step, so each stays covered whatever a random run tries.
A, B = (
    ("pypi", "default", "numpy", "scan", "source"),
    ("pypi", "priority", "left-pad", "sdist", "source"),
)
C, D = (
    ("pypi", "default", "requests", "scan", "owner"),
    ("pypi", "priority", "numpy", "sdist", "owner"),
)
TIMEOUT = "timeout after 900 ms"
KNOWN_DAYS: dict[str, list[tuple[Any, ...]]] = {
    "a queue paused while another's scans wait": [
        ("submit_backlog", [A, C]),
        ("work", "pypi", "w1", 1, []),
        ("pause_or_resume", "pypi", "default", True),
        ("report_held", 0, [("retryable", TIMEOUT)]),
        ("time_passes", 20, False),
        ("submit_one", B),
        ("time_passes", 5, False),
        ("pause_or_resume", "pypi", "default", False),
    ],
    "failures that differ only in their numbers": [
        ("submit_backlog", [A, B, C, D]),
        (
            "bad_round",
            "pypi",
            "w1",
            [
                TIMEOUT,
                "timeout after 150000 ms",
                "bad offset 0x1f3a in header",
                "bad offset 0x2b in header",
            ],
        ),
        (
            "bad_round",
            "pypi",
            "w2",
            [
                TIMEOUT,
                "timeout after 150000 ms",
                "bad offset 0x1f3a in header",
                "bad offset 0x2b in header",
            ],
        ),
    ],
    "dead letters of one cause redriven by id, by filter and by cause, and dead again": [
        ("submit_backlog", [A, B]),
        ("bad_round", "pypi", "w1", [TIMEOUT, TIMEOUT]),
        ("bad_round", "pypi", "w2", [TIMEOUT, TIMEOUT]),
        ("redrive_ids", [1], False),
        ("bad_round", "pypi", "w1", [TIMEOUT]),
        ("bad_round", "pypi", "w2", [TIMEOUT]),
        ("redrive_filter", None, "default"),
        ("redrive_cause", 0),
    ],
    "ended scans pruned past their retention": [
        ("submit_backlog", [A, B]),
        ("work", "pypi", "w1", 1, [("finished", TIMEOUT)]),
        ("bad_round", "pypi", "w1", [TIMEOUT]),
        ("bad_round", "pypi", "w2", [TIMEOUT]),
        ("time_passes", 37 * 3600, True),
    ],
    "a worker's failure leased back to it while another asks": [
        ("submit_backlog", [A]),
        ("work", "pypi", "w1", 1, []),
        ("work", "pypi", "w2", 1, []),
        ("report_held", 0, [("retryable", TIMEOUT)]),
        ("work", "pypi", "w1", 1, []),
    ],
    "an endpoint revoked": [
        ("submit_backlog", [A, ("npm", "default", "numpy", "scan", "source")]),
        ("bad_round", "pypi", "w1", [TIMEOUT]),
        ("bad_round", "pypi", "w2", [TIMEOUT]),
        ("work", "npm", "w1", 1, []),
        ("revoke", "npm"),
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("day", sorted(KNOWN_DAYS))
@pytest.mark.parametrize("kind", DATABASES)
def test_known_days(kind: str, day: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    machine = _machine(kind, request, tmp_path)()
    try:
        machine.figures()
        for name, *args in KNOWN_DAYS[day]:
            getattr(machine, name)(*args)
            machine.figures()
    finally:
        machine.teardown()


def _machine(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> type[FiguresMachine]:
    """The machine on `kind` of database, a fresh one for each example."""
    fresh = staticmethod(_databases(kind, request, tmp_path))
    return type(f"FiguresOn{kind.title()}", (FiguresMachine,), {"fresh": fresh})


def _databases(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Fresh:
    """A fresh database at head for each example, and how to drop it."""
    made = iter(range(10**6))

    def fresh() -> tuple[str, Callable[[], None]]:
        if kind == "sqlite":
            path = tmp_path / f"example-{next(made)}.db"
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
            return f"sqlite:///{path}", lambda: path.unlink(missing_ok=True)
        name = fresh_pg_database(request.getfixturevalue("pg_template"))
        return _pg_url(name), lambda: drop_pg_database(name)

    return fresh


# ---- the model's side of a figure --------------------------------------------------------

ATTEMPTS = ("failed", "lease_expired")  # packages_attempt_failures_total{outcome}


def _said(outcome: str) -> tuple[str, bool]:
    """A result's outcome as a worker sends it, and whether it asks for a retry."""
    return ("finished" if outcome == "finished" else "failed"), outcome == "retryable"


def _id(scan: Scan) -> int:
    return scan.id


def _pick(scans: list[Scan], pick: int) -> Scan:
    ordered = sorted(scans, key=_id)
    return ordered[pick % len(ordered)]


def _was_failed_by(failed: tuple[str, int] | None, worker: str, now: int) -> bool:
    """Whether `worker` failed (or let lapse) the scan's last attempt less than the bound ago."""
    return failed is not None and failed[0] == worker and now - failed[1] < RETRY_ELSEWHERE_US


def _views(
    keys: dict[int, str | None],
    *,
    endpoints: bool = True,
    queues: bool = False,
    causes: bool = False,
) -> list[Filter]:
    """The filters a figure is read under: none, each endpoint, each queue, each cause."""
    views: list[Filter] = [{}]
    if endpoints:
        views += [{"endpoint": e} for e in ENDPOINTS]
    if queues:
        views += [{"queue": q} for q in QUEUES]
    if causes:
        views += [{"cause": k} for k in sorted({k for k in keys.values() if k is not None})]
    return views


def _matches(scan: Scan, f: Filter, keys: dict[int, str | None]) -> bool:
    found = {"endpoint": scan.endpoint, "queue": scan.queue, "cause": keys.get(scan.id)}
    return all(found[field] == value for field, value in f.items())


def _in_pill(m: Model, scan: Scan, pill: str, now: int, *, apart: bool) -> bool:
    """Whether the pill's listing lists the scan: by status, plain failures and dead letters
    apart, and with `apart` (the board has a Paused pill) a paused queue's scans apart."""
    paused = apart and m.state(scan, now) == "paused"
    if pill in ("paused", "queued"):
        return paused if pill == "paused" else scan.status == QUEUED and not paused
    if pill in ("all", "pending"):
        return pill == "all" or scan.status == PENDING
    return scan.outcome == {"dead": "dead_lettered"}.get(pill, pill)


def _depths(m: Model, now: int, endpoint: str) -> dict[str, int]:
    """An endpoint's scans as its card counts them: live ones by state, a paused queue's
    apart, ended ones by outcome."""
    scans = list(m.select(endpoint=endpoint))
    states = Counter(m.state(s, now) for s in scans)
    ended = Counter(s.outcome for s in scans)
    return {
        "queued": states["queued"] + states["scheduled"],
        "paused": states["paused"],
        "pending": sum(1 for s in scans if s.status == PENDING),
        "finished": ended["finished"],
        "failed": ended["failed"],
        "dead": ended["dead_lettered"],
        "quarantined": states["quarantined"],
    }


def _groups(scans: list[Scan], key: Callable[[Scan], object]) -> list[list[int]]:
    """The scans' ids partitioned by `key`, in a stable order."""
    groups: dict[object, list[int]] = {}
    for scan in sorted(scans, key=_id):
        groups.setdefault(key(scan), []).append(scan.id)
    return sorted(groups.values())


Sample = Callable[..., float | None]  # a sample's value by name and labels (None: none)


def _samples(metrics: Metrics) -> Sample:
    """The registry's samples as they are now, collected once (each lookup of
    `get_sample_value` collects the whole registry)."""
    found = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for metric in metrics.registry.collect()
        for sample in metric.samples
    }

    def value(name: str, labels: dict[str, str] | None = None) -> float | None:
        return found.get((name, tuple(sorted((labels or {}).items()))))

    return value


def _paused_gauge(value: Sample, revoked: set[str]) -> dict[str, float]:
    """`mainframe_queue_paused` of every queue (no sample: 0) but a revoked endpoint's, which
    nothing pauses or resumes any more, where 1 and 0 are both defensible."""
    found = {}
    for endpoint in sorted(set(ENDPOINTS) - revoked):
        for queue in QUEUES:
            labels = {"endpoint": endpoint, "queue": queue}
            found[f"{endpoint}/{queue}"] = value("mainframe_queue_paused", labels) or 0.0
    return found


def _by_value(shown: list[dict[str, Any]], wanted: Counter[Any]) -> dict[Any, int]:
    """A facet's hits per value the model knows: a value shown bare or named with its
    endpoint (`pypi/default`) counts for the bare one; one the model does not know is kept."""
    found: Counter[Any] = Counter()
    for item in shown:
        value = item["value"]
        known = [
            w for w in wanted if w is not None and re.search(rf"(?<!\w){re.escape(w)}(?!\w)", value)
        ]
        found[known[0] if len(known) == 1 else value] += item["dead_letters"]
    return dict(found)


# ---- reading the board's pages -----------------------------------------------------------


def _pills(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-pill="(\w+)">([^<]*)</span>', html))


def _card(html: str, endpoint: str) -> dict[str, str]:
    found = re.search(rf'<h3><a href="/board/endpoints/{endpoint}">.*?</dl>', html, re.S)
    assert found is not None, f"no card of {endpoint}"
    return dict(re.findall(r"<dt>(\w+)</dt><dd>([^<]*)</dd>", found.group(0)))


def _matched(html: str) -> tuple[int | None, int | None, bool | None]:
    """The Dead page's 'N dead letters match', the N of its 'Redrive (all) N…' (None: not
    shown), and whether it says 'all' (None: not shown)."""
    matched = re.search(r'<strong class="matched">(\d+)</strong>', html)
    link = re.search(r"Redrive (all )?(\d+) dead letter", html)
    return (
        None if matched is None else int(matched.group(1)),
        None if link is None else int(link.group(2)),
        None if link is None else link.group(1) is not None,
    )


def _confirm(html: str) -> int:
    """The count a redrive's confirmation states and sends."""
    found = re.search(r'name="confirm" value="(\d+)"', html)
    if found is None:
        assert "No dead letters to redrive" in html, html
        return 0
    return int(found.group(1))


CAUSE_ROW = re.compile(
    r'cause=(\w+)"><bdi>.*?</bdi></a></td>\s*<td data-label="Dead letters" class="count">(\d+)<',
    re.S,
)


def _cause_rows(html: str) -> dict[str | None, int]:
    """The Causes view's rows: each cause's key and count."""
    return {key: int(n) for key, n in CAUSE_ROW.findall(html)}
