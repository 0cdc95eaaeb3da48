-- The operator's reads and actions: dead letters and their causes, redrive, revocation, listings,
-- the overview, queues, activity, retention.
-- Loaded by name (store/engine/statements.py): `:name` parameters, `mf_now()` the
-- deployment's clock in microseconds.

-- name: add_activity
INSERT INTO activity (endpoint_id, worker, span, at_us, finished, failed, dead_lettered,
                      attempt_failures, lapsed)
VALUES (:endpoint, :worker, :span, mf_now() - mf_now() % :span_us, :finished, :failed,
        :dead_lettered, :attempt_failures, :lapsed)
ON CONFLICT (endpoint_id, worker, span, at_us) DO UPDATE SET
    finished = activity.finished + excluded.finished,
    failed = activity.failed + excluded.failed,
    dead_lettered = activity.dead_lettered + excluded.dead_lettered,
    attempt_failures = activity.attempt_failures + excluded.attempt_failures,
    lapsed = activity.lapsed + excluded.lapsed;

-- name: prune_activity
-- Rows of a span past what the charts show, oldest first (ix_activity_at).
DELETE FROM activity WHERE span = :span AND at_us < mf_now() - :kept;

-- name: activity_chart
-- The owner's counts per bar of a span since :since, every endpoint and worker summed.
SELECT activity.at_us, SUM(activity.finished) AS finished, SUM(activity.failed) AS failed,
       SUM(activity.dead_lettered) AS dead_lettered
FROM activity JOIN endpoints ON endpoints.id = activity.endpoint_id
WHERE endpoints.owner_id = :owner AND activity.span = :span AND activity.at_us >= :since
GROUP BY activity.at_us;

-- name: workers_last_hour
-- One endpoint's workers over the last hour, by minute rows.
SELECT worker, SUM(finished) AS finished, SUM(attempt_failures) AS attempt_failures,
       SUM(lapsed) AS lapsed
FROM activity
WHERE endpoint_id = :endpoint AND span = 'minute' AND at_us >= mf_now() - 3600000000
GROUP BY worker;

-- name: leases_held
-- The leases each worker of the endpoint holds now (live or lapsed, not yet reaped).
SELECT worker, count(*) AS leases FROM scans
WHERE endpoint_id = :endpoint AND status = 'PENDING'
GROUP BY worker;

-- name: dead_letters_of_cause
-- A cause's dead letters now, over the owner's endpoints (or one), and of them those on
-- endpoints not revoked (what a redrive of the cause requeues): the kept counts.
SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0) AS matching,
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_causes.dead_letters ELSE 0 END), 0) AS redrivable
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = :owner AND dead_letter_causes.cause = :cause
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint);

-- name: causes_page
-- One page of causes with dead letters now, newest last seen first, strictly after the
-- keyset (:after_seen, :after_cause): the owner's endpoints' rows of dead_letter_causes (one
-- per endpoint and cause with dead letters, whatever the scans table holds), summed per cause.
SELECT counted.cause, causes.pattern, counted.dead_letters, counted.first_seen_at,
       counted.last_seen_at, counted.example_scan_id
FROM (
    SELECT dead_letter_causes.cause, SUM(dead_letter_causes.dead_letters) AS dead_letters,
           MIN(dead_letter_causes.first_seen_at) AS first_seen_at,
           MAX(dead_letter_causes.last_seen_at) AS last_seen_at,
           MAX(dead_letter_causes.example_scan_id) AS example_scan_id
    FROM dead_letter_causes JOIN endpoints
        ON endpoints.id = dead_letter_causes.endpoint_id
    WHERE endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
    GROUP BY dead_letter_causes.cause
) AS counted JOIN causes ON causes.cause = counted.cause
WHERE (counted.last_seen_at, counted.cause) < (:after_seen, :after_cause)
ORDER BY counted.last_seen_at DESC, counted.cause DESC
LIMIT :limit;

