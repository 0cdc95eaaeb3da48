"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.alertmanager import running_alertmanager


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    """The URL of a real Alertmanager, stopped after the test."""
    with running_alertmanager(tmp_path) as url:
        yield url
