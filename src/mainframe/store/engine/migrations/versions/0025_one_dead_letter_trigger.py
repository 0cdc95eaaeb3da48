"""One trigger on PostgreSQL where three kept the dead letters' counts on an UPDATE of `scans`:
the by-key counts of revision 0021 and the causes' counts (in, out) of revision 0020 now run
from one function, behind a WHEN of two null tests. SQLite keeps its triggers.

Why: every close of an attempt sets `dead_lettered_at`, `cause` and `fail_reason`, so every
close made PostgreSQL read each of the three WHEN clauses back from their stored text and
compile them, once per statement, before finding that none fired (`stringToNode` under
`ExecARUpdateTriggers`, 7 % of PostgreSQL's time for a result at batch 1 in `perf`). The
function tests the same three conditions, in the order the triggers fired (by name), with
the same statements, which it takes from the two revisions that wrote them.

Measured (bench/result_loop.py: one connection closing a result and leasing the next, 4,000
times, after 3,000 more and an ANALYZE; PostgreSQL's CPU per result, 2026-12-06): 430-447 µs
before, 395-417 after. Nothing is rewritten: a trigger and a function are made and three
triggers dropped.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0025"
down_revision = "0024"

TRIGGERS = ("tr_scans_dead_letter_counts", "tr_scans_dead_letter_in", "tr_scans_dead_letter_out")
# Every condition the function tests needs a dead letter before or after the update.
EITHER_DEAD = "OLD.dead_lettered_at IS NOT NULL OR NEW.dead_lettered_at IS NOT NULL"
COUNTED = "dead_lettered_at, cause, queue, fail_reason"


def _revision(name: str) -> ModuleType:
    """An earlier revision's module, for the statements its triggers ran."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_mainframe_revision_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _conditions() -> tuple[ModuleType, ModuleType, str, str]:
    """The two revisions, and 0021's conditions as it spelled them for PostgreSQL."""
    counts, causes = _revision("0021_counts_now"), _revision("0020_regrouped_causes")
    changed = counts.KEY_CHANGED.replace(" IS NOT ", " IS DISTINCT FROM ")
    was = counts.WAS_COUNTED.replace(counts.KEY_CHANGED, changed)
    now = counts.IS_COUNTED.replace(counts.KEY_CHANGED, changed)
    return counts, causes, was, now


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    counts, causes, was, now = _conditions()
    op.execute(
        f"""
        CREATE FUNCTION mf_dead_letter_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE remaining bigint;
        BEGIN
            IF {was} THEN {counts._take("OLD")} END IF;
            IF {now} THEN {counts._add("NEW")} END IF;
            IF {causes.CAME} THEN {causes._added("NEW", "GREATEST", "LEAST")} END IF;
            IF {causes.WENT} THEN {causes._removed("OLD", postgresql=True)} END IF;
            RETURN NULL;
        END $$
        """
    )
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON scans")
    op.execute(
        f"CREATE TRIGGER tr_scans_dead_letter_updated AFTER UPDATE OF {COUNTED} ON scans "
        f"FOR EACH ROW WHEN ({EITHER_DEAD}) EXECUTE FUNCTION mf_dead_letter_updated()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _, causes, was, now = _conditions()
    op.execute("DROP TRIGGER tr_scans_dead_letter_updated ON scans")
    op.execute("DROP FUNCTION mf_dead_letter_updated()")
    op.execute(
        f"CREATE TRIGGER tr_scans_dead_letter_counts AFTER UPDATE OF {COUNTED} ON scans "
        f"FOR EACH ROW WHEN (({was}) OR ({now})) EXECUTE FUNCTION mf_count_dead_letters_by_key()"
    )
    for name, when, way in (("in", causes.CAME, "in"), ("out", causes.WENT, "out")):
        op.execute(
            f"CREATE TRIGGER tr_scans_dead_letter_{name} AFTER {causes.WRITES} ON scans "
            f"FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION mf_count_dead_letters('{way}')"
        )