-- name: cause_facets @sqlite
-- The queues, kinds and workers the page's causes hit (a JSON list of keys), each on its
-- endpoint (two endpoints' `default` queues are two facets), most hits first.
SELECT cause_facets.cause, cause_facets.facet, endpoints.name AS endpoint, cause_facets.value,
       cause_facets.hits
FROM cause_facets JOIN endpoints ON endpoints.id = cause_facets.endpoint_id
WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND cause_facets.cause IN (SELECT value FROM json_each(:causes))
ORDER BY cause_facets.hits DESC, endpoints.name, cause_facets.value;

-- name: cause_facets @postgresql
SELECT cause_facets.cause, cause_facets.facet, endpoints.name AS endpoint, cause_facets.value,
       cause_facets.hits
FROM cause_facets JOIN endpoints ON endpoints.id = cause_facets.endpoint_id
WHERE endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND cause_facets.cause IN (SELECT jsonb_array_elements_text(CAST(:causes AS jsonb)))
ORDER BY cause_facets.hits DESC, endpoints.name, cause_facets.value;

-- name: cause_hours @sqlite
-- The page's causes' dead letters per hour since :since (the sparklines).
SELECT cause_hours.cause, cause_hours.hour_us, SUM(cause_hours.dead_letters) AS dead_letters
FROM cause_hours JOIN endpoints ON endpoints.id = cause_hours.endpoint_id
WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND cause_hours.cause IN (SELECT value FROM json_each(:causes))
  AND cause_hours.hour_us >= :since
GROUP BY cause_hours.cause, cause_hours.hour_us;

-- name: cause_hours @postgresql
SELECT cause_hours.cause, cause_hours.hour_us, SUM(cause_hours.dead_letters) AS dead_letters
FROM cause_hours JOIN endpoints ON endpoints.id = cause_hours.endpoint_id
WHERE endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND cause_hours.cause IN (SELECT jsonb_array_elements_text(CAST(:causes AS jsonb)))
  AND cause_hours.hour_us >= :since
GROUP BY cause_hours.cause, cause_hours.hour_us;

-- name: cause_pattern
-- A cause's pattern, by its key.
SELECT pattern FROM causes WHERE cause = :cause;

-- name: causes_of_scans @sqlite
-- The causes of the owner's dead letters among :ids (a JSON list), each found by key.
SELECT scans.id, causes.cause, causes.pattern, causes.grouping_version
FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
JOIN causes ON causes.cause = scans.cause
WHERE scans.id IN (SELECT value FROM json_each(:ids)) AND endpoints.owner_id = :owner;

-- name: causes_of_scans @postgresql
SELECT scans.id, causes.cause, causes.pattern, causes.grouping_version
FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
JOIN causes ON causes.cause = scans.cause
WHERE scans.id = ANY(ARRAY(
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
)) AND endpoints.owner_id = :owner;

-- name: list_dead_letters
-- One page newest first, strictly after the keyset (:after_at, :after_id), each row with its
-- final attempt (NULLs when it was never leased); every filter optional (NULL: any). The
-- plan walks ix_scans_dead_recent backwards from the keyset and stops after :limit rows.
-- CROSS JOIN keeps scans the outer loop on SQLite, which would otherwise start from the
-- owner's endpoints and sort every dead letter they hold; PostgreSQL plans it as any join.
-- One text for both databases, as the three listings after it: the casts give PostgreSQL
-- each optional parameter's type, and SQLite plans them as it plans the bare parameter.
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM scans
CROSS JOIN endpoints
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.id = scans.endpoint_id
  AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
  AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (scans.dead_lettered_at, scans.id) < (:after_at, :after_id)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT :limit;

-- name: list_dead_letters_of_cause
-- One cause's page (the causes view opens it): the same, walking ix_scans_dead_cause
-- (cause, dead_lettered_at, id) backwards from the keyset, so a rare cause among a million
-- dead letters reads only its own. Not the listing with an optional cause: that walks
-- ix_scans_dead_recent for a cause on SQLite, and sorts in PostgreSQL's generic plan.
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM scans
CROSS JOIN endpoints
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
WHERE scans.cause = :cause AND scans.dead_lettered_at IS NOT NULL
  AND endpoints.id = scans.endpoint_id
  AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
  AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (scans.dead_lettered_at, scans.id) < (:after_at, :after_id)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT :limit;

-- name: search_dead_letters @sqlite
-- A search (store/work/search.py: :pattern over name, source and kind, or :term_id the id) finds
-- its matches first, then sorts them: walking the listing's order instead would read every
-- dead letter for a rare term. On PostgreSQL the matches are a bitmap of the trigram index
-- ix_scans_dead_search, which needs the pattern planned as a constant (see `_with_values`).
WITH matched AS MATERIALIZED (
    SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.dead_lettered_at IS NOT NULL
      AND endpoints.owner_id = :owner
      AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND (scans.name LIKE :pattern ESCAPE '\' OR scans.source LIKE :pattern ESCAPE '\'
           OR scans.kind LIKE :pattern ESCAPE '\' OR scans.id = :term_id)
      AND (:reason IS NULL OR scans.fail_reason = :reason)
      AND (:since IS NULL OR scans.dead_lettered_at >= :since)
      AND (:queue IS NULL OR scans.queue = :queue)
      AND (:cause IS NULL OR scans.cause = :cause)
      AND (scans.dead_lettered_at, scans.id) < (:after_at, :after_id)
)
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM matched
JOIN scans ON scans.id = matched.id
JOIN endpoints ON endpoints.id = scans.endpoint_id
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT :limit;

-- name: search_dead_letters @postgresql
WITH matched AS MATERIALIZED (
    SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.dead_lettered_at IS NOT NULL
      AND endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND (scans.name ILIKE :pattern ESCAPE '\' OR scans.source ILIKE :pattern ESCAPE '\'
           OR scans.kind ILIKE :pattern ESCAPE '\' OR scans.id = :term_id)
      AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
      AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
      AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
      AND (CAST(:cause AS text) IS NULL OR scans.cause = :cause)
      AND (scans.dead_lettered_at, scans.id) < (:after_at, :after_id)
)
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM matched
JOIN scans ON scans.id = matched.id
JOIN endpoints ON endpoints.id = scans.endpoint_id
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT :limit;

-- name: list_dead_letters_newer
-- The way back from a later page: the dead letters newer than the keyset (:newer_at,
-- :newer_id), oldest first, walking ix_scans_dead_recent forwards; the caller reverses them.
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM scans
CROSS JOIN endpoints
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.id = scans.endpoint_id
  AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
  AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (scans.dead_lettered_at, scans.id) > (:newer_at, :newer_id)
ORDER BY scans.dead_lettered_at, scans.id
LIMIT :limit;

-- name: list_dead_letters_of_cause_newer
-- One cause's page before a keyset, walking ix_scans_dead_cause forwards.
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM scans
CROSS JOIN endpoints
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
WHERE scans.cause = :cause AND scans.dead_lettered_at IS NOT NULL
  AND endpoints.id = scans.endpoint_id
  AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
  AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (scans.dead_lettered_at, scans.id) > (:newer_at, :newer_id)
ORDER BY scans.dead_lettered_at, scans.id
LIMIT :limit;

-- name: search_dead_letters_newer @sqlite
-- A search's page before a keyset: its matches newer than the keyset, oldest first.
WITH matched AS MATERIALIZED (
    SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.dead_lettered_at IS NOT NULL
      AND endpoints.owner_id = :owner
      AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND (scans.name LIKE :pattern ESCAPE '\' OR scans.source LIKE :pattern ESCAPE '\'
           OR scans.kind LIKE :pattern ESCAPE '\' OR scans.id = :term_id)
      AND (:reason IS NULL OR scans.fail_reason = :reason)
      AND (:since IS NULL OR scans.dead_lettered_at >= :since)
      AND (:queue IS NULL OR scans.queue = :queue)
      AND (:cause IS NULL OR scans.cause = :cause)
      AND (scans.dead_lettered_at, scans.id) > (:newer_at, :newer_id)
)
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM matched
JOIN scans ON scans.id = matched.id
JOIN endpoints ON endpoints.id = scans.endpoint_id
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
ORDER BY scans.dead_lettered_at, scans.id
LIMIT :limit;

-- name: search_dead_letters_newer @postgresql
WITH matched AS MATERIALIZED (
    SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.dead_lettered_at IS NOT NULL
      AND endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND (scans.name ILIKE :pattern ESCAPE '\' OR scans.source ILIKE :pattern ESCAPE '\'
           OR scans.kind ILIKE :pattern ESCAPE '\' OR scans.id = :term_id)
      AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
      AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
      AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
      AND (CAST(:cause AS text) IS NULL OR scans.cause = :cause)
      AND (scans.dead_lettered_at, scans.id) > (:newer_at, :newer_id)
)
SELECT scans.*, endpoints.name AS endpoint,
       final.seq AS final_seq, final.attempt AS final_attempt, final.worker AS final_worker,
       final.leased_at AS final_leased_at, final.closed_at AS final_closed_at,
       final.outcome AS final_outcome, final.summary AS final_summary,
       final.artifact AS final_artifact
FROM matched
JOIN scans ON scans.id = matched.id
JOIN endpoints ON endpoints.id = scans.endpoint_id
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
ORDER BY scans.dead_lettered_at, scans.id
LIMIT :limit;

-- name: count_dead_letters @sqlite
-- How many dead letters a search or a time matches (with any other filter; the search
-- optional, NULL: none), and how many of them a filter redrive would requeue now (a revoked
-- endpoint's are never redriven): the number its `confirm` states. One pass for both: the
-- endpoint's column is read after the join either way.
SELECT count(*) AS matching,
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL THEN 1 ELSE 0 END), 0) AS redrivable
FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.owner_id = :owner
  AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\'
       OR scans.source LIKE :pattern ESCAPE '\' OR scans.kind LIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND (:reason IS NULL OR scans.fail_reason = :reason)
  AND (:since IS NULL OR scans.dead_lettered_at >= :since)
  AND (:queue IS NULL OR scans.queue = :queue)
  AND (:cause IS NULL OR scans.cause = :cause);

-- name: count_dead_letters @postgresql
SELECT count(*) AS matching,
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL THEN 1 ELSE 0 END), 0) AS redrivable
FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\'
       OR scans.source ILIKE :pattern ESCAPE '\' OR scans.kind ILIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
  AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (CAST(:cause AS text) IS NULL OR scans.cause = :cause);

-- name: dead_letter_ids @sqlite
-- Every match a filter redrive requeues, newest first: a revoked endpoint's dead letters are
-- listed and counted on the Dead pill, but never redriven, so they are not here.
SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.owner_id = :owner AND endpoints.revoked_at IS NULL
  AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\'
       OR scans.source LIKE :pattern ESCAPE '\' OR scans.kind LIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND (:reason IS NULL OR scans.fail_reason = :reason)
  AND (:since IS NULL OR scans.dead_lettered_at >= :since)
  AND (:queue IS NULL OR scans.queue = :queue)
  AND (:cause IS NULL OR scans.cause = :cause)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC;

-- name: dead_letter_ids @postgresql
SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.owner_id = :owner AND endpoints.revoked_at IS NULL
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\'
       OR scans.source ILIKE :pattern ESCAPE '\' OR scans.kind ILIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND (CAST(:reason AS text) IS NULL OR scans.fail_reason = :reason)
  AND (CAST(:since AS bigint) IS NULL OR scans.dead_lettered_at >= :since)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (CAST(:cause AS text) IS NULL OR scans.cause = :cause)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC;

-- name: dead_letter_total
-- The owner's dead letters now (or one endpoint's), and of them those on endpoints not
-- revoked: the counts kept per endpoint and cause (a row per endpoint and cause, whatever the
-- scans table holds). Not the outcome totals, which keep counting what was pruned.
SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0) AS matching,
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_causes.dead_letters ELSE 0 END), 0) AS redrivable
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint);

