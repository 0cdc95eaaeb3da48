"""The statements every close of an attempt writes beside the scan: its history row
(`INSERT_HISTORY`), its cause's name (`NAME_CAUSE`) and the outcome totals (`BUMP`, also for
a revocation's dead letters and a redrive that reopens one). The rows they take are built
by the pure core (lifecycle/reports.py::history_row, lifecycle/causes.py::named,
lifecycle/outcomes.py::increments); results.py (a worker's close), leasing.py (a lapse's),
interventions.py (an operator's), revoke.py and redrive.py run them in the transaction of
the close. PostgreSQL's COMPLETE writes all three for a worker's results itself."""

from __future__ import annotations

from mainframe.store.engine.statements import statement

INSERT_HISTORY = statement("insert_attempt")
BUMP = statement("bump_totals")
NAME_CAUSE = statement("name_cause")
