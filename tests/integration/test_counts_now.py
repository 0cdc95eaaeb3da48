"""Every count an operator reads of alice's scans, on SQLite and PostgreSQL, held to the rows
that exist (plain SQL over `scans`) and to what each list would show: the board's pills with
no filter and with an endpoint, its endpoint cards and an endpoint's page, and the API's
overview; and the dead-letter list's count narrowed by a reason, a queue or both (with an
endpoint and a cause or not), with how many of them a filter redrive would requeue. After
retention prunes finished scans, plain failures and dead letters (a FakeClock moved past it,
in batches across endpoints), a redrive, a second death, a redriven scan that finishes or
fails plainly and is pruned in its turn, a lapsed lease, and a revocation whose dead letters
are pruned. `mainframe stats` keeps counting every scan that ever ended."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, text

from mainframe.board.filters import PILLS, BoardFilter
from mainframe.clock import MICROS
from mainframe.lifecycle.retention import DAY_US
from mainframe.lifecycle.rules import DeadLetterReason, PruneKind
from mainframe.settings import Settings
from mainframe.store.operator.dead_letters import DeadLetterFilter
from tests.integration.conftest import issue
from tests.integration.test_board_pages import sign_in
from tests.integration.test_dead_letters import Desk, open_desk
from tests.serverproc import cli_run

RETENTION_DAYS = 1
PAST_RETENTION = RETENTION_DAYS * DAY_US // MICROS + 60  # seconds
ENDPOINTS = ("npm", "pypi")
QUEUES = ("default", "bulk")
REASONS = tuple(reason.value for reason in DeadLetterReason)
# What each of alice's scans is now, per endpoint: the pills' and cards' keys.
SCANS_NOW = text(
    """
    SELECT endpoints.name,
           CASE WHEN scans.dead_lettered_at IS NOT NULL THEN 'dead'
                WHEN scans.status = 'QUEUED' AND (scans.available_at IS NULL OR EXISTS (
                    SELECT 1 FROM paused_queues
                    WHERE paused_queues.endpoint_id = scans.endpoint_id
                      AND paused_queues.queue = scans.queue)) THEN 'paused'
                ELSE lower(scans.status) END,
           count(*)
    FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    JOIN owners ON owners.id = endpoints.owner_id
    WHERE owners.name = 'alice'
    GROUP BY 1, 2
    """
)
# Alice's dead letters by what a filter can name, and whether their endpoint is revoked.
DEAD_NOW = text(
    """
    SELECT endpoints.name, scans.cause, scans.queue, scans.fail_reason,
           endpoints.revoked_at IS NOT NULL, count(*)
    FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    JOIN owners ON owners.id = endpoints.owner_id
    WHERE owners.name = 'alice' AND scans.dead_lettered_at IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5
    """
)
STATUSES = ("queued", "paused", "pending", "finished", "failed", "dead", "quarantined")


@dataclass
class Fleet:
    desk: Desk
    engine: Engine
    database_url: str
    workers: dict[str, str]  # endpoint -> a worker's token
    owner_id: int

    def submit(self, endpoint: str, names: list[str], queue: str = "default") -> list[int]:
        body = {"scans": [{"name": n, "version": "1", "queue": queue} for n in names]}
        if endpoint == "pypi":  # its source's scans are verified
            made = self.desk.ok("POST", "/api/v1/scans/batch", self.desk.source, body)
        else:
            made = self.desk.ok(
                "POST", "/api/v1/scans/batch", self.desk.alice, body | {"endpoint": endpoint}
            )
        return [item["scan_id"] for item in made["results"]]

    def lease_all(self, endpoint: str) -> list[dict[str, Any]]:
        leased: list[dict[str, Any]] = []
        while jobs := self.desk.ok("POST", "/api/v1/jobs?batch=100", self.workers[endpoint]):
            leased.extend(jobs)
        return leased

    def close_all(self, endpoint: str, outcome: str, **fields: Any) -> list[int]:
        """Lease every due scan of `endpoint` and close each with `outcome`."""
        jobs = self.lease_all(endpoint)
        results = [
            {"scan_id": job["scan_id"], "outcome": outcome, "attempt": job["attempt"],
             "assignment_id": job["assignment_id"], **fields}
            for job in jobs
        ]  # fmt: skip
        if results:
            answer = self.desk.ok(
                "POST", "/api/v1/jobs/results", self.workers[endpoint], {"results": results}
            )
            assert {item["status"] for item in answer["results"]} == {200}
        self.desk.clock.advance(1)
        return [job["scan_id"] for job in jobs]

    def finish(self, endpoint: str, names: list[str], queue: str = "default") -> list[int]:
        self.submit(endpoint, names, queue)
        return self.close_all(endpoint, "finished")

    def fail_plainly(self, endpoint: str, names: list[str]) -> list[int]:
        self.submit(endpoint, names)
        return self.close_all(endpoint, "failed", retryable=False, summary="not a package")

    def kill(
        self, endpoint: str, names: list[str], summary: str, queue: str = "default"
    ) -> list[int]:
        """One dead letter per name: the budget is one attempt."""
        self.submit(endpoint, names, queue)
        return self.close_all(endpoint, "failed", summary=summary)

    def lapse(self, endpoint: str, names: list[str], queue: str = "default") -> None:
        """Dead letters whose only lease ran out, reaped by the sweep."""
        self.submit(endpoint, names, queue)
        assert self.lease_all(endpoint)
        self.desk.clock.advance(31)
        assert self.desk.store.leasing.sweep() == len(names)

    def prune(self, kind: PruneKind) -> int:
        """Prune `kind` in batches of two (so a batch spans endpoints); how many went."""
        pruned = 0
        while found := self.desk.store.retention.prune(kind, limit=2).count:
            pruned += found
        return pruned


@pytest.fixture
def fleet(database_url: str, engine: Engine) -> Iterator[Fleet]:
    settings = Settings(
        database_url=database_url, job_timeout=30, max_job_attempts=1, retry_base_seconds=0,
        finished_retention_days=RETENTION_DAYS, failed_retention_days=RETENTION_DAYS,
        dead_letter_retention_days=RETENTION_DAYS, board_session_seconds=30 * 86400,
    )  # fmt: skip
    with open_desk(settings, base_url="http://127.0.0.1") as desk:
        workers = {"pypi": desk.worker, "npm": issue(desk.store, "npm", "worker", "w2")}
        owner_id = desk.store.owners.owner_id("alice")
        sign_in(desk, desk.alice)
        yield Fleet(desk, engine, database_url, workers, owner_id)


def scans_now(engine: Engine) -> dict[str, dict[str, int]]:
    """Alice's scans per endpoint by what each is now."""
    found = {name: dict.fromkeys(STATUSES, 0) for name in ENDPOINTS}
    with engine.connect() as conn:
        for endpoint, status, n in conn.execute(SCANS_NOW):
            found[endpoint][status] = int(n)
    return found


