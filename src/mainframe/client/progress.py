"""Progress for long CLI work: a rich bar on a terminal, a line every few seconds elsewhere."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

# How often a non-terminal run reports how far it got.
PLAIN_EVERY_SECONDS = 5.0


@contextmanager
def progress_bar(label: str, *, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n)`, to be called as work is done, out of `total` if known."""
    if not sys.stderr.isatty():
        yield _plain(label)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _plain(label: str) -> Callable[[int], None]:
    done = 0
    last = time.monotonic()

    def advance(n: int) -> None:
        nonlocal done, last
        done += n
        if time.monotonic() - last >= PLAIN_EVERY_SECONDS:
            last = time.monotonic()
            print(f"{label}: {done} lines", file=sys.stderr, flush=True)

    return advance
