"""The board's pure parts: where a sign-in may return to, a summary's last error, the
relative age beside every time, and the timeline's redrive marks."""

from __future__ import annotations

import pytest

from mainframe.board.auth import safe_next
from mainframe.board.render import ago, last_error, when
from mainframe.board.timeline import entries
from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import AttemptRecord, ScanRecord

MINUTE = 60_000_000


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/board/scans/7?status=dead&q=left", "/board/scans/7?status=dead&q=left"),
        ("/board", "/board"),
        ("https://evil.example/board", "/board"),
        ("//evil.example/board", "/board"),
        ("/board//evil.example", "/board"),
        ("/board\\..\\api", "/board"),
        ("/boardroom", "/board"),
        ("/api/v1/scans", "/board"),
        ("/board/sign-in?next=/board", "/board"),
        ("/board/\x00", "/board"),
        (None, "/board"),
    ],
)
def test_a_sign_in_returns_only_to_the_board(target: object, expected: str) -> None:
    assert safe_next(target) == expected


def test_the_last_error_is_the_summarys_last_line() -> None:
    summary = "Traceback (most recent call last):\n  File 'x'\nOSError: disk full\n\n  \n"
    assert last_error(summary) == "OSError: disk full"
    assert last_error(None) == "" and last_error("\n \n") == ""
    long = "E" * 100 + "the end"
    assert last_error(long * 3).endswith("the end") and len(last_error(long * 3)) == 160


def test_times_read_in_one_format_with_their_age() -> None:
    now = 1_790_000_000_000_000
    assert when(now) == "2026-09-21 14:13:20 UTC"
    assert when("2026-09-21T14:13:20.5Z") == "2026-09-21 14:13:20 UTC"
    before = (10_000_000, 3 * MINUTE, 130 * MINUTE, 3 * 1440 * MINUTE)
    assert [ago(now - d, now) for d in before] == ["just now", "3 min ago", "2 h ago", "3 days ago"]
    assert ago(now + 5 * MINUTE, now) == "in 5 min"


def _scan(attempts: list[tuple[int, int]], *, redrives: int, count: int) -> ScanRecord:
    history = tuple(
        AttemptRecord(seq, attempt, "w1", 1, 2, "failed", None, None) for seq, attempt in attempts
    )
    return ScanRecord(
        1, 1, "pypi", "default", "pkg", "1", "scan", None, Status.QUEUED, True, None, None,
        count, None, None, None, None, 0, 0, None, None, None, None, len(attempts) - count,
        None, 99 if redrives else None, redrives, history,
    )  # fmt: skip


def test_the_timeline_marks_each_redrive_before_the_budget_it_opened() -> None:
    scan = _scan([(1, 1), (2, 2), (3, 1)], redrives=2, count=0)
    shape = [(e.budget, e.attempt.attempt if e.attempt else None) for e in entries(scan)]
    assert shape == [(1, 1), (1, 2), (2, None), (2, 1), (3, None)]
    assert [e.redriven_at for e in entries(scan) if e.attempt is None] == [None, 99]
    never = _scan([(1, 1)], redrives=0, count=1)
    assert [e.attempt is None for e in entries(never)] == [False]
