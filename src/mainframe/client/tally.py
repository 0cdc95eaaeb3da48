"""What a worker did, as `mainframe worker` says it when it stops: the scans it worked on, the
attempts it reported, and where each scan stood after the last thing this worker did with it.
A scan retried on the same worker is one scan of several attempts, so "3 scans in 9 attempts:
3 dead letters" and never "processed 9 scans". Pure: results in, words out."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from mainframe.contract.text import counted


class Fate(Enum):
    """Where a scan stood once this worker was done with it, in DESIGN's words (README.md,
    "Running it"): the value is the key of the `worker_stopped` log line."""

    FINISHED = "finished"
    FAILED = "failed"  # a permanent failure: the command said not to retry
    DEAD_LETTERED = "dead_lettered"  # its attempts spent
    RETRYING = "retrying"  # back in the queue, waiting out its retry's backoff
    ATTEMPT_FAILED = "attempt_failed"  # failed, and the reply did not say where it went
    REFUSED = "refused"  # the server refused the result (a stale assignment, say)
    UNREPORTED = "unreported"  # its lease was lost, or the worker stopped before reporting


# How each fate reads after its count, singular and plural, in the order the line tells them.
WORDS: dict[Fate, tuple[str, str]] = {
    Fate.FINISHED: ("finished", "finished"),
    Fate.FAILED: ("permanent failure", "permanent failures"),
    Fate.DEAD_LETTERED: ("dead letter", "dead letters"),
    Fate.RETRYING: ("waiting for a retry", "waiting for a retry"),
    Fate.ATTEMPT_FAILED: (
        "failed (the reply did not say how)",
        "failed (the reply did not say how)",
    ),
    Fate.REFUSED: ("result refused", "results refused"),
    Fate.UNREPORTED: ("not reported", "not reported"),
}


def fate_of(outcome: str, retryable: bool | None, scan: dict[str, Any] | None) -> Fate:
    """Where an accepted result sent its scan: the reply's word first (status, dead-lettered
    or not), else what the result itself settles (a server that sends no scan back)."""
    if scan:
        if scan.get("dead_lettered_at"):
            return Fate.DEAD_LETTERED
        status = scan.get("status")
        if status == "FINISHED":
            return Fate.FINISHED
        if status == "FAILED":
            return Fate.FAILED
        if status == "QUEUED":
            return Fate.RETRYING
    if outcome == "finished":
        return Fate.FINISHED
    return Fate.FAILED if retryable is False else Fate.ATTEMPT_FAILED


@dataclass
class WorkerTally:
    """The attempts a worker reported and each scan's fate after its last one."""

    attempts: int = 0  # results the server answered, accepted or refused: what --max-jobs bounds
    fates: dict[int, Fate] = field(default_factory=dict)  # by scan id, the latest

    def answered(self, scan_id: int, fate: Fate) -> None:
        """The server answered a result of this scan: one more attempt reported."""
        self.attempts += 1
        self.fates[scan_id] = fate

    def unreported(self, scan_id: int) -> None:
        """A scan this worker held and did not report: its lease lapses and the server hands
        it on."""
        self.fates[scan_id] = Fate.UNREPORTED

    @property
    def scans(self) -> int:
        return len(self.fates)

    def counts(self) -> Counter[Fate]:
        return Counter(self.fates.values())

    def words(self) -> str:
        """`3 scans in 9 attempts: 1 finished, 2 dead letters`."""
        head = f"{counted(self.scans, 'scan')} in {counted(self.attempts, 'attempt')}"
        counts = self.counts()
        told = [
            f"{counts[fate]} {one if counts[fate] == 1 else many}"
            for fate, (one, many) in WORDS.items()
            if counts[fate]
        ]
        return head + (": " + ", ".join(told) if told else "")

    def log_fields(self) -> dict[str, int]:
        """The figures of the `worker_stopped` line: scans, attempts, and scans per fate."""
        counts = self.counts()
        return {"scans": self.scans, "attempts": self.attempts} | {
            fate.value: counts[fate] for fate in Fate
        }
