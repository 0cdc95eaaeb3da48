"""Where each way of reaching PostgreSQL gets the settings the store relies on, without a
database: the startup packet directly, one SET after connecting in session pooling, nothing
kept on the session in transaction pooling (docs/scale-out.md)."""

from __future__ import annotations

import pytest

from mainframe.parsers import libpq_url, redact_url
from mainframe.store.engine.pg_settings import SessionPolicy, not_in_force

# What PgBouncer passes on in the startup packet; anything else it refuses.
POOLER_PARAMETERS = {
    "application_name", "client_encoding", "datestyle", "timezone",
    "standard_conforming_strings",
}  # fmt: skip


def test_directly_every_setting_travels_in_the_startup_packet() -> None:
    policy = SessionPolicy("none", 5_000)
    startup = policy.startup()
    assert startup["statement_timeout"] == "5000" and startup["plan_cache_mode"]
    assert policy.prepares and not policy.sets_after_connect()


@pytest.mark.parametrize("mode", ["session", "transaction"])
def test_behind_a_pooler_only_what_it_passes_on(mode: str) -> None:
    assert set(SessionPolicy(mode).startup()) <= POOLER_PARAMETERS


def test_session_pooling_sets_them_once_and_keeps_prepared_statements() -> None:
    policy = SessionPolicy("session", 30_000)
    assert policy.prepares and policy.sets_after_connect()
    sets = policy.role_defaults()  # set once after connecting (engine's session_settings)
    assert sets["statement_timeout"] == "30000" and sets["jit"] == "off"


def test_transaction_pooling_keeps_nothing_on_the_session() -> None:
    policy = SessionPolicy("transaction")
    assert not policy.prepares and not policy.sets_after_connect()
    assert set(policy.role_defaults()) >= set(policy.relied_on())


def test_a_setting_not_in_force_is_named_with_what_was_found() -> None:
    policy = SessionPolicy("transaction", 30_000)
    found = dict(policy.relied_on()) | {"jit": "on", "statement_timeout": "0"}
    assert not_in_force(policy, found) == {"jit": "on", "statement_timeout": "0"}
    del found["plan_cache_mode"]
    assert not_in_force(policy, found)["plan_cache_mode"] == "?"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://mf:s3cr:et@db1:5432,db2:5432/mf?target_session_attrs=read-write",
         "postgresql://mf@db1:5432,db2:5432/mf?target_session_attrs=read-write"),
        ("postgresql://mf@db/mf?password=x&sslmode=require",
         "postgresql://mf@db/mf?sslmode=require"),
        ("postgresql://db/mf?password=x", "postgresql://db/mf"),
        ("sqlite:///./mainframe.db", "sqlite:///./mainframe.db"),
    ],
)  # fmt: skip
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_libpq_reads_the_url_itself_without_the_driver_suffix() -> None:
    multi = "postgresql+psycopg://u@h1:1,h2:2/d?target_session_attrs=read-write"
    assert libpq_url(multi) == "postgresql://u@h1:1,h2:2/d?target_session_attrs=read-write"


def test_a_calls_deadline_is_the_setting_and_a_lasting_one_has_the_statement_bound_too() -> None:
    policy = SessionPolicy("none", statement_timeout_ms=30_000, deadline_s=5.0)
    assert policy.deadline() == 5.0
    assert policy.deadline(lasting=True) == 35.0
    assert SessionPolicy("none", 30_000, 0.0).deadline() is None, "0 turns the bound off"
    assert SessionPolicy("none", 0, 5.0).deadline(lasting=True) is None, "no statement bound"


def test_transaction_pooling_keeps_prepared_statements_only_where_the_pooler_keeps_them() -> None:
    assert not SessionPolicy("transaction").prepares
    kept = SessionPolicy("transaction", pooler_prepares=True)
    assert kept.prepares, "PgBouncer >= 1.21 with max_prepared_statements"
    assert kept.startup() == SessionPolicy("transaction").startup()
    assert not kept.sets_after_connect()
