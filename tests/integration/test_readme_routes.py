"""The README's route table against the server itself: every operation the OpenAPI document
describes is a row, and every row names a route the application answers."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from mainframe.api.app import create_app
from mainframe.settings import Settings

README = Path(__file__).parents[2] / "README.md"
# A route in the table: `METHOD /path` (a `?query` hint may follow the path).
ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)[^`]*`")


def readme_routes() -> set[tuple[str, str]]:
    text = README.read_text()
    table = text[text.index("| route | who | what |") :]
    table = table[: table.index("\n\n")]
    return {
        (method, path)
        for row in table.splitlines()[2:]
        for method, path in ROUTE.findall(row.split(" | ")[0])
    }


@pytest.fixture(scope="module")
def app(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    path = tmp_path_factory.mktemp("readme") / "mainframe.db"
    shutil.copyfile(sqlite_template, path)
    yield create_app(Settings(database_url=f"sqlite:///{path}"), sweeper=False)


def documented(app: FastAPI) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }


def answered(client: TestClient, method: str, path: str) -> bool:
    """Whether the app has a route there: anything but 404 and 405 to a bare request."""
    return client.request(method, path, follow_redirects=False).status_code not in (404, 405)


def test_every_documented_operation_is_in_the_readme(app: FastAPI) -> None:
    missing = documented(app) - readme_routes()
    assert not missing, f"README's route table lacks {sorted(missing)}"


def test_every_route_in_the_readme_is_answered(app: FastAPI) -> None:
    with TestClient(app) as client:
        unknown = [
            (method, path)
            for method, path in sorted(readme_routes() - documented(app))
            if not answered(client, method, path)
        ]
    assert not unknown, f"README names routes the server does not have: {unknown}"


def test_the_table_is_read_at_all() -> None:
    # A table the pattern no longer matches would make both tests above vacuous.
    assert len(readme_routes()) >= 35
