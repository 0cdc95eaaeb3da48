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
from dataclasses import dataclass
from types import FrameType

import httpx
import structlog
from structlog.typing import FilteringBoundLogger

from mainframe.client.backoff import Backoff
from mainframe.client.command import report_for_exit, run_command
from mainframe.client.heartbeat import LeaseKeeper, log_fields
from mainframe.client.sdk import (
    Client,
    ItemStatus,
    Job,
    MainframeError,
    ResultReport,
)
from mainframe.clock import Clock, SystemClock
from mainframe.contract.limits import MAX_LEASE_BATCH

# A finished result is kept and sent again while the server is unreachable or failing, for
# up to this long in all: the server still takes it after an outage unless the scan was
# handed to someone else meanwhile (then it answers 409).
REPORT_PATIENCE = 900.0
REPORT_BACKOFF = 1.0  # the first report retry waits 0.5-1 s, then about twice as long each time
LEASE_BACKOFF = 2.0  # the same for polls the server could not answer
MAX_BACKOFF = 60.0

Done = list[tuple[Job, ResultReport]]  # the results of a batch, ready to report


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

    def run(self) -> int:
        processed = failures = 0
        lease_backoff = Backoff(LEASE_BACKOFF, MAX_BACKOFF, self.rng)
        jobs: list[Job] = []  # leased and not yet run: from a poll or from a result's reply
        while not self.stop.is_set() and self._wanted(processed) > 0:
            if not jobs:
                polled = self._lease(self._wanted(processed))
                if polled is None:
                    self.sleep(lease_backoff.delay(failures))
                    failures += 1
                    continue
                failures = 0
                if not polled and self.idle_exit:
                    break
                if not polled:
                    self.sleep(self.poll_interval)
                    continue
                jobs = polled
            reported, jobs = self._run_batch(jobs, processed)
            processed += reported
        for job in jobs:
            # Fetched, then a stop came: the leases lapse and the server hands the scans on.
            self.log.warning("job_abandoned", **log_fields(job))
        return processed

    def _wanted(self, processed: int) -> int:
        """How many scans to take next: the batch, or fewer near `max_jobs`."""
        return self.batch if self.max_jobs is None else min(self.batch, self.max_jobs - processed)

    def _lease(self, wanted: int) -> list[Job] | None:
        """Lease scans; None when the server could not be reached or failed (try again later)."""
        try:
            return self.client.lease(wanted)
        except httpx.TransportError as exc:
            self.log.warning("lease_failed", error=str(exc))
        except MainframeError as exc:
            if exc.status < 500:
                raise  # a bad token or a revoked endpoint: polling again will not help
            self.log.warning("lease_failed", status=exc.status, error=str(exc))
        return None

    def _run_batch(self, jobs: list[Job], processed: int) -> tuple[int, list[Job]]:
        """Run `jobs` and report them; return how many results were answered and the jobs
        the reply leased."""
        for job in jobs:
            self.keeper.hold(job)
        done: Done = []
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
            return self._report(done, self._fetch_count(processed + len(done)))
        finally:
            for job in jobs:
                self.keeper.release(job)

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

    def _fetch_count(self, processed: int) -> int | None:
        """The `next` to report with once `processed` results are in; None: fetching is off."""
        if not self.fetch:
            return None
        return 0 if self.stop.is_set() else max(0, self._wanted(processed))

    def _report(self, done: Done, fetch: int | None) -> tuple[int, list[Job]]:
        """Report results, retrying what the server may not have received; count the answered
        and return the jobs leased with them."""
        backoff = Backoff(REPORT_BACKOFF, MAX_BACKOFF, self.rng)
        waited = 0.0
        attempt = 0
        while True:
            done = [(job, report) for job, report in done if not self.keeper.is_lost(job)]
            if not done:
                return 0, []
            attempt += 1
            try:
                statuses, fetched = self._send(done, fetch)
            except (httpx.TransportError, MainframeError) as exc:
                if isinstance(exc, MainframeError) and exc.status < 500:
                    raise
                delay = backoff.delay(attempt - 1)
                if waited + delay > REPORT_PATIENCE:
                    self.log.error("report_abandoned", attempt=attempt, error=str(exc))
                    return 0, []  # the leases lapse and the server hands the scans on
                self.log.warning("report_failed", attempt=attempt, retry_in=delay, error=str(exc))
                self.sleep(delay)
                waited += delay
                continue
            for (job, report), status in zip(done, statuses, strict=True):
                self._log_status(job, report, status, retried=attempt > 1)
            return len(statuses), fetched

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
                self.client.report(job, report)
                return [ItemStatus(job.scan_id, 200)], []
            jobs = self.client.complete(job, report, next=fetch).jobs
        except MainframeError as exc:
            if not 400 <= exc.status < 500 or exc.status == 401:
                raise
            # Like an item of a batch report: this result is refused, the worker goes on.
            return [ItemStatus.refused(job.scan_id, exc)], []
        return [ItemStatus(job.scan_id, 200)], jobs

    def _log_status(
        self, job: Job, report: ResultReport, status: ItemStatus, *, retried: bool
    ) -> None:
        if status.accepted:
            self.log.info("job_reported", outcome=report.outcome, **log_fields(job))
            return
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
    client: Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: FilteringBoundLogger | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
) -> int:
    """Lease scans from `url` and run `command` for each until stopped; return results reported.

    Stops after `max_jobs` results, at the first empty poll with `idle_exit`, or on SIGTERM/Ctrl-C.
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
    log.info("worker_started", url=url, command=command, batch=batch, fetch=fetch)
    try:
        with (
            _stop_on_signals(stop),
            LeaseKeeper(
                http, interval=heartbeat_interval, clock=clock or SystemClock(), log=log
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
                rng or random.Random(),
            )
            processed = worker.run()
    finally:
        if client is None:
            http.close()
    log.info("worker_stopped", processed=processed, stop_requested=stop.is_set())
    return processed
