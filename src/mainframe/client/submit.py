"""`mainframe submit`: stream a JSON Lines file of scans through the bulk intake route, a
thousand per request, with a progress bar on a terminal and plain lines elsewhere."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from mainframe.client.sdk import refusal_words
from mainframe.contract.limits import MAX_INTAKE_BATCH

BATCH_PATH = "/api/v1/scans/batch"
MAX_BATCH = MAX_INTAKE_BATCH  # the server's cap on scans per bulk request
# Every request is bounded; a 1,000-scan batch takes milliseconds, so this is generous.
TIMEOUT_SECONDS = 60.0


@dataclass
class SubmitTally:
    """What the server said about every line: created, already live, refused (by line)."""

    statuses: Counter[int] = field(default_factory=Counter)
    refused: list[tuple[int, str]] = field(default_factory=list)  # line number, in words

    @property
    def total(self) -> int:
        return sum(self.statuses.values())


class SubmitError(RuntimeError):
    """The server refused a whole request (bad token, unknown endpoint, outage), in words."""


def count_lines(path: Path) -> int:
    """Non-blank lines in `path`, for the progress bar's total (one quick pass)."""
    with path.open("rb") as stream:
        return sum(1 for line in stream if line.strip())


def read_lines(stream: TextIO) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for every non-blank line; bad JSON is kept as a refusal."""
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, _BadLine(f"line {number} is not JSON: {exc.msg}")


@dataclass(frozen=True, slots=True)
class _BadLine:
    reason: str


def batches(
    lines: Iterable[tuple[int, Any]], size: int = MAX_BATCH
) -> Iterator[list[tuple[int, Any]]]:
    chunk: list[tuple[int, Any]] = []
    for item in lines:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def submit_file(
    client: httpx.Client,
    path: Path,
    *,
    endpoint: str | None,
    progress: Callable[[int], None] = lambda _n: None,
) -> SubmitTally:
    """Submit every line of `path`; return the per-status tally and the refused lines."""
    tally = SubmitTally()
    with path.open(encoding="utf-8") as stream:
        for chunk in batches(read_lines(stream)):
            _submit_chunk(client, chunk, endpoint, tally)
            progress(len(chunk))
    return tally


def _submit_chunk(
    client: httpx.Client, chunk: list[tuple[int, Any]], endpoint: str | None, tally: SubmitTally
) -> None:
    good = [(n, item) for n, item in chunk if not isinstance(item, _BadLine)]
    for n, item in chunk:
        if isinstance(item, _BadLine):
            tally.statuses[400] += 1
            tally.refused.append((n, item.reason))
    if not good:
        return
    body: dict[str, Any] = {"scans": [item for _, item in good]}
    if endpoint is not None:
        body["endpoint"] = endpoint
    response = client.post(BATCH_PATH, json=body, timeout=TIMEOUT_SECONDS)
    if response.status_code != 200:
        raise SubmitError(refusal_words(response.status_code, _body(response)))
    for (number, _), result in zip(good, response.json()["results"], strict=True):
        tally.statuses[result["status"]] += 1
        if result["status"] >= 400:
            tally.refused.append((number, refusal_words(result["status"], result)))


def _body(response: httpx.Response) -> Any:
    """The JSON of a refusal, or its text when a proxy answered in HTML."""
    try:
        return response.json()
    except ValueError:
        return response.text
