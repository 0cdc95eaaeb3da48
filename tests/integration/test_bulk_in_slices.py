"""A bulk submission of a thousand scans is checked, stored and answered in slices, and the
process's other requests run between them (docs/performance.md, *Bulk requests in slices*)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mainframe.api.app import create_app
from mainframe.settings import Settings
from mainframe.store.accounts.owners import OPERATOR
from mainframe.turns import ITEMS_PER_TURN

pytestmark = pytest.mark.anyio

SCANS = 1000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_full_bulk_submission_lets_the_process_serve_others_between_its_slices(
    database_url: str,
) -> None:
    """Another task of the process runs after every slice of the items' checks, of their
    records and of their answers. On SQLite the database's own work runs inline, so every
    turn counted is a slice's; on PostgreSQL the loop also runs while the database answers,
    which would count turns the slices did not give."""
    if not database_url.startswith("sqlite"):
        pytest.skip("only SQLite's inline statements leave the slices as the only turns")
    app = create_app(Settings(database_url=database_url), sweeper=False)
    store = app.state.runtime.store
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async with app.router.lifespan_context(app):
        await store.owners.create_owner("alice")
        owner = await store.owners.owner_id("alice")
        await store.owners.create_endpoint(owner, "pypi", open_intake=False, origin="cli")
        made = await store.owners.create_token(
            OPERATOR, "pypi", role="source", principal="feed", origin="cli"
        )
        body = {"scans": [{"name": f"p{i}", "version": "1"} for i in range(SCANS)]}
        headers = {"Authorization": f"Bearer {made[1]}"}
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            ticking = asyncio.create_task(ticker())
            await asyncio.sleep(0)
            before = turns
            reply = await http.post("/api/v1/scans/batch", json=body, headers=headers)
            during = turns - before
            ticking.cancel()
    assert reply.status_code == 200, reply.text
    assert [r["status"] for r in reply.json()["results"]] == [201] * SCANS
    # Checked, recorded and answered, each in slices of ITEMS_PER_TURN. Without slices the
    # whole request ran in a handful of steps of the loop.
    assert during >= 3 * (SCANS // ITEMS_PER_TURN)
