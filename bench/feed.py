"""A source that holds the backlog at its size while the worker loop drains it. A loop figure
is taken at a queue size; a backlog smaller than what the loop finishes in its warm-up and
window would run dry before the window and measure nothing (0 scans/s), so below that size
this thread submits new scans through the bulk route whenever the backlog, as the servers'
success counters tell it, falls below its size. Its requests cost the servers CPU, which the
figure's note says; it looks a few times a second, since each look renders every server's
/metrics page (at fifty looks a second those renders and the small submissions they set off
were a fifth of the server's samples at batch 1)."""

from __future__ import annotations

import json
import threading
import urllib.request

from servers import Stack

BULK_ITEMS = 1_000  # the bulk route's limit
# Between looks at the counters: the loop finishes a few hundred scans meanwhile, a few
# tenths of a percent of the smallest backlog `drains` lets the loop run on.
PAUSE_SECONDS = 0.25
TIMEOUT_SECONDS = 30.0


def drains(size: int, *, ceiling_rps: float, seconds: float) -> bool:
    """Whether a loop could finish `size` scans within `seconds`: at most one scan per request
    of the ceiling, and some margin for batches above one."""
    return size < 2 * ceiling_rps * seconds


class Feeder(threading.Thread):
    """Submits scans while the loop runs, keeping about `size` queued; `stop` ends it."""

    def __init__(self, stack: Stack, token: str, size: int, label: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.token, self.size, self.label = stack, token, size, label
        self.submitted = 0
        self._stopped = threading.Event()
        self._finished_at_start = stack.success_total()

    def run(self) -> None:
        url = self.stack.urls[0] + "/api/v1/scans/batch"
        while not self._stopped.is_set():
            # The backlog is its size plus what was fed less what was finished: it is short by
            # what was finished and not fed yet.
            finished = self.stack.success_total() - self._finished_at_start
            short = round(finished) - self.submitted
            while short > 0 and not self._stopped.is_set():
                count = min(BULK_ITEMS, short)
                self._submit(url, count)
                self.submitted += count
                short -= count
            self._stopped.wait(PAUSE_SECONDS)

    def _submit(self, url: str, count: int) -> None:
        first = self.submitted
        scans = [{"name": f"{self.label}-{first + i}", "version": "1.0.0"} for i in range(count)]
        request = urllib.request.Request(
            url,
            data=json.dumps({"scans": scans}).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            response.read()

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=TIMEOUT_SECONDS)
