"""Dead letters grouped by cause on both databases: the cause is stored when the attempt
closes, and every figure of a cause (its count, its queues, kinds and workers, its hours, its
oldest, newest and example) equals what a plain GROUP BY over the scans says after every
path that makes, unmakes or deletes a dead letter: a worker's last failure, a lapsed lease,
an operator's fail, a revocation, a redrive by id, by filter and by cause, a second death,
a prune. A cause hit on two endpoints is listed per endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal
from sqlalchemy import Engine, text

from mainframe.lifecycle.causes import cause_of
from mainframe.lifecycle.retention import RetentionPolicy
from mainframe.lifecycle.rules import PruneKind
from mainframe.store import Principal, Report
from mainframe.store.accounts.audit import CLI
from mainframe.store.operator.causes import CauseSummary
from mainframe.store.operator.dead_letters import DeadLetter, DeadLetterFilter
from mainframe.store.operator.retention import Retention
from tests.blocking import Blocking
from tests.integration.conftest import (
    JOB_TIMEOUT,
    MAX_ATTEMPTS,
    World,
    add_endpoint,
    issue,
    submit_scan,
)

TIMEOUT = "YARA scan timed out after {} s on scratch/{}/pkg.tar.gz"
TIMEOUT_PATTERN = "YARA scan timed out after <duration> on <path>"
RESHAPE = "ValueError: cannot reshape array of size {0} into shape ({0},)"
RESHAPE_PATTERN = "ValueError: cannot reshape array of size <n> into shape (<n>,)"
HOUR = 3600
HOUR_US = HOUR * 1_000_000
# A dead letter as the figures count it.
DEAD = "dead_lettered_at IS NOT NULL AND cause IS NOT NULL"


def kill(
    world: World,
    name: str,
    *summaries: str,
    queue: str = "default",
    kind: str = "scan",
    worker: Principal | None = None,
    source: Principal | None = None,
) -> int:
    """A scan failed once per summary (the last one at the cap): a dead letter."""
    worker = worker or world.worker
    spec = {"queue": queue, "name": name, "version": "1.0", "kind": kind, "payload": None}
    scan_id = int(submit_scan(world.store, source or world.source, endpoint=None, **spec)[0].id)
    for summary in (summaries * MAX_ATTEMPTS)[:MAX_ATTEMPTS]:
        [job] = world.store.leasing.lease(worker, 1)
        assert job.scan_id == scan_id
        report = Report("failed", True, job.attempt, job.assignment_id, summary, None, None)
        world.store.results.report(worker, scan_id, report)
    return scan_id


def die_again(world: World, scan_id: int, summary: str) -> None:
    """A redriven scan failed to its cap once more."""
    for _ in range(MAX_ATTEMPTS):
        [job] = world.store.leasing.lease(world.worker, 1)
        assert job.scan_id == scan_id
        report = Report("failed", True, job.attempt, job.assignment_id, summary, None, None)
        world.store.results.report(world.worker, scan_id, report)


def causes(world: World, endpoint: str | None = None) -> dict[str, CauseSummary]:
    assert world.owner.owner_id is not None
    page = world.store.causes.page(world.owner.owner_id, endpoint=endpoint, after=None, limit=50)
    return {item.pattern: item for item in page.items}


def pages(world: World, **given: Any) -> list[DeadLetter]:
    assert world.owner.owner_id is not None
    page = world.store.dead_letters.page(
        world.owner.owner_id, DeadLetterFilter(**given), after=None, limit=100
    )
    return list(page.items)


def listed(world: World, **given: Any) -> list[int]:
    return [item.scan.id for item in pages(world, **given)]


# --- the truth: plain SQL over the scans, beside what the triggers keep -------------------


@dataclass(frozen=True)
class Figures:
    # (endpoint_id, cause) -> (dead letters, oldest, newest, the newest's id)
    counts: dict[tuple[int, str], tuple[int, int, int, int]]
    facets: dict[tuple[int, str, str, str], int]  # (endpoint_id, cause, facet, value) -> hits
    hours: dict[tuple[int, str, int], int]  # (endpoint_id, cause, hour) -> dead letters


def truth(engine: Engine) -> Figures:
    """What the scans table says now, with one GROUP BY per figure."""
    with engine.connect() as conn:
        counts = {
            (e, c): (n, oldest, newest, example)
            for e, c, n, oldest, newest, example in conn.execute(
                text(
                    f"""
                    SELECT endpoint_id, cause, count(*), min(dead_lettered_at),
                           max(dead_lettered_at),
                           (SELECT max(newest.id) FROM scans AS newest
                            WHERE newest.endpoint_id = scans.endpoint_id
                              AND newest.cause = scans.cause
                              AND newest.dead_lettered_at = max(scans.dead_lettered_at))
                    FROM scans WHERE {DEAD} GROUP BY endpoint_id, cause
                    """
                )
            )
        }
        facets = {
            (e, c, facet, value): n
            for facet in ("queue", "kind", "worker")
            for e, c, value, n in conn.execute(
                text(
                    f"SELECT endpoint_id, cause, {facet}, count(*) FROM scans "
                    f"WHERE {DEAD} AND {facet} IS NOT NULL GROUP BY endpoint_id, cause, {facet}"
                )
            )
        }
        hours = {
            (e, c, hour): n
            for e, c, hour, n in conn.execute(
                text(
                    f"SELECT endpoint_id, cause, dead_lettered_at - dead_lettered_at % {HOUR_US}, "
                    f"count(*) FROM scans WHERE {DEAD} GROUP BY endpoint_id, cause, "
                    f"dead_lettered_at - dead_lettered_at % {HOUR_US}"
                )
            )
        }
    return Figures(counts, facets, hours)


def kept(engine: Engine) -> Figures:
    """What the triggers keep."""
    with engine.connect() as conn:
        counts = {
            (e, c): (n, oldest, newest, example)
            for e, c, n, oldest, newest, example in conn.execute(
                text(
                    "SELECT endpoint_id, cause, dead_letters, first_seen_at, last_seen_at, "
                    "example_scan_id FROM dead_letter_causes"
                )
            )
        }
        facets = {
            (e, c, facet, value): n
            for e, c, facet, value, n in conn.execute(
                text("SELECT endpoint_id, cause, facet, value, hits FROM cause_facets")
            )
        }
        hours = {
            (e, c, hour): n
            for e, c, hour, n in conn.execute(
                text("SELECT endpoint_id, cause, hour_us, dead_letters FROM cause_hours")
            )
        }
    return Figures(counts, facets, hours)


def assert_true(world: World, engine: Engine) -> Figures:
    """Every figure the triggers keep and the causes view shows equals the truth."""
    found = truth(engine)
    assert kept(engine) == found
    shown = {item.cause: item for item in causes(world).values()}
    assert set(shown) == {c for _, c in found.counts}
    for cause, item in shown.items():
        mine = [v for (_, c), v in found.counts.items() if c == cause]
        assert item.dead_letters == sum(n for n, *_ in mine)
        assert item.first_seen_at == min(oldest for _, oldest, _, _ in mine)
        assert item.last_seen_at == max(newest for _, _, newest, _ in mine)
        assert item.example_scan_id in {example for *_, example in mine}
        for facet in ("queue", "kind", "worker"):
            hits = sum(n for (_, c, f, _), n in found.facets.items() if (c, f) == (cause, facet))
            assert sum(f.dead_letters for f in item.facets[facet]) == hits
        assert sum(item.hours) == item.dead_letters  # each test's dead letters: the last day's
    return found


def of_cause(figures: Figures, cause: str) -> tuple[int, int, int, int]:
    """A cause's dead letters, and the sums of its queue hits, kind hits and hours."""
    return (
        sum(v[0] for (_, c), v in figures.counts.items() if c == cause),
        sum(n for (_, c, f, _), n in figures.facets.items() if (c, f) == (cause, "queue")),
        sum(n for (_, c, f, _), n in figures.facets.items() if (c, f) == (cause, "kind")),
        sum(n for (_, c, _), n in figures.hours.items() if c == cause),
    )


