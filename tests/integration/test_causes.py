"""Dead letters grouped by cause on both databases: the cause is stored when the attempt closes,
counted as dead letters are made and unmade on every path (a worker's last failure, a lapsed
lease, an operator's fail, a revocation, a redrive, a second death, a prune), and the
dead-letter list and the filter redrive narrow to one cause."""

from __future__ import annotations

from typing import Any

from anyio.from_thread import BlockingPortal

from mainframe.lifecycle.causes import cause_of
from mainframe.lifecycle.retention import PruneKind, RetentionPolicy
from mainframe.store import Report
from mainframe.store.audit import CLI
from mainframe.store.causes import CauseSummary
from mainframe.store.dead_letters import DeadLetterFilter
from mainframe.store.retention import Retention
from tests.blocking import Blocking
from tests.integration.conftest import JOB_TIMEOUT, MAX_ATTEMPTS, World

TIMEOUT = "YARA scan timed out after {} s on scratch/{}/pkg.tar.gz"


def kill(world: World, name: str, *summaries: str, queue: str = "default") -> int:
    """A scan failed once per summary (the last one at the cap): a dead letter."""
    scan_id = world.submit(name, queue=queue)
    for summary in (summaries * MAX_ATTEMPTS)[:MAX_ATTEMPTS]:
        [job] = [j for j in world.store.leasing.lease(world.worker, 10) if j.scan_id == scan_id]
        report = Report("failed", True, job.attempt, job.assignment_id, summary, None, None)
        world.store.results.report(world.worker, scan_id, report)
    return scan_id


def causes(world: World) -> dict[str, CauseSummary]:
    assert world.owner.owner_id is not None
    page = world.store.causes.page(world.owner.owner_id, endpoint=None, after=None, limit=50)
    return {item.pattern: item for item in page.items}


def listed(world: World, **given: Any) -> list[int]:
    assert world.owner.owner_id is not None
    page = world.store.dead_letters.page(
        world.owner.owner_id, DeadLetterFilter(**given), after=None, limit=100
    )
    return [item.scan.id for item in page.items]


def test_one_failure_with_different_details_is_one_cause_counted_once_per_dead_letter(
    world: World,
) -> None:
    first = kill(world, "a", TIMEOUT.format(10, "x1"))
    world.clock.advance(60)
    second = kill(world, "b", TIMEOUT.format(12, "y7"), queue="wheels")
    other = kill(world, "c", "KeyError: 'distributions'")
    found = causes(world)
    timeout = found["YARA scan timed out after <n> s on <path>"]
    assert timeout.dead_letters == 2 and found["KeyError: <quoted>"].dead_letters == 1
    assert timeout.last_seen_at - timeout.first_seen_at == 60 * 1_000_000
    assert timeout.example_scan_id == second
    assert dict(timeout.facets["queue"]) == {"default": 1, "wheels": 1}
    assert dict(timeout.facets["worker"]) == {"w1": 2}
    assert dict(timeout.facets["kind"]) == {"scan": 2}
    assert timeout.hours[-1] == 2 and sum(timeout.hours) == 2
    assert sorted(listed(world, cause=timeout.cause)) == [first, second]
    assert listed(world, cause=found["KeyError: <quoted>"].cause) == [other]
    assert (
        world.store.dead_letters.count(world.owner.owner_id, DeadLetterFilter(cause=timeout.cause))
        == 2
    )


def test_every_failed_attempt_keeps_its_cause(world: World) -> None:
    scan_id = kill(world, "a", "first: 1", "second: 2", "third: 3")
    assert world.owner.owner_id is not None
    attempts = world.store.listings.get_scan(world.owner.owner_id, scan_id).attempts
    assert [a.outcome for a in attempts] == ["failed"] * MAX_ATTEMPTS
    found = causes(world)
    assert set(found) == {"third: <n>"}, "a dead letter counts under its final attempt's"


def test_a_redrive_and_a_second_death_keep_the_counts_right(world: World) -> None:
    scan_id = kill(world, "a", TIMEOUT.format(10, "x"))
    assert world.owner.owner_id is not None
    key = cause_of("failed", TIMEOUT.format(10, "x")).key
    world.store.dead_letters.redrive_ids(world.owner.owner_id, [scan_id], origin=CLI)
    assert causes(world) == {}, "a redriven scan is no dead letter"
    assert listed(world, cause=key) == []
    for _ in range(MAX_ATTEMPTS):  # the redriven scan dies again, of something else
        [job] = world.store.leasing.lease(world.worker, 1)
        report = Report("failed", True, job.attempt, job.assignment_id, "OSError: disk full",
                        None, None)  # fmt: skip
        world.store.results.report(world.worker, scan_id, report)
    kill(world, "other", "OSError: disk full")  # another scan of the same cause
    found = causes(world)
    assert set(found) == {"OSError: disk full"} and found["OSError: disk full"].dead_letters == 2


def test_lapsed_leases_operator_fails_and_revocations_have_their_causes(world: World) -> None:
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


def test_a_filter_redrive_by_cause_requeues_exactly_that_cause(world: World) -> None:
    assert world.owner.owner_id is not None
    timeouts = [kill(world, f"t{i}", TIMEOUT.format(i, f"d{i}")) for i in range(3)]
    kill(world, "k", "KeyError: 'x'")
    key = cause_of("failed", TIMEOUT.format(1, "z")).key
    f = DeadLetterFilter(cause=key)
    assert world.store.dead_letters.redrivable(world.owner.owner_id, f) == 3
    done = world.store.dead_letters.redrive_filter(world.owner.owner_id, f, confirm=3, origin=CLI)
    assert done.redriven == 3
    assert set(causes(world)) == {"KeyError: <quoted>"}
    assert {j.scan_id for j in world.store.leasing.lease(world.worker, 10)} == set(timeouts)


def test_pruning_a_dead_letter_takes_it_out_of_its_count(
    world: World, loop: BlockingPortal
) -> None:
    kill(world, "old", "KeyError: 'x'")
    world.clock.advance(3600)
    kill(world, "new", "KeyError: 'y'")
    day = 86_400
    pruner = Blocking(Retention(world.store.target.db, RetentionPolicy.uniform(0)), loop)
    world.clock.advance(day)
    pruned = pruner.prune(PruneKind.DEAD_LETTERED, limit=1)
    assert pruned.count == 1
    [key_error] = causes(world).values()
    assert key_error.dead_letters == 1
    pruner.prune(PruneKind.DEAD_LETTERED, limit=10)
    assert causes(world) == {}


def test_the_causes_route_pages_newest_last_seen_first(api: Any) -> None:
    owner = api.owner
    for index, summary in enumerate(["KeyError: 'a'", "OSError: disk full", "ValueError: 1"]):
        scan = api.submit(f"p{index}")
        [job] = [j for j in api.lease(batch=10) if j["scan_id"] == scan["scan_id"]]
        body = {"outcome": "failed", "retryable": False, "summary": summary,
                "attempt": job["attempt"], "assignment_id": job["assignment_id"]}  # fmt: skip
        # A plain failure is no dead letter: fail it for good as the operator would instead.
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
    assert newest["queues"] == [{"value": "default", "dead_letters": 1}]
    rest = api.get(f"/api/v1/dead-letters/causes?cursor={first['next_cursor']}", owner).json()
    [older] = rest["causes"]
    assert (older["pattern"], older["count"]) == ("KeyError: <quoted>", 2)
    dead = api.get(f"/api/v1/dead-letters?cause={older['cause']}", owner).json()
    assert dead["count"] == 2 and {s["name"] for s in dead["scans"]} == {"d0", "d1"}
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
