"""`mainframe stats`: the database's figures in plain words, one line per queue state and per
outcome with what it means, then each source's last accepted submission with the quiet ones
marked, or as nested JSON for scripts (`.queue.queued`, `.sources[].quiet`)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from mainframe.cli.common import DatabaseOpt, load_settings, on_store
from mainframe.clock import rfc3339
from mainframe.lifecycle.quiet import QUIET_AFTER_SECONDS
from mainframe.store import LastSubmission, Snapshot

stats_command = typer.Typer(add_completion=False, rich_markup_mode=None)

# What each live state means to an operator, in the order a scan meets them (README.md,
# "Reading `mainframe stats`"; the states are DESIGN's queue states of packages_queue).
QUEUE_MEANINGS = {
    "queued": "due now: the next poll leases it",
    "paused": "in a paused queue: no poll leases it until the queue is resumed",
    "scheduled": "waiting out a retry's backoff; due at its available_at",
    "pending": "leased to a worker (or parked in a wait), lease still live",
    "retryable": "lease lapsed with attempts left: the next poll hands it on",
    "exhausted": "lease lapsed with attempts spent: the next reap dead-letters it",
    "quarantined": "submitted anonymously; waits for an owner to release it",
}
OUTCOME_MEANINGS = {
    "finished": "reported finished",
    "failed": "a permanent failure: failed, never to be retried, not a dead letter",
    "dead_lettered": "attempts spent; `mainframe dead list` shows them",
}
# How the outcome keys read in the table (the JSON keeps the keys).
OUTCOME_WORDS = {"dead_lettered": "dead letters"}
# Beside a source silent for over MAINFRAME_QUIET_SOURCE_SECONDS (lifecycle/quiet.py).
QUIET_MARK = "QUIET"


def stats_figures(
    snapshot: Snapshot, *, quiet_after: float = QUIET_AFTER_SECONDS
) -> dict[str, Any]:
    """The snapshot as nested plain keys: live scans by state, scans by outcome, how long
    the oldest scan a poll could lease has waited since it became due, and each source's last
    accepted submission, quiet when older than `quiet_after` seconds."""
    oldest = snapshot.oldest_due_at
    age = 0.0 if oldest is None else (snapshot.taken_at - oldest) / 1_000_000
    live = {state.value: count for state, count in snapshot.queue.items()}
    return {
        "queue": {state: live.get(state, 0) for state in QUEUE_MEANINGS},
        "outcomes": {outcome: snapshot.outcomes.get(outcome, 0) for outcome in OUTCOME_MEANINGS},
        "oldest_queued_age_seconds": round(age, 3),
        "sources": [_source(last, quiet_after) for last in snapshot.sources],
        "quiet_after_seconds": quiet_after,
    }


def _source(last: LastSubmission, quiet_after: float) -> dict[str, Any]:
    silent = last.silent_for()
    return {
        "endpoint": last.endpoint,
        "source": last.source,
        "last_submitted_at": rfc3339(last.at, precision="seconds"),
        "silent_seconds": None if silent is None else round(silent, 3),
        "quiet": last.quiet(quiet_after),
    }


def source_lines(figures: dict[str, Any]) -> list[str]:
    """Each source (`endpoint/source`) with its last accepted submission and how long ago,
    the quiet ones marked, then how many are quiet."""
    sources, after = figures["sources"], figures["quiet_after_seconds"]
    if not sources:
        return ["no source credentials: nothing to be quiet"]
    names = [f"{s['endpoint']}/{s['source']}" for s in sources]
    width = max(14, *(len(name) + 2 for name in names))
    lines = [f"{'SOURCE':<{width}}LAST SUBMISSION"]
    for name, source in zip(names, sources, strict=True):
        if source["last_submitted_at"] is None:
            lines.append(f"{name:<{width}}never")
            continue
        when = f"{source['last_submitted_at']}, {source['silent_seconds']:g} s ago"
        lines.append(f"{name:<{width}}{when}" + (f"  {QUIET_MARK}" if source["quiet"] else ""))
    quiet = sum(1 for source in sources if source["quiet"])
    setting = "(MAINFRAME_QUIET_SOURCE_SECONDS)"
    if quiet:
        many = "source quiet" if quiet == 1 else "sources quiet"
        said = f"{quiet} {many}: silent for over {after:g} s since the last accepted submission"
    else:
        said = f"no source quiet: none that submitted has been silent for over {after:g} s"
    return [*lines, "", f"{said} {setting}"]


def stats_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as two small tables with a header each, then the oldest due scan's age:
    over the scans a poll could lease, so a paused queue neither hides nor inflates it."""
    lines = [f"{'LIVE SCANS':<14}{'COUNT':>8}  MEANING"]
    for state, meaning in QUEUE_MEANINGS.items():
        lines.append(f"{state:<14}{figures['queue'][state]:>8}  {meaning}")
    lines += ["", f"{'OUTCOMES':<14}{'COUNT':>8}  MEANING"]
    for outcome, meaning in OUTCOME_MEANINGS.items():
        word = OUTCOME_WORDS.get(outcome, outcome)
        lines.append(f"{word:<14}{figures['outcomes'][outcome]:>8}  {meaning}")
    age, paused = figures["oldest_queued_age_seconds"], figures["queue"]["paused"]
    lines += [""]
    if age:
        lines.append(f"the oldest scan a poll could lease has waited {age:g} s since it was due")
    else:
        lines.append("no scan a poll could lease is due")
    if paused == 1:
        lines.append("1 scan held by a paused queue is not counted there: see paused above")
    elif paused:
        lines.append(
            f"{paused} scans held by paused queues are not counted there: see paused above"
        )
    return [*lines, "", *source_lines(figures)]


@stats_command.command()
def stats(
    database_url: DatabaseOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='One JSON object: {"queue": {...}, "outcomes": {...}, "sources": [...]}.'
        ),
    ] = False,
) -> None:
    """Live scans by state, scans by outcome and quiet sources. Read from the database,
    each figure in words with what it means, each source with its last accepted submission
    (README.md, "Reading `mainframe stats`")."""
    settings = load_settings(database_url=database_url)
    snapshot = on_store(settings, lambda store: store.listings.snapshot())
    figures = stats_figures(snapshot, quiet_after=settings.quiet_source_seconds)
    if as_json:
        typer.echo(json.dumps(figures))
        return
    for line in stats_lines(figures):
        typer.echo(line)