def pills(totals: dict[str, int]) -> dict[str, int]:
    """What each pill counts, from the scans by what they are."""
    counted = {key: totals[key] for key in PILLS if key != "all"}
    return counted | {"all": sum(totals.values())}


def _board_pills(html: str) -> dict[str, int]:
    return {key: int(n) for key, n in re.findall(r'data-pill="(\w+)">(\d+)<', html)}


def _board_cards(html: str) -> dict[str, dict[str, int]]:
    cards = {}
    for name, body in re.findall(
        r'<h3><a href="/board/endpoints/([\w.-]+)">[\s\S]*?</h3>([\s\S]*?)</dl>', html
    ):
        cards[name] = {k: int(v) for k, v in re.findall(r"<dt>(\w+)</dt><dd>(\d+)</dd>", body)}
    return cards


def assert_counts_true(fleet: Fleet) -> dict[str, dict[str, int]]:
    """Every pill and card of alice's, on the board and in the API, equals the scans that
    exist now and what each pill's list walks."""
    desk, truth = fleet.desk, scans_now(fleet.engine)
    overall = {key: sum(truth[e][key] for e in ENDPOINTS) for key in STATUSES}
    view = desk.ok("GET", "/api/v1/overview", desk.alice)
    assert {card["endpoint"]: card["counts"] for card in view["endpoints"]} == truth
    assert view["totals"] == overall
    page = unescape(desk.client.get("/board").text)
    assert _board_pills(page) == pills(overall), page
    assert _board_cards(page) == truth
    for endpoint in ENDPOINTS:
        shown = _board_pills(unescape(desk.client.get(f"/board?endpoint={endpoint}").text))
        assert shown == pills(truth[endpoint]), endpoint
        html = unescape(desk.client.get(f"/board/endpoints/{endpoint}").text)
        card = dict(re.findall(r"<dt>(\w+)</dt><dd>(\d+)</dd>", html))
        assert {k: int(v) for k, v in card.items() if k in STATUSES} == truth[endpoint]
    # What each pill's list holds, walked as the list is.
    keys = list(PILLS)
    walked = desk.store.listings.count_scans(
        fleet.owner_id, [BoardFilter(pill=key).listing() for key in keys], cap=100_000
    )
    assert dict(zip(keys, walked, strict=True)) == pills(overall)
    return truth


