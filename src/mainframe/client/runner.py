"""The worker loop behind `mainframe worker`: lease scans, run a command for each, report.

Each command is run by `command.run_command`, whose module says what its exit code means.
While scans are held, a `LeaseKeeper` heartbeats their leases; a scan whose lease is lost is
not reported. With a batch, the commands run one after another and their results are reported
together. Results are reported with `?next=<batch>` (complete-and-fetch), so the reply carries
the next scans and a worker makes one request per batch; it polls only when it holds nothing:
at start, after a reply without jobs, or after an error. With fetching off it polls before each
batch. SIGTERM or a first Ctrl-C stops leasing: the current command runs to completion and the
batch so far is reported (fetching nothing), while scans of the batch not yet started are left
unreported, so their leases lapse and the server hands them on. A second Ctrl-C aborts at once.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType

import httpx
import structlog
from structlog.typing import FilteringBoundLogger

from mainframe.client.command import report_for_exit, run_command
from mainframe.client.heartbeat import LeaseKeeper, log_fields
from mainframe.client.idle import LaterScans, idle_pause
from mainframe.client.sdk import (
    Client,
    ItemStatus,
    Job,
    MainframeError,
    ResultReport,
)
from mainframe.client.tally import Fate, WorkerTally, fate_of
from mainframe.clock import Clock, SystemClock, parse_rfc3339
from mainframe.contract.limits import MAX_LEASE_BATCH
from mainframe.lifecycle.backoff import EQUAL_JITTER, Backoff

# A finished result is kept and sent again while the server is unreachable or failing, for
# up to this long in all: the server still takes it after an outage unless the scan was
# handed to someone else meanwhile (then it answers 409).
REPORT_PATIENCE = 900.0
# Report retries: the first waits 0.5-1 s, then about twice as long each time, at most a
# minute; equal jitter, so a fleet cut off together does not come back in lockstep and a retry
# never comes at once (docs/reliability.md).
REPORT_BACKOFF = Backoff(base=1.0, cap=60.0, jitter=EQUAL_JITTER)
# The same for polls the server could not answer, starting at 1-2 s.
LEASE_BACKOFF = Backoff(base=2.0, cap=60.0, jitter=EQUAL_JITTER)

Done = list[tuple[Job, ResultReport]]  # the results of a batch, ready to report


class ServerUnreachable(Exception):
    """The server answered no poll for longer than the worker's `give_up_after`."""

    def __init__(self, seconds: float, error: str) -> None:
        super().__init__(f"the server answered no poll for {seconds:g} s (last: {error})")
        self.seconds = seconds
        self.error = error


