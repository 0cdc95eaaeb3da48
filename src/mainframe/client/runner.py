"""The worker loop behind `mainframe worker`: lease scans, run a command for each, report.

The command learns its scan from MAINFRAME_SCAN_* environment variables, and its exit code
says how the attempt went:

- 0: finished.
- 100 (EXIT_PERMANENT_FAILURE): failed for good (retryable=false); the scan can never succeed,
  e.g. the package is malformed, so the server moves it to FAILED at once.
- 75 (EX_TEMPFAIL from sysexits.h) and any other non-zero exit, or death by a signal: failed,
  retryable. A crash is no proof that the scan is hopeless, and the server's attempt budget
  bounds the retries anyway.

The last ~2 KiB of stderr become the summary (after the exit status, for a failure) and the
last non-empty line of stdout, cut to 1 KiB, the artifact.

While scans are held, a background thread heartbeats their leases. A 409 on a heartbeat means
the scan now belongs to someone else: its command's process group is killed and nothing is
reported. With a batch, the commands run one after another and their results are reported
together. SIGTERM or a first Ctrl-C stops leasing: the current command runs to completion and
the batch so far is reported, while scans of the batch not yet started are left unreported, so
their leases lapse and the server hands them on. A second Ctrl-C aborts at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import IO, Self

import httpx
import structlog
from structlog.typing import FilteringBoundLogger

from mainframe.client.sdk import (
    MAX_BATCH,
    Client,
    ItemStatus,
    Job,
    MainframeError,
    ResultReport,
    StaleAssignment,
    parse_timestamp,
)
from mainframe.clock import Clock, SystemClock

EXIT_TEMPFAIL = 75  # sysexits.h EX_TEMPFAIL: a temporary failure, worth another attempt
EXIT_PERMANENT_FAILURE = 100  # Mainframe's convention: this scan can never succeed
SUMMARY_BYTES = 2048  # tail of stderr kept as the summary
ARTIFACT_BYTES = 1024  # longest artifact (last stdout line) reported
STDOUT_TAIL_BYTES = 8192  # tail of stdout searched for that last line
REPORT_ATTEMPTS = 3  # tries of one report on transport errors or a 5xx
REPORT_BACKOFF = 1.0  # seconds before the first report retry, doubled before each further one
MIN_HEARTBEAT_INTERVAL = 0.1  # seconds; floor of the default interval near a lease's end
HEARTBEAT_RETRY_DELAY = 1.0  # seconds; least wait after a heartbeat the server did not answer


def job_environment(job: Job) -> dict[str, str]:
    """The variables that tell the command which scan it works on."""
    return {
        "MAINFRAME_SCAN_ID": str(job.scan_id),
        "MAINFRAME_SCAN_NAME": job.name,
        "MAINFRAME_SCAN_VERSION": job.version,
        "MAINFRAME_SCAN_KIND": job.kind,
        "MAINFRAME_SCAN_QUEUE": job.queue,
        "MAINFRAME_SCAN_ATTEMPT": str(job.attempt),
        "MAINFRAME_SCAN_PAYLOAD": json.dumps(job.payload),
    }


def report_for_exit(returncode: int, stdout: bytes, stderr: bytes) -> ResultReport:
    """Turn a command's exit status and output into the result to report (see module doc)."""
    summary = stderr[-SUMMARY_BYTES:].decode(errors="replace").strip() or None
    artifact = _last_line(stdout[-STDOUT_TAIL_BYTES:])
    if returncode == 0:
        return ResultReport("finished", summary=summary, artifact=artifact)
    status = _describe_exit(returncode)
    return ResultReport(
        "failed",
        retryable=returncode != EXIT_PERMANENT_FAILURE,
        summary=f"{status}\n{summary}" if summary else status,
        artifact=artifact,
    )


def _last_line(stdout: bytes) -> str | None:
    for line in reversed(stdout.splitlines()):
        if line.strip():
            return line.strip()[:ARTIFACT_BYTES].decode(errors="ignore")
    return None


def _describe_exit(returncode: int) -> str:
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


@dataclass
class _Held:
    job: Job
    expires_at: str
    due: float  # time.monotonic() of the next heartbeat
    on_lost: Callable[[], None] | None = None
    lost: bool = False