def no_rows_of(engine: Engine, cause: str) -> None:
    with engine.connect() as conn:
        for table in ("dead_letter_causes", "cause_facets", "cause_hours"):
            left = conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE cause = :c"), {"c": cause}
            )
            assert left.scalar_one() == 0, f"{table} keeps rows of an emptied cause"


# --- a bad day: one failure on two endpoints, in two queues, two kinds, over three hours --


@dataclass
class Day:
    key: str
    npm: list[int]  # its dead letters on npm: default/scan by w1, wheels/sbom by w2
    malware: list[int]  # and on pypi-malware, queue default


def bad_day(world: World) -> Day:
    add_endpoint(world.store, "bob", "pypi-malware", open_intake=False)
    source = world.store.authentication.authenticate(
        issue(world.store, "pypi-malware", "source", "feed2")
    )
    worker = world.store.authentication.authenticate(
        issue(world.store, "pypi-malware", "worker", "w3")
    )
    npm, malware = [], []
    for index in range(6):
        size = 10 ** (index + 1) + index  # 11 .. 1000005: the size of a number is no cause
        if index % 2:
            scan = kill(world, f"wheel-{index}", RESHAPE.format(size), queue="wheels",
                        kind="sbom", worker=world.other_worker)  # fmt: skip
        else:
            scan = kill(world, f"pkg-{index}", RESHAPE.format(size))
        npm.append(scan)
        if index in (1, 4):
            malware.append(kill(world, f"mal-{index}", RESHAPE.format(size), worker=worker,
                                source=source))  # fmt: skip
        world.clock.advance(HOUR // 2 + 7)
    kill(world, "other", "KeyError: 'distributions'")
    return Day(cause_of("failed", RESHAPE.format(1)).key, npm, malware)


@pytest.mark.parametrize("how", ["id", "filter", "cause"])
def test_redriving_two_dead_letters_moves_every_figure_of_their_cause(
    world: World, engine: Engine, how: str
) -> None:
    day = bad_day(world)
    assert world.owner.owner_id is not None
    total = len(day.npm) + len(day.malware)
    assert of_cause(assert_true(world, engine), day.key) == (total,) * 4
    redrive = world.store.dead_letters
    if how == "id":
        done = redrive.redrive_ids(world.owner.owner_id, day.npm[:2], origin=CLI)
    elif how == "filter":  # the newest two in npm's wheels, whatever their cause
        [since] = [i.scan.dead_lettered_at for i in pages(world) if i.scan.id == day.npm[3]]
        f = DeadLetterFilter(since=since, endpoint="npm", queue="wheels")
        assert redrive.redrivable(world.owner.owner_id, f) == 2
        done = redrive.redrive_filter(world.owner.owner_id, f, confirm=2, origin=CLI)
    else:
        f = DeadLetterFilter(cause=day.key, endpoint="pypi-malware")
        done = redrive.redrive_filter(world.owner.owner_id, f, confirm=2, origin=CLI)
    assert done.redriven == 2
    assert of_cause(assert_true(world, engine), day.key) == (total - 2,) * 4


def test_redriving_every_dead_letter_of_a_cause_leaves_it_no_row(
    world: World, engine: Engine
) -> None:
    day = bad_day(world)
    assert world.owner.owner_id is not None
    f = DeadLetterFilter(cause=day.key)
    done = world.store.dead_letters.redrive_filter(world.owner.owner_id, f, confirm=8, origin=CLI)
    assert done.redriven == 8
    assert_true(world, engine)
    no_rows_of(engine, day.key)
    assert set(causes(world)) == {"KeyError: <quoted>"}


def test_a_redriven_newest_and_oldest_hand_their_places_to_live_dead_letters(
    world: World, engine: Engine
) -> None:
    day = bad_day(world)
    assert world.owner.owner_id is not None
    newest, oldest = day.npm[-1], day.npm[0]
    world.store.dead_letters.redrive_ids(world.owner.owner_id, [newest, oldest], origin=CLI)
    found = assert_true(world, engine)
    [(count, first, last, example)] = [  # npm's row of the cause: its example is npm's
        v for (_, c), v in found.counts.items() if c == day.key and v[3] in day.npm
    ]
    on_npm = [i.scan for i in pages(world, cause=day.key, endpoint="npm")]
    assert count == 4 and example == day.npm[-2], "the example is a live dead letter"
    assert (first, last) == (on_npm[-1].dead_lettered_at, on_npm[0].dead_lettered_at)
    assert causes(world)[RESHAPE_PATTERN].example_scan_id not in (newest, oldest)


def test_pruning_takes_dead_letters_out_of_every_figure_and_empties_no_row_behind(
    world: World, engine: Engine, loop: BlockingPortal
) -> None:
    day = bad_day(world)
    pruner = Blocking(Retention(world.store.target.db, RetentionPolicy.uniform(0)), loop)
    world.clock.advance(1)
    assert pruner.prune(PruneKind.DEAD_LETTERED, limit=2).count == 2  # the two oldest
    found = assert_true(world, engine)
    assert of_cause(found, day.key) == (6,) * 4
    with engine.connect() as conn:
        oldest = conn.execute(
            text(f"SELECT min(dead_lettered_at) FROM scans WHERE {DEAD} AND cause = :c"),
            {"c": day.key},
        ).scalar_one()
    assert min(v[1] for (_, c), v in found.counts.items() if c == day.key) == oldest
    assert pruner.prune(PruneKind.DEAD_LETTERED, limit=100).count == 7
    assert_true(world, engine)
    no_rows_of(engine, day.key)
    assert causes(world) == {}


def test_a_revocation_and_a_second_death_after_a_redrive_keep_every_figure(
    world: World, engine: Engine
) -> None:
    assert world.owner.owner_id is not None
    scan_id = kill(world, "a", TIMEOUT.format(10, "x"))
    world.store.dead_letters.redrive_ids(world.owner.owner_id, [scan_id], origin=CLI)
    assert causes(world) == {} and listed(world, cause=cause_of("failed", "x").key) == []
    assert_true(world, engine)
    die_again(world, scan_id, "OSError: disk full")  # the redriven scan, of something else
    kill(world, "other", "OSError: disk full", queue="wheels")  # another of the same cause
    world.clock.advance(HOUR)
    second = kill(world, "b", TIMEOUT.format(99, "y"))
    world.store.dead_letters.redrive_ids(world.owner.owner_id, [second], origin=CLI)
    die_again(world, second, TIMEOUT.format(12345, "z"))  # a second death of the same cause
    live = [world.submit(f"live-{i}", queue="q2") for i in range(3)]
    world.store.leasing.lease(world.worker, 1)  # one of them PENDING when revoked
    world.store.revocations.revoke(world.owner.owner_id, "npm", origin=CLI)
    found = assert_true(world, engine)
    shown = causes(world)
    assert shown["OSError: disk full"].dead_letters == 2
    assert shown[TIMEOUT_PATTERN].dead_letters == 1
    revoked = shown[cause_of("endpoint_revoked", None).pattern]
    assert revoked.dead_letters == len(live) == sum(q.dead_letters for q in revoked.facets["queue"])
    assert [(f.value, f.dead_letters) for f in revoked.facets["worker"]] == [("w1", 1)]
    assert of_cause(found, revoked.cause)[0] == 3


def test_a_cause_hit_on_two_endpoints_is_listed_per_endpoint(world: World, engine: Engine) -> None:
    day = bad_day(world)
    pattern = RESHAPE_PATTERN
    everywhere = causes(world)[pattern]
    on_npm, on_malware = causes(world, "npm")[pattern], causes(world, "pypi-malware")[pattern]
    assert (everywhere.dead_letters, on_npm.dead_letters, on_malware.dead_letters) == (8, 6, 2)
    assert sum(on_npm.hours) == 6 and sum(on_malware.hours) == 2
    assert {(f.endpoint, f.value, f.dead_letters) for f in everywhere.facets["queue"]} == {
        ("npm", "default", 3),
        ("npm", "wheels", 3),
        ("pypi-malware", "default", 2),
    }, "two endpoints' default queues are two places"
    assert {(f.endpoint, f.value) for f in on_malware.facets["worker"]} == {("pypi-malware", "w3")}
    assert "KeyError: <quoted>" not in causes(world, "pypi-malware")
    assert on_malware.example_scan_id in day.malware
    assert_true(world, engine)


# --- where causes come from --------------------------------------------------------------


def test_one_failure_with_different_details_is_one_cause_counted_once_per_dead_letter(
    world: World,
) -> None:
    first = kill(world, "a", TIMEOUT.format(10, "x1"))
    world.clock.advance(60)
    second = kill(world, "b", TIMEOUT.format(150000, "y7"), queue="wheels")
    other = kill(world, "c", "KeyError: 'distributions'")
    found = causes(world)
    timeout = found[TIMEOUT_PATTERN]
    assert timeout.dead_letters == 2 and found["KeyError: <quoted>"].dead_letters == 1
    assert timeout.last_seen_at - timeout.first_seen_at == 60 * 1_000_000
    assert timeout.example_scan_id == second
    assert {(f.value, f.dead_letters) for f in timeout.facets["queue"]} == {
        ("default", 1),
        ("wheels", 1),
    }
    assert [(f.value, f.dead_letters) for f in timeout.facets["worker"]] == [("w1", 2)]
    assert [(f.value, f.dead_letters) for f in timeout.facets["kind"]] == [("scan", 2)]
    assert timeout.hours[-1] == 2 and sum(timeout.hours) == 2
    assert sorted(listed(world, cause=timeout.cause)) == [first, second]
    assert listed(world, cause=found["KeyError: <quoted>"].cause) == [other]
    assert world.owner.owner_id is not None
    assert (
        world.store.dead_letters.count(world.owner.owner_id, DeadLetterFilter(cause=timeout.cause))
        == 2
    )


def test_two_failures_of_one_cause_closed_in_one_request_name_it_once(
    world: World, engine: Engine
) -> None:
    """A batch of results whose failures share a cause (with other details) records the
    cause once and counts both dead letters (PostgreSQL inserts the batch's causes in one
    statement, where a key met twice is left to ON CONFLICT)."""
    names = ("a", "b")
    for name in names:
        spec = {"queue": "default", "name": name, "version": "1.0", "kind": "scan", "payload": None}
        submit_scan(world.store, world.source, endpoint=None, **spec)
    for attempt in range(MAX_ATTEMPTS):
        jobs = world.store.leasing.lease(world.worker, 2)
        assert len(jobs) == 2
        items = [
            (job.scan_id, Report("failed", True, job.attempt, job.assignment_id,
                                 TIMEOUT.format(10 + n, f"x{attempt}{n}"), None, None))
            for n, job in enumerate(jobs)
        ]  # fmt: skip
        outcomes = world.store.results.complete(world.worker, items).outcomes
        assert [outcome.error for outcome in outcomes] == [None, None]
    found = causes(world)
    assert list(found) == [TIMEOUT_PATTERN]
    assert found[TIMEOUT_PATTERN].dead_letters == 2
    assert_true(world, engine)


def test_a_listed_dead_letter_names_its_cause(world: World) -> None:
    scan_id = kill(world, "a", "KeyError: 'x'")
    assert world.owner.owner_id is not None
    page = world.store.dead_letters.page(
        world.owner.owner_id, DeadLetterFilter(), after=None, limit=10
    )
    [item] = page.items
    assert item.cause == cause_of("failed", "KeyError: 'y'")
    assert world.store.causes.of_scans(world.owner.owner_id, [scan_id]) == {scan_id: item.cause}
    assert world.store.causes.of_scans(world.owner.owner_id + 999, [scan_id]) == {}


def test_every_failed_attempt_keeps_its_cause(world: World, engine: Engine) -> None:
    scan_id = kill(world, "a", "first: 1", "second: 2", "third: 3")
    assert world.owner.owner_id is not None
    attempts = world.store.listings.get_scan(world.owner.owner_id, scan_id).attempts
    assert [a.outcome for a in attempts] == ["failed"] * MAX_ATTEMPTS
    with engine.connect() as conn:
        stored = [key for (key,) in conn.execute(
            text("SELECT cause FROM attempts WHERE scan_id = :s ORDER BY seq"), {"s": scan_id}
        )]  # fmt: skip
        versions = {v for (v,) in conn.execute(text("SELECT grouping_version FROM causes"))}
    assert stored == [cause_of("failed", f"{w}: 9").key for w in ("first", "second", "third")]
    assert versions == {2}, "each cause says which rules made it"
    assert set(causes(world)) == {"third: <n>"}, "a dead letter counts under its final attempt's"


def test_lapsed_leases_operator_fails_and_revocations_have_their_causes(
    world: World, engine: Engine
) -> None:
    assert world.owner.owner_id is not None
    lapsing = world.submit("lapsing")
    for _ in range(MAX_ATTEMPTS):
        world.store.leasing.lease(world.worker, 1)
        world.clock.advance(JOB_TIMEOUT + 1)
    world.store.leasing.sweep()
    failed = world.submit("failed-by-hand")
    for _ in range(MAX_ATTEMPTS):
        world.store.leasing.lease(world.worker, 1)
        world.store.interventions.fail(
            world.owner.owner_id, failed, retryable=True, summary="stuck on host 10.0.0.7"
        )
    live = [world.submit(f"live-{i}") for i in range(3)]
    world.store.revocations.revoke(world.owner.owner_id, "npm", origin=CLI)
    found = causes(world)
    lapse = cause_of("lease_expired", None).pattern
    revoked = cause_of("endpoint_revoked", None).pattern
    assert found[lapse].dead_letters == 1 and found[lapse].example_scan_id == lapsing
    assert found["stuck on host <address>"].dead_letters == 1
    assert found[revoked].dead_letters == len(live)
    assert sorted(listed(world, cause=found[revoked].cause)) == live
    assert_true(world, engine)


def test_the_causes_route_pages_newest_last_seen_first(api: Any) -> None:
    owner = api.owner
    for index, summary in enumerate(["KeyError: 'a'", "OSError: disk full", "ValueError: 1"]):
        scan = api.submit(f"p{index}")
        [job] = [j for j in api.lease(batch=10) if j["scan_id"] == scan["scan_id"]]
        body = {"outcome": "failed", "retryable": False, "summary": summary,
                "attempt": job["attempt"], "assignment_id": job["assignment_id"]}  # fmt: skip
        assert (
            api.post(f"/api/v1/jobs/{job['scan_id']}/result", api.worker, body).status_code == 200
        )
    assert api.get("/api/v1/dead-letters/causes", owner).json() == {
        "causes": [],
        "next_cursor": None,
    }, "plain failures are not dead letters"
    for index, summary in enumerate(["KeyError: 'a'", "KeyError: 'b'", "OSError: disk full"]):
        scan = api.submit(f"d{index}")
        for _ in range(3):
            [job] = [j for j in api.lease(batch=10) if j["scan_id"] == scan["scan_id"]]
            body = {"outcome": "failed", "summary": summary, "attempt": job["attempt"],
                    "assignment_id": job["assignment_id"]}  # fmt: skip
            api.post(f"/api/v1/jobs/{job['scan_id']}/result", api.worker, body)
    first = api.get("/api/v1/dead-letters/causes?limit=1", owner).json()
    [newest] = first["causes"]
    assert newest["pattern"] == "OSError: disk full" and newest["count"] == 1
    assert len(newest["last_24_hours"]) == 24 and newest["last_24_hours"][-1] == 1
    assert newest["queues"] == [{"endpoint": "pypi", "value": "default", "dead_letters": 1}]
    rest = api.get(f"/api/v1/dead-letters/causes?cursor={first['next_cursor']}", owner).json()
    [older] = rest["causes"]
    assert (older["pattern"], older["count"]) == ("KeyError: <quoted>", 2)
    dead = api.get(f"/api/v1/dead-letters?cause={older['cause']}", owner).json()
    assert dead["count"] == 2 and {s["name"] for s in dead["scans"]} == {"d0", "d1"}
    assert {(s["cause"]["cause"], s["cause"]["pattern"]) for s in dead["scans"]} == {
        (older["cause"], "KeyError: <quoted>")
    }, "a dead letter's record names its cause"
    refused = api.get("/api/v1/dead-letters?cause=nothex", owner)
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "query.cause"
    bad_cursor = api.get("/api/v1/dead-letters/causes?cursor=1-x", owner)
    assert bad_cursor.status_code == 422
    redrive = api.post(
        "/api/v1/dead-letters/redrive",
        owner,
        {"filter": {"cause": older["cause"]}, "confirm": 2},
    )
    assert redrive.status_code == 200 and redrive.json()["redriven"] == 2
    [left] = api.get("/api/v1/dead-letters/causes", owner).json()["causes"]
    assert left["pattern"] == "OSError: disk full"