def dead_now(engine: Engine) -> Counter[tuple[str, str, str, str, bool]]:
    with engine.connect() as conn:
        rows = conn.execute(DEAD_NOW).all()
    return Counter({(e, c, q, r, bool(revoked)): int(n) for e, c, q, r, revoked, n in rows})


def assert_filtered_dead_counts_true(fleet: Fleet) -> None:
    """The dead-letter count (and what a filter redrive would requeue) under every mix of
    endpoint, cause, queue and reason equals the dead letters that match now."""
    dead = dead_now(fleet.engine)
    causes = [
        *sorted({cause for _, cause, _, _, _ in dead}),
        "0123456789abcdef",
    ]  # and one none has
    role = fleet.desk.store.dead_letters
    for endpoint, cause, queue, reason in itertools.product(
        (None, *ENDPOINTS), (None, *causes), (None, *QUEUES), (None, *REASONS)
    ):
        matches = [
            (n, revoked)
            for (e, c, q, r, revoked), n in dead.items()
            if endpoint in (None, e) and cause in (None, c) and queue in (None, q)
            and reason in (None, r)
        ]  # fmt: skip
        f = DeadLetterFilter(reason=reason, endpoint=endpoint, queue=queue, cause=cause)
        expected = (sum(n for n, _ in matches), sum(n for n, revoked in matches if not revoked))
        assert (role.count(fleet.owner_id, f), role.redrivable(fleet.owner_id, f)) == expected, f
    # The same through the API's list and the board's page, for a reason, a queue and both.
    for query in ("?reason=attempts_exhausted", "?queue=bulk", "?reason=lease_expired&queue=bulk"):
        params = dict(p.split("=") for p in query[1:].split("&"))
        expected_count = sum(
            n for (_, _, q, r, _), n in dead.items()
            if params.get("queue") in (None, q) and params.get("reason") in (None, r)
        )  # fmt: skip
        assert fleet.desk.listing(query)["count"] == expected_count, query
        html = unescape(fleet.desk.client.get(f"/board?status=dead&{query[1:]}").text)
        assert _board_pills(html)["dead"] == expected_count, query


def assert_all_true(fleet: Fleet) -> dict[str, dict[str, int]]:
    truth = assert_counts_true(fleet)
    assert_filtered_dead_counts_true(fleet)
    return truth


def stats_outcomes(fleet: Fleet) -> dict[str, int]:
    done = cli_run(fleet.database_url, "stats", "--json")
    assert done.exit_code == 0, done.stderr
    outcomes: dict[str, int] = orjson.loads(done.stdout)["outcomes"]
    return outcomes


