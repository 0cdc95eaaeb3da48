"""The rule that marks a worker failing far more than the rest of its endpoint."""

from __future__ import annotations

import pytest

from mainframe.lifecycle.workers import failure_share, stands_out


def test_the_share_counts_failures_and_lapses_over_what_closed() -> None:
    assert failure_share(1, 3) == 0.25 and failure_share(1, 2, 1) == 0.5
    assert failure_share(0, 0) is None


@pytest.mark.parametrize(
    ("worker", "endpoint", "marked"),
    [
        ((40, 60, 0), (45, 955, 0), True),  # 40 % against the rest's 0.5 %
        ((0, 0, 30), (0, 900, 30), True),  # every lease of one host lapses
        ((2, 98, 0), (12, 988, 0), False),  # 2 % against 1 %: twice, but not far above
        ((4, 4, 0), (5, 900, 0), False),  # too few attempts to judge
        ((50, 50, 0), (100, 100, 0), False),  # the whole fleet fails alike
        ((30, 70, 0), (30, 70, 0), False),  # alone on its endpoint: nobody to compare
    ],
)
def test_a_worker_stands_out_only_when_far_above_the_rest(
    worker: tuple[int, int, int], endpoint: tuple[int, int, int], marked: bool
) -> None:
    assert stands_out(worker=worker, endpoint=endpoint) is marked
