"""The fault tests run alone (Makefile: test) and time recoveries as production would see them:
their servers and stores keep production's database deadline, not the suite's longer one."""

from __future__ import annotations

import pytest

from mainframe.settings import Settings


@pytest.fixture(autouse=True)
def production_database_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    default = Settings.model_fields["database_deadline_seconds"].default
    monkeypatch.setenv("MAINFRAME_DATABASE_DEADLINE_SECONDS", str(default))
