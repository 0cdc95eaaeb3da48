"""The worker SDK: a typed client for the job API and the loop behind `mainframe worker`."""

from __future__ import annotations

from mainframe.client.command import (
    EXIT_PERMANENT_FAILURE,
    EXIT_TEMPFAIL,
    job_environment,
    report_for_exit,
)
from mainframe.client.heartbeat import LeaseKeeper
from mainframe.client.runner import ServerUnreachable, run_worker
from mainframe.client.sdk import (
    BatchCompletion,
    Client,
    Completion,
    ItemStatus,
    Job,
    MainframeError,
    ResultReport,
    StaleAssignment,
    parse_timestamp,
)
from mainframe.client.tally import Fate, WorkerTally

__all__ = [
    "EXIT_PERMANENT_FAILURE",
    "EXIT_TEMPFAIL",
    "BatchCompletion",
    "Client",
    "Completion",
    "Fate",
    "ItemStatus",
    "Job",
    "LeaseKeeper",
    "MainframeError",
    "ResultReport",
    "ServerUnreachable",
    "StaleAssignment",
    "WorkerTally",
    "job_environment",
    "parse_timestamp",
    "report_for_exit",
    "run_worker",
]
