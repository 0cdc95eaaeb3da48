"""What makes a resent result a replay and what makes it a conflict, without a database."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.lifecycle.rules import is_replay, result_digest
from mainframe.lifecycle.scans import OPERATOR_CLOSE

SENT: dict[str, Any] = {
    "outcome": "failed",
    "retryable": True,
    "summary": "timed out",
    "artifact": "s3://x",
    "result": '{"a": 1, "b": [1, 2]}',
    "retry_after": 30.0,
}


def digest(**changes: Any) -> str:
    return result_digest(**(SENT | changes))


@pytest.mark.parametrize(
    "same",
    [
        {"result": '{"b":[1,2],"a":1}'},  # keys in another order, other spacing
        {"retry_after": 30},  # an integer for the same number of seconds
    ],
)
def test_the_same_meaning_spelled_otherwise_is_the_same_content(same: dict[str, Any]) -> None:
    assert digest(**same) == digest()


@pytest.mark.parametrize(
    "other",
    [
        {"outcome": "finished"},
        {"retryable": False},
        {"summary": "timed out "},
        {"summary": None},
        {"artifact": None},
        {"result": '{"a": 1, "b": [2, 1]}'},
        {"result": None},
        {"retry_after": 31.0},
    ],
)
def test_any_meaningful_difference_is_other_content(other: dict[str, Any]) -> None:
    assert digest(**other) != digest()


def test_fields_a_success_ignores_do_not_make_it_other_content() -> None:
    success = {"outcome": "finished", "retry_after": None}
    assert digest(**success, retryable=True) == digest(**success, retryable=False)
    assert digest(**success) == digest(**success | {"retry_after": 12.0})


def test_a_non_retryable_failure_ignores_a_retry_delay() -> None:
    assert digest(retryable=False, retry_after=None) == digest(retryable=False, retry_after=5.0)


def test_a_close_before_digests_were_kept_counts_as_a_replay() -> None:
    assert is_replay(None, digest())
    assert is_replay(digest(), digest())
    assert not is_replay(digest(outcome="finished"), digest())


@given(st.text(max_size=50), st.one_of(st.none(), st.text(max_size=50)))
def test_no_worker_result_is_an_operators_close(summary: str, artifact: str | None) -> None:
    assert not is_replay(OPERATOR_CLOSE, digest(summary=summary, artifact=artifact))