-- name: dead_letters_by_key
-- The dead letters a reason, a queue or both match now (of the owner's endpoints or one, of
-- every cause or one), and of them those on endpoints not revoked: the counts kept per
-- endpoint, cause, queue and reason (the `counts_now` migration), a few rows per endpoint
-- and cause through the primary key, whatever the scans table holds.
SELECT COALESCE(SUM(dead_letter_counts.dead_letters), 0) AS matching,
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_counts.dead_letters ELSE 0 END), 0) AS redrivable
FROM dead_letter_counts JOIN endpoints ON endpoints.id = dead_letter_counts.endpoint_id
WHERE endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:cause AS text) IS NULL OR dead_letter_counts.cause = :cause)
  AND (CAST(:queue AS text) IS NULL OR dead_letter_counts.queue = :queue)
  AND (CAST(:reason AS text) IS NULL OR dead_letter_counts.fail_reason = :reason);

-- name: plan_with_values @postgresql
-- asyncpg prepares every statement, and after five runs PostgreSQL may keep a generic plan
-- for it, one made without the parameters' values. Such a plan guesses how much a LIKE
-- pattern matches instead of estimating it, and keeps the optional search's `:pattern IS
-- NULL OR` arm, which no index can serve: a search could read every dead letter instead of
-- ix_scans_dead_search (test_dead_letter_plans.py shows the count doing so). Run first in a
-- search's own read transaction, this plans every statement after it with its values, as
-- constants. SQLite plans every statement with its values bound.
-- (PostgreSQL only: SQLite plans every statement with its values bound.)
SET LOCAL plan_cache_mode = force_custom_plan;

-- name: queued_states @sqlite
-- The SQL twin of lifecycle.rules.queue_state for QUEUED rows (tests hold them equal), in one
-- statement so that its counts are of one moment: every QUEUED scan by due time, and the
-- parked ones (available_at NULL), through ix_scans_queued; then the paused queues' unparked
-- ones (a retry or a lapse sent them back after the pause, or the pause has not parked them
-- yet) by due time, per paused queue from its endpoint's unparked part of
-- ix_scans_queued (the parked rows sort apart, NULL), each row's queue read from the table.
-- Nothing more when no queue is paused; never a paused queue's parked backlog. On PostgreSQL
-- the LATERAL keeps that walk per paused queue: a generic plan would rather hash every
-- endpoint's unparked backlog.
SELECT queued.total, queued.waiting, queued.parked, held.unparked, held.waiting AS held_waiting,
       mf_now() AS now
FROM (
    SELECT count(*) AS total, SUM(CASE WHEN available_at > mf_now() THEN 1 ELSE 0 END)
           AS waiting, SUM(CASE WHEN available_at IS NULL THEN 1 ELSE 0 END) AS parked
    FROM scans WHERE status = 'QUEUED'
) AS queued CROSS JOIN (
    SELECT count(*) AS unparked,
           SUM(CASE WHEN scans.available_at > mf_now() THEN 1 ELSE 0 END) AS waiting
    FROM paused_queues CROSS JOIN scans
    WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
      AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
) AS held;

-- name: queued_states @postgresql
SELECT queued.total, queued.waiting, queued.parked, held.unparked, held.waiting AS held_waiting,
       mf_now() AS now
FROM (
    SELECT count(*) AS total, SUM(CASE WHEN available_at > mf_now() THEN 1 ELSE 0 END)
           AS waiting, SUM(CASE WHEN available_at IS NULL THEN 1 ELSE 0 END) AS parked
    FROM scans WHERE status = 'QUEUED'
) AS queued CROSS JOIN (
    SELECT SUM(one.unparked) AS unparked, SUM(one.waiting) AS waiting
    FROM paused_queues CROSS JOIN LATERAL (
        SELECT count(*) AS unparked,
               SUM(CASE WHEN scans.available_at > mf_now() THEN 1 ELSE 0 END) AS waiting
        FROM scans
        WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
          AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
    ) AS one
) AS held;

-- name: pending_states
-- The SQL twin of lifecycle.rules.queue_state for PENDING rows.
SELECT count(*) AS total,
       SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count < :max_attempts
                THEN 1 ELSE 0 END) AS lapsed,
       SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count >= :max_attempts
                THEN 1 ELSE 0 END) AS spent
FROM scans WHERE status = 'PENDING';

-- name: quarantined_count
SELECT count(*) AS quarantined FROM scans WHERE status = 'QUARANTINED';

-- name: oldest_due
-- The oldest scan a poll could lease: per endpoint, the first due row of ix_scans_queued
-- outside the endpoint's paused queues. The walk starts after the parked rows (NULL, never
-- due) and steps over only the unparked due scans of paused queues ahead of it, as a poll's
-- own walk does; each row's queue is read from the table.
SELECT MIN(head.available_at) AS available_at FROM (
    SELECT (SELECT scans.available_at FROM scans
            WHERE scans.endpoint_id = endpoints.id AND scans.status = 'QUEUED'
              AND scans.available_at <= mf_now()
              AND scans.queue NOT IN (
                  SELECT paused_queues.queue FROM paused_queues
                  WHERE paused_queues.endpoint_id = endpoints.id
              )
            ORDER BY scans.available_at, scans.id LIMIT 1) AS available_at
    FROM endpoints
) AS head;

-- name: live_counts @sqlite
-- Each live status counted per endpoint with its partial index's literal predicate, the
-- QUEUED ones with how many are parked (available_at NULL) in the same walk; then, per
-- endpoint, its paused queues' unparked QUEUED scans (as fleet_snapshot.QUEUED_STATES counts
-- them: the endpoint's unparked part of ix_scans_queued per paused queue). One statement, so
-- the queued and paused depths it yields are of one moment.
SELECT scans.endpoint_id, 'queued' AS state, count(*) AS n,
       SUM(CASE WHEN scans.available_at IS NULL THEN 1 ELSE 0 END) AS parked FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = :owner AND scans.status = 'QUEUED' GROUP BY scans.endpoint_id
UNION ALL
SELECT scans.endpoint_id, 'pending', count(*), 0 FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = :owner AND scans.status = 'PENDING' GROUP BY scans.endpoint_id
UNION ALL
SELECT scans.endpoint_id, 'quarantined', count(*), 0 FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = :owner AND scans.status = 'QUARANTINED'
GROUP BY scans.endpoint_id
UNION ALL
SELECT paused_queues.endpoint_id, 'unparked', count(*), 0
FROM endpoints CROSS JOIN paused_queues CROSS JOIN scans
WHERE endpoints.owner_id = :owner AND paused_queues.endpoint_id = endpoints.id
  AND scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
  AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
GROUP BY paused_queues.endpoint_id;

-- name: live_counts @postgresql
SELECT scans.endpoint_id, 'queued' AS state, count(*) AS n,
       SUM(CASE WHEN scans.available_at IS NULL THEN 1 ELSE 0 END) AS parked FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = :owner AND scans.status = 'QUEUED' GROUP BY scans.endpoint_id
UNION ALL
SELECT scans.endpoint_id, 'pending', count(*), 0 FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = :owner AND scans.status = 'PENDING' GROUP BY scans.endpoint_id
UNION ALL
SELECT scans.endpoint_id, 'quarantined', count(*), 0 FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = :owner AND scans.status = 'QUARANTINED'
GROUP BY scans.endpoint_id
UNION ALL
SELECT paused_queues.endpoint_id, 'unparked', SUM(held.unparked), 0
FROM endpoints JOIN paused_queues ON paused_queues.endpoint_id = endpoints.id
CROSS JOIN LATERAL (
    SELECT count(*) AS unparked FROM scans
    WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
      AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
) AS held
WHERE endpoints.owner_id = :owner
GROUP BY paused_queues.endpoint_id;

-- name: ended_now
-- Each endpoint's finished and plainly failed scans now: the outcome totals (every scan that
-- ended so, for packages_scan_outcomes) less what retention pruned of them (pruned_scans,
-- store/operator/retention.py). One statement, so both are read at one instant; a few dozen rows per
-- endpoint through the two tables' primary keys.
SELECT ended.endpoint_id, ended.outcome, SUM(ended.n) AS n FROM (
    SELECT scan_totals.endpoint_id, scan_totals.outcome, scan_totals.count AS n
    FROM scan_totals JOIN endpoints ON endpoints.id = scan_totals.endpoint_id
    WHERE endpoints.owner_id = :owner AND scan_totals.outcome IN ('finished', 'failed')
    UNION ALL
    SELECT pruned_scans.endpoint_id, pruned_scans.outcome, -pruned_scans.count
    FROM pruned_scans JOIN endpoints ON endpoints.id = pruned_scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND pruned_scans.outcome IN ('finished', 'failed')
) AS ended
GROUP BY ended.endpoint_id, ended.outcome;

-- name: dead_letters_now
-- Each endpoint's dead letters now: the counts kept per endpoint and cause (migration 0017),
-- which a prune, a redrive and a second death move in their own transaction, as the listing's
-- unfiltered count reads them (store/operator/dead_letters.py::DEAD_LETTER_TOTAL).
SELECT dead_letter_causes.endpoint_id, SUM(dead_letter_causes.dead_letters) AS dead_letters
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = :owner
GROUP BY dead_letter_causes.endpoint_id;

-- name: oldest_due_of_endpoint
-- The oldest scan of the endpoint a poll could lease: ix_scans_queued (endpoint_id,
-- available_at, id) walked from its oldest due row, stepping over a paused queue's unparked
-- ones (fleet_snapshot.OLDEST_DUE for one endpoint).
SELECT available_at FROM scans
WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at <= mf_now()
  AND queue NOT IN (SELECT queue FROM paused_queues WHERE endpoint_id = :endpoint)
ORDER BY available_at, id LIMIT 1;

-- name: hook_health
SELECT hooks.endpoint_id, hooks.id, hooks.url, hooks.queue, hooks.enabled,
       hooks.disabled_reason, hooks.consecutive_failures, hooks.last_delivery_at
FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
WHERE endpoints.owner_id = :owner ORDER BY hooks.id;

-- name: now
SELECT mf_now() AS now;

-- name: pause_queue
INSERT INTO paused_queues (endpoint_id, queue, paused_at, paused_by)
VALUES (:endpoint, :queue, mf_now(), :by)
ON CONFLICT (endpoint_id, queue) DO NOTHING
RETURNING paused_at;

-- name: resume_queue
DELETE FROM paused_queues WHERE endpoint_id = :endpoint AND queue = :queue
RETURNING 1 AS resumed;

-- name: paused_queues_of_endpoint
SELECT queue, paused_at, paused_by FROM paused_queues
WHERE endpoint_id = :endpoint ORDER BY queue;

-- name: all_paused_queues
-- Every paused queue by endpoint name (the metrics' reconciliation): a few rows.
SELECT endpoints.name, paused_queues.queue
FROM paused_queues JOIN endpoints ON endpoints.id = paused_queues.endpoint_id;

-- name: park_queue
-- The next chunk of the queue's due-ordered scans after the keyset, parked. It walks the
-- endpoint's QUEUED scans in ix_scans_queued order from the keyset, so the whole pause reads
-- the endpoint's backlog once, however the queues interleave in it.
UPDATE scans SET paused_due_at = available_at, available_at = NULL
WHERE id IN (
    SELECT id FROM scans
    WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at IS NOT NULL
      AND (available_at, id) > (:after_at, :after_id) AND queue = :queue
    ORDER BY available_at, id LIMIT :limit
)
RETURNING id, paused_due_at;

-- name: unpark_queue
-- The next chunk of the queue's parked scans by id (the NULL end of ix_scans_queued, ordered
-- as the index is, NULLs alike, so the walk needs no sort), given their due times back.
UPDATE scans SET available_at = paused_due_at, paused_due_at = NULL
WHERE id IN (
    SELECT id FROM scans
    WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at IS NULL
      AND id > :after_id AND queue = :queue
    ORDER BY available_at, id LIMIT :limit
)
RETURNING id, endpoint_id, queue, name, version, kind, verified, source, created_at,
          available_at;

-- name: endpoint_owner
-- Whose endpoint it is (the CLI acts for the endpoint's owner): one row by the name's key.
SELECT endpoints.owner_id, owners.name
FROM endpoints JOIN owners ON owners.id = endpoints.owner_id
WHERE endpoints.name = :endpoint;

-- name: redrive_candidates @sqlite
-- The chunk's scans of the owner's endpoints (the others are not found), by primary key:
-- CROSS JOIN keeps SQLite on the ids, never starting from the owner's endpoints, whose every
-- scan it would read. PostgreSQL plans it as any join and locks the rows in id order: a
-- second redrive of the same scans waits, then sees them requeued, and two overlapping
-- redrives never take their rows in opposite orders.
SELECT scans.id, scans.endpoint_id, endpoints.name AS endpoint, scans.queue, scans.name,
       scans.version, scans.kind, scans.verified, scans.source, scans.created_at,
       endpoints.revoked_at, scans.dead_lettered_at
FROM scans CROSS JOIN endpoints
WHERE scans.id IN (SELECT value FROM json_each(:ids))
  AND endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner;

-- name: redrive_candidates @postgresql
SELECT scans.id, scans.endpoint_id, endpoints.name AS endpoint, scans.queue, scans.name,
       scans.version, scans.kind, scans.verified, scans.source, scans.created_at,
       endpoints.revoked_at, scans.dead_lettered_at
FROM scans CROSS JOIN endpoints
WHERE scans.id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
) AND endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
ORDER BY scans.id FOR UPDATE OF scans;

-- name: redrive_live_keys @sqlite
-- The chunk's scans whose key (endpoint, name, version, kind) has a live scan: one probe of
-- ux_scans_live_key each, its predicate written as the index declares it.
SELECT dead.id FROM scans AS dead
JOIN scans AS live ON live.endpoint_id = dead.endpoint_id AND live.name = dead.name
    AND live.version = dead.version AND live.kind = dead.kind
    AND live.status IN ('QUARANTINED', 'QUEUED', 'PENDING')
WHERE dead.id IN (SELECT value FROM json_each(:ids));

-- name: redrive_live_keys @postgresql
SELECT dead.id FROM scans AS dead
JOIN scans AS live ON live.endpoint_id = dead.endpoint_id AND live.name = dead.name
    AND live.version = dead.version AND live.kind = dead.kind
    AND live.status IN ('QUARANTINED', 'QUEUED', 'PENDING')
WHERE dead.id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
);

-- name: redrive_requeue @sqlite
-- The chunk's dead letters back in QUEUED with a fresh budget: due now, or parked as intake
-- parks them (available_at NULL, the due time in paused_due_at) when their queue is paused,
-- so that no poll's walk of ix_scans_queued steps over a large redrive into a paused queue.
-- PostgreSQL takes the paused queues of the chunk's endpoints FOR KEY SHARE (by key, from
-- the endpoints' ids read once): a resume's DELETE of one waits for this transaction, whose
-- parked scans its unparking then sees, or this statement waits for the resume's and finds
-- the queue no longer paused. Without the lock a scan could be parked just after a resume
-- had given its queue's due times back, to wait for a resume nobody would send.
UPDATE scans SET status = 'QUEUED',
    available_at = CASE WHEN EXISTS (
        SELECT 1 FROM paused_queues AS paused
        WHERE paused.endpoint_id = scans.endpoint_id AND paused.queue = scans.queue
    ) THEN NULL ELSE mf_now() END,
    paused_due_at = CASE WHEN EXISTS (
        SELECT 1 FROM paused_queues AS paused
        WHERE paused.endpoint_id = scans.endpoint_id AND paused.queue = scans.queue
    ) THEN mf_now() END,
    attempt_base = attempt_base + attempt_count, attempt_count = 0, assignment_id = NULL,
    lease_expires_at = NULL, wait_reason = NULL, dead_lettered_at = NULL, cause = NULL,
    finished_at = NULL, fail_reason = NULL, result = NULL, updated_at = mf_now(),
    redriven_at = mf_now(), redrive_count = redrive_count + 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND dead_lettered_at IS NOT NULL
RETURNING id, available_at;

-- name: redrive_requeue @postgresql
WITH paused AS MATERIALIZED (
    SELECT paused_queues.endpoint_id, paused_queues.queue FROM paused_queues
    WHERE paused_queues.endpoint_id = ANY(ARRAY(
        SELECT scans.endpoint_id FROM scans WHERE scans.id IN (
            SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
        )
    ))
    FOR KEY SHARE
)
UPDATE scans SET status = 'QUEUED',
    available_at = CASE WHEN (scans.endpoint_id, scans.queue) IN (
        SELECT paused.endpoint_id, paused.queue FROM paused
    ) THEN NULL ELSE mf_now() END,
    paused_due_at = CASE WHEN (scans.endpoint_id, scans.queue) IN (
        SELECT paused.endpoint_id, paused.queue FROM paused
    ) THEN mf_now() END,
    attempt_base = attempt_base + attempt_count, attempt_count = 0, assignment_id = NULL,
    lease_expires_at = NULL, wait_reason = NULL, dead_lettered_at = NULL, cause = NULL,
    finished_at = NULL, fail_reason = NULL, result = NULL, updated_at = mf_now(),
    redriven_at = mf_now(), redrive_count = redrive_count + 1
WHERE id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
) AND dead_lettered_at IS NOT NULL
RETURNING id, available_at;

-- name: due_finished_scans @sqlite
-- Scans past their retention, oldest first, through the kind's partial index. PostgreSQL
-- locks them and skips those another transaction holds (a redrive, a second pruner).
SELECT id FROM scans
WHERE status = 'FINISHED' AND finished_at <= mf_now() - :kept
ORDER BY finished_at LIMIT :limit;

-- name: due_finished_scans @postgresql
SELECT id FROM scans
WHERE status = 'FINISHED' AND finished_at <= mf_now() - :kept
ORDER BY finished_at LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: due_failed_scans @sqlite
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NULL AND finished_at <= mf_now() - :kept
ORDER BY finished_at LIMIT :limit;

-- name: due_failed_scans @postgresql
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NULL AND finished_at <= mf_now() - :kept
ORDER BY finished_at LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: due_dead_letters @sqlite
-- A dead letter is FAILED with dead_lettered_at set; a redrive clears it, so a redriven scan
-- is never found here.
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NOT NULL
  AND dead_lettered_at <= mf_now() - :kept
ORDER BY dead_lettered_at LIMIT :limit;

-- name: due_dead_letters @postgresql
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NOT NULL
  AND dead_lettered_at <= mf_now() - :kept
ORDER BY dead_lettered_at LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: prune_attempts @sqlite
-- The batch's attempts by the attempts' primary key (scan_id, seq), then its scans by theirs.
DELETE FROM attempts WHERE scan_id IN (SELECT value FROM json_each(:ids));

-- name: prune_attempts @postgresql
DELETE FROM attempts WHERE scan_id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
);

-- name: prune_scans @sqlite
-- Each removed scan's endpoint, for the pruned counts.
DELETE FROM scans WHERE id IN (SELECT value FROM json_each(:ids)) RETURNING endpoint_id;

-- name: prune_scans @postgresql
DELETE FROM scans WHERE id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
) RETURNING endpoint_id;

-- name: note_pruned_scans
-- What a batch removed, added to its endpoints' pruned counts (one row per endpoint and
-- outcome, made by the first prune that removes one).
INSERT INTO pruned_scans (endpoint_id, outcome, count) VALUES (:endpoint, :outcome, :n)
ON CONFLICT (endpoint_id, outcome) DO UPDATE SET count = pruned_scans.count + excluded.count;

-- name: prune_audit @sqlite
-- The other kinds have no children: one statement each, through ix_audit_at,
-- ix_delivery_counts_minute and ix_board_sessions_expires. PostgreSQL is handed the batch's
-- keys as an array (`= ANY(ARRAY(…))`), so it deletes them by key whatever its statistics
-- guess of the table, never by hashing all of it.
DELETE FROM audit WHERE id IN (
    SELECT id FROM audit WHERE at <= mf_now() - :kept ORDER BY at LIMIT :limit
);

-- name: prune_audit @postgresql
DELETE FROM audit WHERE id = ANY(ARRAY(
    SELECT id FROM audit WHERE at <= mf_now() - :kept ORDER BY at LIMIT :limit
));

-- name: prune_delivery_counts @sqlite
-- A minute ends 60 s after it starts (lifecycle.retention.delivery_minute_is_due). The
-- table's key is two columns: PostgreSQL finds the batch's rows by their ctid instead (a
-- row the dispatcher updated meanwhile has moved and waits for the next batch).
DELETE FROM delivery_counts WHERE (endpoint_id, minute_us) IN (
    SELECT endpoint_id, minute_us FROM delivery_counts
    WHERE minute_us <= mf_now() - :kept - 60000000 ORDER BY minute_us LIMIT :limit
);

-- name: prune_delivery_counts @postgresql
DELETE FROM delivery_counts WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM delivery_counts
    WHERE minute_us <= mf_now() - :kept - 60000000 ORDER BY minute_us LIMIT :limit
));

-- name: prune_board_sessions @sqlite
DELETE FROM board_sessions WHERE session_hash IN (
    SELECT session_hash FROM board_sessions
    WHERE expires_at <= mf_now() - :kept ORDER BY expires_at LIMIT :limit
);

-- name: prune_board_sessions @postgresql
DELETE FROM board_sessions WHERE session_hash = ANY(ARRAY(
    SELECT session_hash FROM board_sessions
    WHERE expires_at <= mf_now() - :kept ORDER BY expires_at LIMIT :limit
));

-- name: count_due_finished_scans
-- What a pass would remove, for `mainframe db prune --dry-run`: the due scans of a kind with
-- their attempts, and the due rows of each other kind, through the same indexes.
SELECT count(*) AS due,
       SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id)) AS attempts
FROM scans
WHERE scans.status = 'FINISHED' AND scans.finished_at <= mf_now() - :kept;

-- name: count_due_failed_scans
SELECT count(*) AS due,
       SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id)) AS attempts
FROM scans
WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NULL
  AND scans.finished_at <= mf_now() - :kept;

-- name: count_due_dead_letters
SELECT count(*) AS due,
       SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id)) AS attempts
FROM scans
WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NOT NULL
  AND scans.dead_lettered_at <= mf_now() - :kept;

-- name: count_due_audit
SELECT count(*) AS due, 0 AS attempts FROM audit WHERE at <= mf_now() - :kept;

-- name: count_due_delivery_counts
SELECT count(*) AS due, 0 AS attempts FROM delivery_counts
WHERE minute_us <= mf_now() - :kept - 60000000;

-- name: count_due_board_sessions
SELECT count(*) AS due, 0 AS attempts FROM board_sessions WHERE expires_at <= mf_now() - :kept;

-- name: revoke_endpoint
UPDATE endpoints SET revoked_at = mf_now() WHERE id = :endpoint;

-- name: lock_revoked_scans @sqlite
-- PostgreSQL: the live rows are locked first, so a result closing one of them meanwhile
-- either commits before (and the scan is no longer live) or waits for the cascade.
SELECT id FROM scans
WHERE endpoint_id = :endpoint AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- name: lock_revoked_scans @postgresql
SELECT id FROM scans
WHERE endpoint_id = :endpoint AND status IN ('QUARANTINED', 'QUEUED', 'PENDING')
ORDER BY id FOR UPDATE;

-- name: close_revoked_attempts
-- The open attempt of every scan the endpoint's workers hold, closed by the revocation.
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, cause)
SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker, leased_at,
       mf_now(), 'endpoint_revoked', NULL, NULL, :cause
FROM scans WHERE endpoint_id = :endpoint AND status = 'PENDING';

-- name: dead_letter_revoked
UPDATE scans SET status = 'FAILED', dead_lettered_at = mf_now(), finished_at = mf_now(),
    updated_at = mf_now(), lease_expires_at = NULL, wait_reason = NULL,
    fail_reason = 'endpoint_revoked', cause = :cause
WHERE endpoint_id = :endpoint AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');