def test_every_pill_and_card_counts_what_exists_through_pruning_and_redrives(
    fleet: Fleet,
) -> None:
    # Old history on both endpoints, then past its retention.
    for endpoint in ENDPOINTS:
        fleet.finish(endpoint, [f"{endpoint}-old-done-{i}" for i in range(3)])
        fleet.fail_plainly(endpoint, [f"{endpoint}-old-bad-{i}" for i in range(2)])
    fleet.kill("pypi", [f"old-dead-{i}" for i in range(3)], "disk full on /var/tmp")
    fleet.kill("pypi", ["old-bulk-dead"], "disk full on /var/tmp", queue="bulk")
    fleet.desk.clock.advance(PAST_RETENTION)
    # Recent history, and live scans.
    fleet.finish("pypi", ["new-done-0", "new-done-1"], queue="bulk")
    fleet.fail_plainly("npm", ["new-bad"])
    recent = fleet.kill("pypi", ["new-dead-0", "new-dead-1"], "YARA timed out after 10 s")
    fleet.kill("pypi", ["new-bulk-dead"], "YARA timed out after 12 s", queue="bulk")
    fleet.lapse("pypi", ["vanished"], queue="bulk")
    fleet.desk.ok("POST", "/api/v1/scans", None, {"name": "drive-by", "version": "1",
                                                 "endpoint": "pypi"})  # fmt: skip
    before = assert_all_true(fleet)
    assert before["pypi"] == {"queued": 0, "paused": 0, "pending": 0, "finished": 5, "failed": 2,
                              "dead": 8, "quarantined": 1}  # fmt: skip
    ended = stats_outcomes(fleet)

    assert fleet.prune(PruneKind.FINISHED) == 6
    assert fleet.prune(PruneKind.FAILED) == 4
    assert fleet.prune(PruneKind.DEAD_LETTERED) == 4
    after = assert_all_true(fleet)
    assert after["pypi"] == {"queued": 0, "paused": 0, "pending": 0, "finished": 2, "failed": 0,
                             "dead": 4, "quarantined": 1}  # fmt: skip
    assert after["npm"] == {"queued": 0, "paused": 0, "pending": 0, "finished": 0, "failed": 1,
                            "dead": 0, "quarantined": 0}  # fmt: skip
    # The outcome totals keep counting every scan that ended, pruned or not.
    assert stats_outcomes(fleet) == ended

    # A redrive by id, and that scan's second death.
    redrive = {"scan_ids": [recent[0]]}
    assert fleet.desk.ok("POST", "/api/v1/dead-letters/redrive", fleet.desk.alice, redrive)
    assert_all_true(fleet)
    fleet.close_all("pypi", "failed", summary="YARA timed out after 14 s")
    assert assert_all_true(fleet)["pypi"]["dead"] == 4

    # Redriven again: it finishes this time; another, redriven, fails plainly.
    fleet.desk.ok("POST", "/api/v1/dead-letters/redrive", fleet.desk.alice, redrive)
    fleet.close_all("pypi", "finished")
    fleet.desk.ok("POST", "/api/v1/dead-letters/redrive", fleet.desk.alice,
                  {"scan_ids": [recent[1]]})  # fmt: skip
    fleet.close_all("pypi", "failed", retryable=False, summary="not a package")
    now = assert_all_true(fleet)["pypi"]
    assert (now["finished"], now["failed"], now["dead"]) == (3, 1, 2)

    # A revocation: npm's waiting scans become dead letters nobody may redrive.
    fleet.submit("npm", ["waiting-0", "waiting-1"], queue="bulk")
    fleet.desk.ok("POST", "/api/v1/endpoints/npm/revoke", fleet.desk.alice)
    assert assert_all_true(fleet)["npm"]["dead"] == 2

    # Everything is past its retention now: the redriven scans' new ends and the cascade's.
    fleet.desk.clock.advance(PAST_RETENTION)
    assert fleet.prune(PruneKind.FINISHED) == 3
    assert fleet.prune(PruneKind.FAILED) == 2
    assert fleet.prune(PruneKind.DEAD_LETTERED) == 4
    gone = assert_all_true(fleet)
    assert gone["pypi"] == {"queued": 0, "paused": 0, "pending": 0, "finished": 0, "failed": 0,
                            "dead": 0, "quarantined": 1}  # fmt: skip
    assert gone["npm"] == dict.fromkeys(STATUSES, 0)
    assert stats_outcomes(fleet)["finished"] == ended["finished"] + 1


def test_a_redrive_by_filter_and_an_operators_fail_keep_narrowed_counts_true(
    fleet: Fleet,
) -> None:
    fleet.kill("pypi", [f"bulk-{i}" for i in range(4)], "segfault in libyara", queue="bulk")
    fleet.kill("pypi", ["plain-0", "plain-1"], "segfault in libyara")
    fleet.lapse("pypi", ["slow-0"], queue="bulk")
    assert_filtered_dead_counts_true(fleet)
    body = {"filter": {"queue": "bulk", "reason": "attempts_exhausted"}, "confirm": 4}
    assert (
        fleet.desk.ok("POST", "/api/v1/dead-letters/redrive", fleet.desk.alice, body)["redriven"]
        == 4
    )
    assert fleet.desk.listing("?queue=bulk")["count"] == 1
    assert_filtered_dead_counts_true(fleet)
    # An operator fails two of the requeued scans: a leased one's last attempt (a dead letter
    # again) and a queued one for good (a plain failure).
    [job] = fleet.desk.ok("POST", "/api/v1/jobs", fleet.workers["pypi"])
    listed = fleet.desk.ok("GET", "/api/v1/scans?status=QUEUED", fleet.desk.alice)["scans"]
    for scan_id, body in ((job["scan_id"], {"summary": "operator gave up"}),
                          (listed[0]["scan_id"], {"retryable": False})):  # fmt: skip
        failed = fleet.desk.ok("POST", f"/api/v1/scans/{scan_id}/fail", fleet.desk.alice, body)
        assert failed["status"] == "FAILED"
    truth = assert_all_true(fleet)["pypi"]
    assert (truth["queued"], truth["failed"], truth["dead"]) == (2, 1, 4)