@dataclass
class _Worker:
    client: Client
    keeper: LeaseKeeper
    command: Sequence[str]
    batch: int
    fetch: bool  # report with `?next=`, taking the next scans in the reply
    poll_interval: float
    max_jobs: int | None
    idle_exit: bool
    sleep: Callable[[float], None]
    log: FilteringBoundLogger
    stop: threading.Event
    rng: random.Random
    idle_wait: float  # with idle_exit: the longest to wait for scans expected later
    give_up_after: float | None  # stop once no poll was answered for this long
    now: Callable[[], float]  # seconds since the epoch, as the server's stamps are
    later: LaterScans = field(default_factory=LaterScans)
    tally: WorkerTally = field(default_factory=WorkerTally)
    idle_since: float | None = None
    unanswered_since: float | None = None  # the first poll of the current outage
    last_error: str = ""

    def run(self) -> WorkerTally:
        failures = 0
        jobs: list[Job] = []  # leased and not yet run: from a poll or from a result's reply
        while not self.stop.is_set() and self._wanted(self.tally.attempts) > 0:
            if not jobs:
                polled = self._lease(self._wanted(self.tally.attempts))
                if polled is None:
                    self._give_up_if_too_long()
                    failures += 1
                    self.sleep(LEASE_BACKOFF.delay(failures, self.rng.random()))
                    continue
                failures = 0
                self.unanswered_since = None
                if not polled:
                    pause = self._idle_pause() if self.idle_exit else self.poll_interval
                    if pause is None:
                        break
                    self.sleep(pause)
                    continue
                self.idle_since = None
                jobs = polled
            self.later.leased(job.scan_id for job in jobs)
            jobs = self._run_batch(jobs)
        for job in jobs:
            # Fetched, then a stop came: the leases lapse and the server hands the scans on.
            self.log.warning("job_abandoned", **log_fields(job))
            self.tally.unreported(job.scan_id)
        return self.tally

    def _wanted(self, reported: int) -> int:
        """How many scans to take next: the batch, or fewer near `max_jobs` (attempts
        reported, however many of them were the same scan's)."""
        return self.batch if self.max_jobs is None else min(self.batch, self.max_jobs - reported)

    def _lease(self, wanted: int) -> list[Job] | None:
        """Lease scans; None when the server could not be reached or failed (try again later)."""
        started = self.now()
        try:
            return self.client.lease(wanted)
        except httpx.TransportError as exc:
            self.last_error = str(exc) or type(exc).__name__
            self.log.warning("lease_failed", error=self.last_error)
        except MainframeError as exc:
            if exc.status < 500:
                raise  # a bad token or a revoked endpoint: polling again will not help
            self.last_error = f"HTTP {exc.status}: {exc}"
            self.log.warning("lease_failed", status=exc.status, error=str(exc))
        if self.unanswered_since is None:
            self.unanswered_since = started
        return None

    def _give_up_if_too_long(self) -> None:
        if self.give_up_after is None or self.unanswered_since is None:
            return
        if self.now() - self.unanswered_since >= self.give_up_after:
            raise ServerUnreachable(self.give_up_after, self.last_error)

    def _idle_pause(self) -> float | None:
        """With idle_exit: how long to sleep before polling again, or None to stop now."""
        now = self.now()
        if self.idle_since is None:
            self.idle_since = now
        due = self.later.next_due(now)
        pause = idle_pause(
            now=now, idle_since=self.idle_since, due=due, bound=self.idle_wait,
            poll_interval=self.poll_interval,
        )  # fmt: skip
        if pause is None and due is not None:
            self.log.warning(
                "idle_exit_before_retry",
                scans=len(self.later.due),
                due_in=round(due - now, 1),
                idle_wait=self.idle_wait,
            )
        elif pause is not None and now == self.idle_since:
            self.log.info(
                "idle_waiting_for_retries",
                scans=len(self.later.due),
                due_in=round(due - now, 1) if due else 0,
            )
        return pause

    def _run_batch(self, jobs: list[Job]) -> list[Job]:
        """Run `jobs` and report them, tallying each; return the jobs the reply leased."""
        for job in jobs:
            self.keeper.hold(job)
        done: Done = []
        answered: set[int] = set()
        try:
            for index, job in enumerate(jobs):
                if self.stop.is_set():
                    for skipped in jobs[index:]:
                        self.log.warning("job_abandoned", **log_fields(skipped))
                    break
                report = self._run_job(job)
                if report is not None:
                    done.append((job, report))
            # Still held while the report is retried, so heartbeats keep the leases alive.
            answered, fetched = self._report(done, self._fetch_count(len(done)))
            return fetched
        finally:
            for job in jobs:
                self.keeper.release(job)
                if job.scan_id not in answered:
                    self.tally.unreported(job.scan_id)

    def _run_job(self, job: Job) -> ResultReport | None:
        if self.keeper.is_lost(job):
            return None
        self.log.info("job_started", **log_fields(job))
        started = time.monotonic()
        try:
            returncode, stdout, stderr = run_command(self.command, job, self.keeper)
        except OSError as exc:
            # Every later scan would fail the same way: stop rather than spend their budgets.
            self.log.error("command_start_failed", error=str(exc), **log_fields(job))
            self.stop.set()
            return None
        if self.keeper.is_lost(job):
            return None
        report = report_for_exit(returncode, stdout, stderr)
        self.log.info(
            "job_ran",
            outcome=report.outcome,
            exit_code=returncode,
            seconds=round(time.monotonic() - started, 3),
            **log_fields(job),
        )
        return report

    def _fetch_count(self, reporting: int) -> int | None:
        """The `next` to report with once these `reporting` results are in too; None:
        fetching is off."""
        if not self.fetch:
            return None
        return 0 if self.stop.is_set() else max(0, self._wanted(self.tally.attempts + reporting))

    def _report(self, done: Done, fetch: int | None) -> tuple[set[int], list[Job]]:
        """Report results, retrying what the server may not have received; tally the answered
        and return their scan ids and the jobs leased with them."""
        waited = 0.0
        attempt = 0
        while True:
            done = [(job, report) for job, report in done if not self.keeper.is_lost(job)]
            if not done:
                return set(), []
            attempt += 1
            try:
                statuses, fetched = self._send(done, fetch)
            except (httpx.TransportError, MainframeError) as exc:
                if isinstance(exc, MainframeError) and exc.status < 500:
                    raise
                delay = REPORT_BACKOFF.delay(attempt, self.rng.random())
                if waited + delay > REPORT_PATIENCE:
                    self.log.error("report_abandoned", attempt=attempt, error=str(exc))
                    return set(), []  # the leases lapse and the server hands the scans on
                self.log.warning("report_failed", attempt=attempt, retry_in=delay, error=str(exc))
                self.sleep(delay)
                waited += delay
                continue
            for (job, report), status in zip(done, statuses, strict=True):
                self._log_status(job, report, status, retried=attempt > 1)
            return {job.scan_id for job, _ in done}, fetched

    def _send(self, done: Done, fetch: int | None) -> tuple[list[ItemStatus], list[Job]]:
        """Post the results (with `next` unless fetching is off); the statuses and new jobs."""
        if len(done) == 1:
            return self._send_one(*done[0], fetch)
        if fetch is None:
            return self.client.report_many(done), []
        answer = self.client.complete_many(done, next=fetch)
        return answer.statuses, answer.jobs

    def _send_one(
        self, job: Job, report: ResultReport, fetch: int | None
    ) -> tuple[list[ItemStatus], list[Job]]:
        try:
            if fetch is None:
                scan = self.client.report(job, report)
                return [ItemStatus(job.scan_id, 200, scan=scan)], []
            completion = self.client.complete(job, report, next=fetch)
        except MainframeError as exc:
            if not 400 <= exc.status < 500 or exc.status == 401:
                raise
            # Like an item of a batch report: this result is refused, the worker goes on.
            return [ItemStatus.refused(job.scan_id, exc)], []
        return [ItemStatus(job.scan_id, 200, scan=completion.scan)], completion.jobs

    def _log_status(
        self, job: Job, report: ResultReport, status: ItemStatus, *, retried: bool
    ) -> None:
        if status.accepted:
            self.log.info("job_reported", outcome=report.outcome, **log_fields(job))
            self._note_where_it_went(job, status.scan or {})
            self.tally.answered(job.scan_id, fate_of(report.outcome, report.retryable, status.scan))
            return
        self.tally.answered(job.scan_id, Fate.REFUSED)
        # After a retry, a 409 most likely means the first try landed after all (a server that
        # answers repeats of a completion as the first one does not say 409 then).
        self.log.warning(
            "job_rejected",
            status=status.status,
            error=status.error,
            detail=status.detail,
            after_retry=retried,
            **log_fields(job),
        )

    def _note_where_it_went(self, job: Job, scan: dict[str, object]) -> None:
        """A result's reply says where the scan went: a dead letter is told in a line of its
        own; a retry this worker may lease later is remembered for `idle_exit`."""
        if scan.get("dead_lettered_at"):
            self.log.warning(
                "scan_dead_lettered",
                reason=scan.get("fail_reason"),
                attempt_count=scan.get("attempt_count"),
                **log_fields(job),
            )
        elif scan.get("status") == "QUEUED":
            at = parse_rfc3339(str(scan.get("available_at") or ""))
            self.later.expect(job.scan_id, self.now() if at is None else at / 1_000_000)


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Turn SIGTERM and a first SIGINT into a stop request; a second SIGINT still interrupts."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def request_stop(signum: int, frame: FrameType | None) -> None:
        # No logging here: a handler that writes could re-enter a half-done write to stdout.
        if signum == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {
        signum: signal.signal(signum, request_stop) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)


