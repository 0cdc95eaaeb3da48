"""The dead-letter figures an operator reads, on SQLite and PostgreSQL, held to the rows that
exist (counted with plain SQL over `scans`): the API list's `count`, the overview's `dead`,
the board's "N dead letters match", its Dead pill, "Redrive all N…" and the confirmation
page's count, and `mainframe dead list`; after retention prunes dead letters (the fake clock
moved past it), a redrive by id, by filter and by cause, a second death and a revocation
cascade. A filter redrive's audit entry names the first 100 scans it requeued and how many
in all; a count the board did not finish says so in words, and an exact one has no "+"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape

import orjson
import pytest
from sqlalchemy import Engine, text

from mainframe.clock import MICROS
from mainframe.lifecycle.retention import DAY_US
from mainframe.lifecycle.rules import PruneKind
from mainframe.settings import Settings
from tests.integration.test_board_pages import sign_in
from tests.integration.test_dead_letters import Desk, open_desk
from tests.serverproc import cli_run

RETENTION_DAYS = 1
# Alice's dead letters now, and of them those on endpoints not revoked: what the figures say.
TRUTH = text(
    """
    SELECT count(*), COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL THEN 1 ELSE 0 END), 0)
    FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    JOIN owners ON owners.id = endpoints.owner_id
    WHERE owners.name = 'alice' AND scans.dead_lettered_at IS NOT NULL
    """
)


@dataclass(frozen=True)
class Truth:
    dead: int  # alice's dead letters
    redrivable: int  # of them, on endpoints not revoked


@pytest.fixture
def desk(database_url: str) -> Iterator[Desk]:
    settings = Settings(
        database_url=database_url, job_timeout=30, max_job_attempts=1, retry_base_seconds=0,
        dead_letter_retention_days=RETENTION_DAYS, board_session_seconds=30 * 86400,
    )  # fmt: skip
    with open_desk(settings, base_url="http://127.0.0.1") as opened:
        yield opened


def truth(engine: Engine) -> Truth:
    with engine.connect() as conn:
        dead, redrivable = conn.execute(TRUTH).one()
    return Truth(int(dead), int(redrivable))


def kill(desk: Desk, names: list[str], summary: str, **fields: str) -> list[int]:
    """Submit each package, lease them all and fail each only attempt with `summary`: one
    dead letter each (the desk's budget is one attempt)."""
    scans = [{"name": name, "version": "1", **fields} for name in names]
    made = desk.ok("POST", "/api/v1/scans/batch", desk.source, {"scans": scans})["results"]
    ids = [item["scan_id"] for item in made]
    leased = []
    while len(leased) < len(ids):
        jobs = desk.ok("POST", "/api/v1/jobs?batch=100", desk.worker)
        assert jobs, "every submitted scan is due"
        leased.extend(jobs)
    for start in range(0, len(leased), 100):
        results = [
            {"scan_id": job["scan_id"], "outcome": "failed", "attempt": job["attempt"],
             "assignment_id": job["assignment_id"], "summary": summary}
            for job in leased[start : start + 100]
        ]  # fmt: skip
        answer = desk.ok("POST", "/api/v1/jobs/results", desk.worker, {"results": results})
        assert {item["status"] for item in answer["results"]} == {200}
    desk.clock.advance(1)
    return ids


def finish_due(desk: Desk) -> None:
    """Lease every due scan and finish it."""
    while jobs := desk.ok("POST", "/api/v1/jobs?batch=100", desk.worker):
        results = [
            {"scan_id": job["scan_id"], "outcome": "finished", "attempt": job["attempt"],
             "assignment_id": job["assignment_id"]}
            for job in jobs
        ]  # fmt: skip
        desk.ok("POST", "/api/v1/jobs/results", desk.worker, {"results": results})


def board_figures(desk: Desk, query: str = "") -> dict[str, int]:
    """What the board's dead-letter page and its confirmation say, as numbers."""
    html = unescape(desk.client.get(f"/board?status=dead{query}").text)
    matched = re.search(r'<strong class="matched">(\d+)</strong> dead letters? match', html)
    pill = re.search(r'data-pill="dead">(\d+)<', html)
    assert matched is not None and pill is not None, html
    button = re.search(r"Redrive (?:all )?(\d+) dead letters?…", html)
    confirm = unescape(desk.client.get(f"/board/redrive?status=dead{query}").text)
    asked = re.search(r"<h1>Redrive (\d+) dead letters?\?</h1>", confirm)
    assert asked is not None or "<h1>No dead letters to redrive</h1>" in confirm, confirm
    return {
        "matched": int(matched.group(1)),
        "pill": int(pill.group(1)),
        "redrive_button": int(button.group(1)) if button else 0,
        "confirm": int(asked.group(1)) if asked else 0,
    }


def assert_figures_true(desk: Desk, engine: Engine, database_url: str) -> Truth:
    """Every figure of alice's dead letters equals the rows that exist now."""
    found = truth(engine)
    listed = desk.listing()
    assert listed["count"] == found.dead
    if found.dead <= 50:
        assert len(listed["scans"]) == found.dead
    overview = desk.ok("GET", "/api/v1/overview", desk.alice)
    assert overview["totals"]["dead"] == found.dead
    assert sum(card["counts"]["dead"] for card in overview["endpoints"]) == found.dead
    board = board_figures(desk)
    assert (board["matched"], board["pill"]) == (found.dead, found.dead), board
    assert (board["redrive_button"], board["confirm"]) == (found.redrivable,) * 2, board
    cli = cli_run(database_url, "dead", "list", "--owner", "alice", "--json")
    assert cli.exit_code == 0, cli.stderr
    assert orjson.loads(cli.stdout)["count"] == found.dead
    return found


def test_every_figure_follows_prunes_redrives_second_deaths_and_revocations(
    desk: Desk, engine: Engine, database_url: str
) -> None:
    sign_in(desk, desk.alice)
    old = kill(desk, [f"old-{i}" for i in range(6)], "disk full on /var/tmp")
    desk.clock.advance(RETENTION_DAYS * DAY_US // MICROS + 60)
    recent = kill(desk, [f"recent-{i}" for i in range(4)], "YARA timed out after 10 s")
    kill(desk, ["other-0", "other-1"], "disk full on /var/tmp")
    assert truth(engine) == Truth(12, 12)

    pruned = desk.store.retention.prune(PruneKind.DEAD_LETTERED, limit=1_000)
    assert pruned.count == len(old)
    assert assert_figures_true(desk, engine, database_url) == Truth(6, 6)

    # A redrive by id, then that scan's second death.
    desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, {"scan_ids": [recent[0]]})
    assert assert_figures_true(desk, engine, database_url) == Truth(5, 5)
    kill_again = desk.ok("POST", "/api/v1/jobs", desk.worker)
    [job] = kill_again
    result = {
        "outcome": "failed", "attempt": job["attempt"], "assignment_id": job["assignment_id"],
        "summary": "YARA timed out after 12 s",
    }  # fmt: skip
    desk.ok("POST", f"/api/v1/jobs/{job['scan_id']}/result", desk.worker, result)
    assert assert_figures_true(desk, engine, database_url) == Truth(6, 6)

    # A redrive by filter, as the board's confirmation sends it.
    body = {"filter": {"q": "other-"}, "confirm": 2}
    assert desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, body)["redriven"] == 2
    assert assert_figures_true(desk, engine, database_url) == Truth(4, 4)

    # A redrive by cause: the cause's own count and the list's both move.
    [cause] = desk.ok("GET", "/api/v1/dead-letters/causes", desk.alice)["causes"]
    assert cause["count"] == 4
    assert board_figures(desk, f"&cause={cause['cause']}")["matched"] == 4
    body = {"filter": {"cause": cause["cause"]}, "confirm": 4}
    assert desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, body)["redriven"] == 4
    assert assert_figures_true(desk, engine, database_url) == Truth(0, 0)
    assert board_figures(desk, f"&cause={cause['cause']}")["matched"] == 0

    # The requeued scans finish this time.
    finish_due(desk)
    assert assert_figures_true(desk, engine, database_url) == Truth(0, 0)

    # A revocation cascade: npm's waiting scans become dead letters nobody may redrive.
    for name in ("queued-0", "queued-1"):
        desk.ok("POST", "/api/v1/scans", desk.alice, {"name": name, "version": "1",
                                                      "endpoint": "npm"})  # fmt: skip
    kill(desk, ["late"], "disk full on /var/tmp")
    desk.ok("POST", "/api/v1/endpoints/npm/revoke", desk.alice)
    assert assert_figures_true(desk, engine, database_url) == Truth(3, 1)
    page = desk.client.get("/board?status=dead").text
    assert "Redrive 1 dead letter…" in page and "Redrive all" not in page
    assert "2 of them are on a revoked endpoint" in page

    # Pruning the cascade's dead letters too, once they are past the retention.
    desk.clock.advance(RETENTION_DAYS * DAY_US // MICROS + 60)
    assert desk.store.retention.prune(PruneKind.DEAD_LETTERED, limit=1_000).count == 3
    assert assert_figures_true(desk, engine, database_url) == Truth(0, 0)


def test_filtered_counts_are_exact_after_a_prune(
    desk: Desk, engine: Engine, database_url: str
) -> None:
    sign_in(desk, desk.alice)
    kill(desk, [f"gone-{i}" for i in range(3)], "disk full", queue="bulk")
    desk.clock.advance(RETENTION_DAYS * DAY_US // MICROS + 60)
    kill(desk, [f"kept-{i}" for i in range(2)], "disk full", queue="bulk")
    kill(desk, ["elsewhere"], "disk full")
    desk.store.retention.prune(PruneKind.DEAD_LETTERED, limit=1_000)
    assert truth(engine) == Truth(3, 3)
    for query, expected in (
        ("&queue=bulk", 2), ("&q=gone", 0), ("&q=kept", 2), ("&endpoint=pypi", 3),
        ("&reason=attempts_exhausted", 3), ("&endpoint=npm", 0),
    ):  # fmt: skip
        assert desk.listing("?" + query[1:])["count"] == expected, query
        figures = board_figures(desk, query)
        assert set(figures.values()) == {expected}, (query, figures)


def test_a_filter_redrive_audits_the_first_hundred_scans_it_requeued(desk: Desk) -> None:
    ids = kill(desk, [f"bulk-{i:03}" for i in range(150)], "exit 1")
    kill(desk, ["bystander"], "exit 1")
    body = {"filter": {"q": "bulk-"}, "confirm": 150}
    done = desk.ok("POST", "/api/v1/dead-letters/redrive", desk.alice, body)
    assert done["redriven"] == 150
    [entry] = [e for e in desk.redrives(desk.alice) if e["audit_id"] == done["audit_id"]]
    # The filter's order: newest first, so the last submitted first.
    newest_first = list(reversed(ids))
    assert entry["count"] == 150 and entry["scan_ids"] is None
    assert entry["detail"] == {"requeued_ids": newest_first[:100], "requeued": 150}
    assert entry["target"] == (
        "150 scans requeued, by filter (q=bulk-): "
        + ", ".join(f"#{scan_id}" for scan_id in newest_first[:10])
        + " and 140 more"
    )
    sign_in(desk, desk.alice)
    page = desk.client.get("/board/audit").text
    row = next(r for r in page.split("<tr>") if "by filter (q=bulk-)" in r)
    assert row.count('href="/board/scans/') == 10 + 100  # the line's ten, then all kept
    assert f'href="/board/scans/{newest_first[99]}"' in row
    assert f'href="/board/scans/{newest_first[100]}"' not in row
    assert "and 140 more" in row and "The first 100 of 150" in row


def test_every_redrive_keeps_one_shape_of_what_it_requeued(desk: Desk) -> None:
    by_id = kill(desk, ["one", "two"], "exit 1")
    first = desk.ok(
        "POST", "/api/v1/dead-letters/redrive", desk.alice, {"scan_ids": [*by_id, 999_999]}
    )
    finish_due(desk)
    again = kill(desk, ["three"], "segfault in libyara")
    [cause] = [
        c
        for c in desk.ok("GET", "/api/v1/dead-letters/causes", desk.alice)["causes"]
        if c["pattern"] == "segfault in libyara"
    ]
    second = desk.ok(
        "POST", "/api/v1/dead-letters/redrive", desk.alice,
        {"filter": {"cause": cause["cause"]}, "confirm": 1},
    )  # fmt: skip
    nothing = desk.ok(
        "POST", "/api/v1/dead-letters/redrive", desk.alice,
        {"filter": {"q": "absent"}, "confirm": 0},
    )  # fmt: skip
    entries = {e["audit_id"]: e for e in desk.redrives(desk.alice)}
    assert entries[first["audit_id"]]["detail"] == {"requeued_ids": by_id, "requeued": 2}
    assert entries[second["audit_id"]]["detail"] == {"requeued_ids": again, "requeued": 1}
    assert entries[nothing["audit_id"]]["detail"] == {"requeued_ids": [], "requeued": 0}
    assert entries[second["audit_id"]]["target"].endswith(f": #{again[0]}")


def test_a_count_the_board_did_not_finish_is_said_in_words(desk: Desk) -> None:
    scans = [{"name": f"bulk-{i}", "version": "1"} for i in range(1_000)]
    desk.ok("POST", "/api/v1/scans/batch", desk.source, {"scans": scans})
    desk.ok("POST", "/api/v1/scans", desk.source, {"name": "bulk-last", "version": "1"})
    sign_in(desk, desk.alice)
    pills = _pills(desk.client.get("/board").text)
    # Exact counts read from the kept figures: the number, never with a "+".
    assert pills["queued"] == "1001" and pills["all"] == "1001"
    narrowed = _pills(desk.client.get("/board?q=bulk").text)
    assert narrowed["queued"] == "more than 1000" and narrowed["all"] == "more than 1000"
    assert narrowed["pending"] == "0" and narrowed["dead"] == "0"
    assert not any("+" in shown for shown in (*pills.values(), *narrowed.values()))


def _pills(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-pill="(\w+)">([^<]+)<', html))
