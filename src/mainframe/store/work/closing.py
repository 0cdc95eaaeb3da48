"""The statements every close of an attempt writes beside the scan: its history row
(`INSERT_HISTORY`), its cause's name (`NAME_CAUSE`) and the outcome totals (`BUMP`, also for
a revocation's dead letters and a redrive that reopens one). The rows they take are built
by the pure core (lifecycle/reports.py::history_row, lifecycle/causes.py::named,
lifecycle/outcomes.py::increments); results.py (a worker's close), leasing.py (a lapse's),
interventions.py (an operator's), revoke.py and redrive.py run them in the transaction of
the close. PostgreSQL's COMPLETE writes all three for a worker's results itself."""

from __future__ import annotations

from mainframe.store.engine.database import Sql

INSERT_HISTORY = Sql(
    "insert_attempt",
    """
    INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                          outcome, summary, artifact, settled_status, settled_available_at,
                          settled_fail_reason, next_assignments, result_digest, cause)
    VALUES (:scan, :seq, :attempt, :assignment, :worker, :leased_at, mf_now(), :outcome,
            :summary, :artifact, :settled_status, :settled_available_at,
            :settled_fail_reason, :next_assignments, :result_digest, :cause)
    """,
)
BUMP = Sql(
    "bump_totals",
    """
    UPDATE scan_totals SET count = count + :n
    WHERE endpoint_id = :endpoint AND outcome = :outcome AND shard = :shard
    """,
)
# A cause's pattern under its key, with the version of the rules that made it, the first
# time any attempt fails of it.
NAME_CAUSE = Sql(
    "name_cause",
    """
    INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
    VALUES (:cause, :pattern, mf_now(), :grouping_version)
    ON CONFLICT (cause) DO NOTHING
    """,
)
