"""Failure summaries grouped into causes as a person would group them, without a database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.lifecycle.causes import MAX_PATTERN, NO_SUMMARY, cause_of, meaningful_line

# Each group: real-looking summaries that are one failure, whatever varies between them.
SAME = {
    "timeout": [
        "YARA scan timed out after 10 s on scratch/x1/pkg-1.2.tar.gz",
        "YARA scan timed out after 12 s on scratch/y7/other-3.4.5.whl",
        "YARA scan timed out after 300 s on /srv/scratch/big_wheel-10.0.0-py3-none-any.whl",
    ],
    "exception": [
        'Traceback (most recent call last):\n  File "scan.py", line 3, in <module>\n'
        "ValueError: invalid literal for int() with base 10: 'abc'",
        "ValueError: invalid literal for int() with base 10: 'xyz'\n",
        '  ValueError: invalid literal for int() with base 16: "0x"  ',
    ],
    "download": [
        "error: download of https://files.pythonhosted.org/packages/ab/pkg-1.0.tar.gz failed: 503",
        "error: download of https://files.example/x/other-2.0.zip?sig=abc failed: 502",
    ],
    "disk": [
        "cannot write /var/tmp/scan-3f2a9c1b/extract (No space left on device)",
        "cannot write /var/tmp/scan-77aa11ee/extract/deep/file.py (No space left on device)",
    ],
    "crash": [
        "worker 5b1c8d2e-1f2a-4b3c-9d8e-7f6a5b4c3d2e crashed at 0x7ffd3a2b1c40",
        "worker 0B1C8D2E-1F2A-4B3C-9D8E-7F6A5B4C3D2F crashed at 0x7ffd3a2b1c99",
    ],
    "refused": ["connect to 10.0.0.5:5432 refused", "connect to 192.168.1.20:6432 refused"],
    "rules": [
        "scanner v2.3.1 failed: rules commit 9f8e7d6c5b4a",
        "scanner 2.4.0-rc1 failed: rules commit 0123456789abcdef",
    ],
}
DIFFERENT = [
    "YARA scan timed out after 10 s on scratch/x1/pkg-1.2.tar.gz",
    "YARA scan timed out after 10 s on scratch/x1/pkg-1.2.tar.gz (rules not loaded)",
    "YARA scan failed after 10 s on scratch/x1/pkg-1.2.tar.gz",
    "ValueError: invalid literal for int() with base 10: 'abc'",
    "TypeError: invalid literal for int() with base 10: 'abc'",
    "KeyError: 'distributions'",
    "cannot write /var/tmp/x (No space left on device)",
    "cannot read /var/tmp/x (Permission denied)",
]


@pytest.mark.parametrize("group", sorted(SAME))
def test_one_failure_with_different_details_is_one_cause(group: str) -> None:
    causes = {cause_of("failed", summary) for summary in SAME[group]}
    assert len(causes) == 1, causes


def test_different_failures_are_different_causes() -> None:
    keys = [cause_of("failed", summary).key for summary in DIFFERENT]
    assert len(set(keys)) == len(keys)


def test_the_groups_are_apart() -> None:
    keys = {cause_of("failed", group[0]).key for group in SAME.values()}
    assert len(keys) == len(SAME)


def test_a_shared_beginning_never_merges_two_causes() -> None:
    head = "x" * MAX_PATTERN
    one, two = cause_of("failed", head + " one"), cause_of("failed", head + " two")
    assert one.pattern == two.pattern  # what is shown is cut at the same place ...
    assert one.key != two.key  # ... but the key is of the whole pattern


def test_the_pattern_is_readable() -> None:
    cause = cause_of("failed", SAME["timeout"][0])
    assert cause.pattern == "YARA scan timed out after <n> s on <path>"
    assert cause_of("failed", SAME["crash"][0]).pattern == "worker <id> crashed at <hex>"


def test_attempts_that_ended_without_a_result_have_causes_of_their_own() -> None:
    lapsed = cause_of("lease_expired", None)
    assert lapsed != cause_of("interrupt_expired", None) != cause_of("endpoint_revoked", None)
    assert lapsed != cause_of("failed", lapsed.pattern), "a worker's words never pose as one"
    assert cause_of("failed", None).pattern == NO_SUMMARY == cause_of("failed", " \n ").pattern


def test_the_meaningful_line_is_the_last_that_says_something() -> None:
    assert meaningful_line("Traceback\n  frame\nOSError: boom\n\n  \n") == "OSError: boom"
    assert meaningful_line(None) == ""


@given(st.text(max_size=400))
def test_any_summary_has_a_bounded_cause(summary: str) -> None:
    cause = cause_of("failed", summary)
    assert len(cause.key) == 16 and 0 < len(cause.pattern) <= MAX_PATTERN
    assert cause_of("failed", summary) == cause