def run_worker(
    url: str,
    token: str,
    command: list[str],
    *,
    batch: int = 1,
    fetch: bool = True,
    poll_interval: float = 2.0,
    heartbeat_interval: float | None = None,
    max_jobs: int | None = None,
    idle_exit: bool = False,
    idle_wait: float = 600.0,
    give_up_after: float | None = None,
    client: Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: FilteringBoundLogger | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    now: Callable[[], float] = time.time,
) -> WorkerTally:
    """Lease scans from `url` and run `command` for each until stopped; return what it did:
    the attempts reported and where each scan it worked on stood after its last one.

    Stops after `max_jobs` attempts reported (a scan retried on this worker counts once per
    attempt), on SIGTERM/Ctrl-C, or with `idle_exit` once a poll finds
    nothing and no retry it scheduled is due within `idle_wait` seconds of going idle; raises
    ServerUnreachable once no poll was answered for `give_up_after` seconds.
    With `fetch` each result's reply brings the next scans; without, the worker polls for them.
    """
    if not command:
        raise ValueError("command must not be empty")
    if not 1 <= batch <= MAX_LEASE_BATCH:
        raise ValueError(f"batch must be between 1 and {MAX_LEASE_BATCH}, got {batch}")
    if shutil.which(command[0]) is None:
        raise FileNotFoundError(f"command not found or not executable: {command[0]}")
    log = log if log is not None else structlog.get_logger()
    http = client if client is not None else Client(url, token, sleep=sleep)
    stop = threading.Event()
    rng = rng or random.Random()
    log.info("worker_started", url=url, command=command, batch=batch, fetch=fetch)
    try:
        with (
            _stop_on_signals(stop),
            LeaseKeeper(
                http, interval=heartbeat_interval, clock=clock or SystemClock(), log=log, rng=rng
            ) as keeper,
        ):
            worker = _Worker(
                http,
                keeper,
                command,
                batch,
                fetch,
                poll_interval,
                max_jobs,
                idle_exit,
                sleep,
                log,
                stop,
                rng,
                idle_wait,
                give_up_after,
                now,
            )
            tally = worker.run()
    finally:
        if client is None:
            http.close()
    log.info("worker_stopped", **tally.log_fields(), stop_requested=stop.is_set())
    return tally
