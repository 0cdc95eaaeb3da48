"""Run the command for one scan and turn how it ended into the result to report.

The command learns its scan from MAINFRAME_SCAN_* environment variables, and its exit code
says how the attempt went:

- 0: finished.
- 100 (EXIT_PERMANENT_FAILURE): failed for good (retryable=false); the scan can never succeed,
  e.g. the package is malformed, so the server moves it to FAILED at once.
- 75 (EX_TEMPFAIL from sysexits.h) and any other non-zero exit, or death by a signal: failed,
  retryable. A crash is no proof that the scan is hopeless, and the server's attempt budget
  bounds the retries anyway.

The last ~2 KiB of stderr become the summary (after the exit status, for a failure) and the
last non-empty line of stdout, cut to 1 KiB, the artifact. If the scan's lease is lost while
the command runs, its whole process group is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from typing import IO

from mainframe.client.heartbeat import LeaseKeeper
from mainframe.client.sdk import Job, ResultReport

EXIT_TEMPFAIL = 75  # sysexits.h EX_TEMPFAIL: a temporary failure, worth another attempt
EXIT_PERMANENT_FAILURE = 100  # Mainframe's convention: this scan can never succeed
SUMMARY_BYTES = 2048  # tail of stderr kept as the summary
ARTIFACT_BYTES = 1024  # longest artifact (last stdout line) reported
STDOUT_TAIL_BYTES = 8192  # tail of stdout searched for that last line


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


def run_command(command: Sequence[str], job: Job, keeper: LeaseKeeper) -> tuple[int, bytes, bytes]:
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