class LeaseKeeper:
    """Heartbeats every held lease from one background thread; a 409 marks the lease lost."""

    def __init__(
        self,
        client: Client,
        *,
        interval: float | None,
        clock: Clock,
        log: FilteringBoundLogger,
    ) -> None:
        self._client = client
        self._interval = interval
        self._clock = clock
        self._log = log
        self._held: dict[int, _Held] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mainframe-heartbeat", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join()

    def hold(self, job: Job) -> None:
        with self._cond:
            due = self._next_due(job.lease_expires_at)
            self._held[job.scan_id] = _Held(job, job.lease_expires_at, due)
            self._cond.notify()

    def release(self, job: Job) -> None:
        with self._cond:
            self._held.pop(job.scan_id, None)

    def is_lost(self, job: Job) -> bool:
        with self._cond:
            held = self._held.get(job.scan_id)
            return held is not None and held.lost

    def watch(self, job: Job, on_lost: Callable[[], None]) -> None:
        """Call `on_lost` (at once, if already lost) when the lease of `job` is lost."""
        with self._cond:
            held = self._held[job.scan_id]
            held.on_lost = on_lost
            if held.lost:
                on_lost()

    def unwatch(self, job: Job) -> None:
        with self._cond:
            held = self._held.get(job.scan_id)
            if held is not None:
                held.on_lost = None

    def _next_due(self, expires_at: str, *, least: float = 0.0) -> float:
        if self._interval is not None:
            period = self._interval
        else:
            expires_us = parse_timestamp(expires_at).timestamp() * 1_000_000
            left = (expires_us - self._clock.now_us()) / 1_000_000
            period = max(MIN_HEARTBEAT_INTERVAL, left / 3)
        return time.monotonic() + max(period, least)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                live = [held for held in self._held.values() if not held.lost]
                due = [held for held in live if held.due <= now]
                if not due:
                    next_due = min((held.due for held in live), default=None)
                    self._cond.wait(None if next_due is None else next_due - now)
                    continue
            for held in due:
                self._beat(held)

    def _beat(self, held: _Held) -> None:
        try:
            expires_at = self._client.heartbeat(held.job)
        except StaleAssignment as exc:
            self._lose(held, exc.code)
            return
        except (MainframeError, httpx.TransportError) as exc:
            if isinstance(exc, MainframeError) and exc.status == 404:
                self._lose(held, "unknown_scan")
                return
            self._log.warning("heartbeat_failed", error=str(exc), **_fields(held.job))
            with self._cond:
                held.due = self._next_due(held.expires_at, least=HEARTBEAT_RETRY_DELAY)
            return
        with self._cond:
            held.expires_at = expires_at
            held.due = self._next_due(expires_at)

    def _lose(self, held: _Held, code: str) -> None:
        with self._cond:
            if self._held.get(held.job.scan_id) is not held:
                return  # released meanwhile: reported or abandoned, nothing to stop
            held.lost = True
            running = held.on_lost is not None
            if held.on_lost is not None:
                # Under the lock, so the command cannot be unwatched (and its pid reaped) mid-kill.
                held.on_lost()
        self._log.warning("job_lost", code=code, killed=running, **_fields(held.job))


def _fields(job: Job) -> dict[str, object]:
    return {
        "scan_id": job.scan_id,
        "name": job.name,
        "version": job.version,
        "attempt": job.attempt,
    }


def _run_command(command: Sequence[str], job: Job, keeper: LeaseKeeper) -> tuple[int, bytes, bytes]:
    """Run `command` for `job` until it exits or its lease is lost; return code and output tails."""
    env = {**os.environ, **job_environment(job)}
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        # Files, not pipes: output of any size cannot block the command or fill our memory.
        # A session of its own keeps Ctrl-C away from the command and lets us kill its children.
        process = subprocess.Popen(
            list(command),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            keeper.watch(job, lambda: _kill_group(process))
            returncode = process.wait()
        finally:
            keeper.unwatch(job)
            if process.poll() is None:
                _kill_group(process)
                process.wait()
        return returncode, _tail(stdout, STDOUT_TAIL_BYTES), _tail(stderr, SUMMARY_BYTES)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _tail(file: IO[bytes], limit: int) -> bytes:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - limit))
    return file.read()


