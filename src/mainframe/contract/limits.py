"""The bounds of the worker and intake contract, stated once for the server that enforces them
and the SDK that keeps within them."""

from __future__ import annotations

JOBS_PATH = "/api/v1/jobs"
# The largest id of any row a client may name (a scan, a hook, a token): within the
# database's signed 64 bits with room to spare, so a bound check never overflows a driver.
MAX_ID = 2**62
MAX_LEASE_BATCH = 100  # scans one job poll leases at most (`?batch=`)
MAX_NEXT = 100  # scans leased with a result at most (`?next=`)
MAX_REPORTS = 100  # results in one batch report at most
MAX_INTAKE_BATCH = 1000  # scans in one bulk submission at most
MAX_URL_LENGTH = 2048  # characters in a hook URL at most
MAX_NAME = 64  # characters in a name (endpoint, queue, credential, owner) at most
MAX_PAYLOAD_BYTES = 65_536  # a scan's payload, as stored JSON
MAX_RESULT_BYTES = 262_144  # a result's structured `result`, as stored JSON
MAX_ASSIGNMENT_ID = 64  # characters in an assignment id
MAX_ATTEMPT = 1_000_000  # the largest attempt number a result may echo
MAX_REDRIVE_IDS = 1000  # scans one redrive by ids names at most
MAX_QUERY_LENGTH = 300  # a search term's characters; a longer one cannot match a bounded name
MAX_STATS_SPAN_S = 24 * 3600  # the longest window one delivery-stats request may ask for
MAX_SUMMARY = 8192  # characters in an attempt's summary at most
MAX_ARTIFACT = 2048  # characters in an attempt's artifact (a report's URL or path) at most
