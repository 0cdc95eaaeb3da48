"""A server process takes what its start-up built out of the garbage collector's reach, so a
full collection under load walks only what serving made since (docs/performance.md, *The
collector's pauses*); an app that shares its process (a test's) leaves the collector be."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from mainframe.api.app import create_app
from mainframe.settings import Settings


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as before


def serve_once(database_url: str, *, own_process: bool) -> int:
    """How many objects the collector no longer walks once the app has started."""
    settings = Settings(database_url=database_url, job_timeout=60)
    with TestClient(create_app(settings, sweeper=False, own_process=own_process)) as client:
        assert client.get("/healthz").status_code == 200
        return gc.get_freeze_count()


@pytest.mark.usefixtures("unfrozen")
def test_a_server_process_keeps_its_start_up_out_of_every_collection(database_url: str) -> None:
    made_before = ["made before the server started"]  # a list: the collector tracks it
    frozen = serve_once(database_url, own_process=True)
    made_after = ["made after"]
    walked = gc.get_objects()  # what a full collection walks now
    assert not any(o is made_before for o in walked)
    assert any(o is made_after for o in walked)
    assert len(walked) < frozen


@pytest.mark.usefixtures("unfrozen")
def test_an_app_sharing_its_process_leaves_the_collector_be(database_url: str) -> None:
    assert serve_once(database_url, own_process=False) == 0
