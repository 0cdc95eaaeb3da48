"""The outcome totals a server adds to are spread over their rows by each transaction, not by
the connection it ran on: one connection's results land on many of an outcome's rows, so
another server process's connection never shares one with it for good (docs/scale-out.md,
*Outcome totals without a queue of writers*)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from tests.integration.conftest import World
from tests.integration.test_results_together import finished, finished_total, lease

RESULTS = 40


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer at a time and one row per outcome in use")


def test_one_connections_results_land_on_many_rows_of_the_total(
    world: World, engine: Engine
) -> None:
    for n in range(RESULTS):
        world.submit(f"pkg{n}")
    for job in lease(world, world.worker, RESULTS):
        world.store.results.complete(world.worker, [(job.scan_id, finished(job))], fetch=0)
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT count(*) FROM scan_totals WHERE outcome = 'finished' AND count > 0")
        ).scalar()
    assert finished_total(engine) == RESULTS
    # By the connection, all forty would sit on one row; drawn per transaction, forty draws
    # of 32 rows land on one row with a chance of 32**-39.
    assert rows is not None and rows > 1