@dataclass
class _Worker:
    client: Client
    keeper: LeaseKeeper
    command: Sequence[str]
    batch: int
    poll_interval: float
    max_jobs: int | None
    idle_exit: bool
    sleep: Callable[[float], None]
    log: FilteringBoundLogger
    stop: threading.Event

    def run(self) -> int:
        processed = 0
        while not self.stop.is_set() and (self.max_jobs is None or processed < self.max_jobs):
            wanted = (
                self.batch if self.max_jobs is None else min(self.batch, self.max_jobs - processed)
            )
            jobs = self._lease(wanted)
            if jobs:
                processed += self._run_batch(jobs)
            elif jobs is not None and self.idle_exit:
                break
            else:
                self.sleep(self.poll_interval)
        return processed

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

    def _run_batch(self, jobs: list[Job]) -> int:
        for job in jobs:
            self.keeper.hold(job)
        done: list[tuple[Job, ResultReport]] = []
        try:
            for index, job in enumerate(jobs):
                if self.stop.is_set():
                    for skipped in jobs[index:]:
                        self.log.warning("job_abandoned", **_fields(skipped))
                    break
                report = self._run_job(job)
                if report is not None:
                    done.append((job, report))
            done = [(job, report) for job, report in done if not self.keeper.is_lost(job)]
        finally:
            for job in jobs:
                self.keeper.release(job)
        return self._report(done)

    def _run_job(self, job: Job) -> ResultReport | None:
        if self.keeper.is_lost(job):
            return None
        self.log.info("job_started", **_fields(job))
        started = time.monotonic()
        try:
            returncode, stdout, stderr = _run_command(self.command, job, self.keeper)
        except OSError as exc:
            # Every later scan would fail the same way: stop rather than spend their budgets.
            self.log.error("command_start_failed", error=str(exc), **_fields(job))
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
            **_fields(job),
        )
        return report

    def _report(self, done: list[tuple[Job, ResultReport]]) -> int:
        """Report results, retrying what the server may not have received; count the answered."""
        if not done:
            return 0
        delay = REPORT_BACKOFF
        for attempt in range(1, REPORT_ATTEMPTS + 1):
            try:
                statuses = self._send(done)
            except (httpx.TransportError, MainframeError) as exc:
                if isinstance(exc, MainframeError) and exc.status < 500:
                    raise
                self.log.warning("report_failed", attempt=attempt, error=str(exc))
                if attempt == REPORT_ATTEMPTS:
                    return 0  # the leases lapse and the server hands the scans on
                self.sleep(delay)
                delay *= 2
                continue
            for (job, report), status in zip(done, statuses, strict=True):
                self._log_status(job, report, status, retried=attempt > 1)
            return len(statuses)
        return 0

    def _send(self, done: list[tuple[Job, ResultReport]]) -> list[ItemStatus]:
        if len(done) > 1:
            return self.client.report_many(done)
        job, report = done[0]
        try:
            self.client.report(job, report)
        except MainframeError as exc:
            if not 400 <= exc.status < 500 or exc.status == 401:
                raise
            # Like an item of a batch report: this result is refused, the worker goes on.
            return [ItemStatus.refused(job.scan_id, exc)]
        return [ItemStatus(job.scan_id, 200)]

    def _log_status(
        self, job: Job, report: ResultReport, status: ItemStatus, *, retried: bool
    ) -> None:
        if status.accepted:
            self.log.info("job_reported", outcome=report.outcome, **_fields(job))
            return
        # After a retry, a 409 most likely means the first try landed after all.
        self.log.warning(
            "job_rejected",
            status=status.status,
            error=status.error,
            detail=status.detail,
            after_retry=retried,
            **_fields(job),
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
    poll_interval: float = 2.0,
    heartbeat_interval: float | None = None,
    max_jobs: int | None = None,
    idle_exit: bool = False,
    client: Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: FilteringBoundLogger | None = None,
    clock: Clock | None = None,
) -> int:
    """Lease scans from `url` and run `command` for each until stopped; return results reported.

    Stops after `max_jobs` results, at the first empty poll with `idle_exit`, or on SIGTERM/Ctrl-C.
    """
    if not command:
        raise ValueError("command must not be empty")
    if not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"batch must be between 1 and {MAX_BATCH}, got {batch}")
    if shutil.which(command[0]) is None:
        raise FileNotFoundError(f"command not found or not executable: {command[0]}")
    log = log if log is not None else structlog.get_logger()
    http = client if client is not None else Client(url, token, sleep=sleep)
    stop = threading.Event()
    log.info("worker_started", url=url, command=command, batch=batch)
    try:
        with (
            _stop_on_signals(stop),
            LeaseKeeper(
                http, interval=heartbeat_interval, clock=clock or SystemClock(), log=log
            ) as keeper,
        ):
            worker = _Worker(
                http, keeper, command, batch, poll_interval, max_jobs, idle_exit, sleep, log, stop
            )
            processed = worker.run()
    finally:
        if client is None:
            http.close()
    log.info("worker_stopped", processed=processed, stop_requested=stop.is_set())
    return processed
