-- The work a scan goes through: intake, leasing, results, heartbeats and waits, an operator's
-- fail, reading scans back.
-- Loaded by name (store/engine/statements.py): `:name` parameters, `mf_now()` the
-- deployment's clock in microseconds.

-- fragment: worker_token
-- The worker a presented token speaks for, on a live endpoint: the one token check of every
-- worker statement (principal, endpoint_id), one probe of the unique token_hash and the
-- endpoint's key, in the same round trip as the statement's work.
SELECT tokens.principal, tokens.endpoint_id
FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
  AND endpoints.revoked_at IS NULL

-- fragment: retry_elsewhere
-- A retry goes to another worker for a while (the SQL twin of lifecycle.elsewhere.may_lease,
-- tests hold them equal): a due scan whose last attempt was this worker's is passed over until
-- :elsewhere after it fell due, while another worker of the endpoint used its token within
-- :asking. The cheap arms of the OR come first, so the probe of ix_tokens_endpoint runs only
-- for a row that is this worker's own failure, and the walk of ix_scans_queued passes over
-- only those.
AND (scans.worker IS NULL OR scans.worker <> (SELECT principal FROM who)
     OR scans.available_at <= mf_now() - :elsewhere
     OR NOT EXISTS (
         SELECT 1 FROM tokens AS other
         WHERE other.endpoint_id = (SELECT endpoint_id FROM who)
           AND other.role = 'worker'
           AND other.principal <> (SELECT principal FROM who)
           AND other.last_used_at > mf_now() - :asking
     ))

-- name: heartbeat
-- A heartbeat during a wait leaves the wait's own deadline alone.
WITH who AS (
    -- include: worker_token
)
UPDATE scans SET updated_at = mf_now(),
    lease_expires_at = CASE WHEN wait_reason IS NULL THEN mf_now() + :timeout
                            ELSE lease_expires_at END
WHERE id = :scan AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who)
  AND attempt_count = COALESCE(CAST(:attempt AS integer), 1)
  AND (CAST(:assignment AS text) IS NULL OR assignment_id = :assignment)
RETURNING lease_expires_at, endpoint_id;

-- name: wait
WITH who AS (
    -- include: worker_token
)
UPDATE scans SET updated_at = mf_now(), lease_expires_at = mf_now() + :timeout,
    wait_reason = :reason
WHERE id = :scan AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who)
  AND attempt_count = COALESCE(CAST(:attempt AS integer), 1)
  AND (CAST(:assignment AS text) IS NULL OR assignment_id = :assignment)
RETURNING lease_expires_at, endpoint_id;

-- name: resume
WITH who AS (
    -- include: worker_token
)
UPDATE scans SET updated_at = mf_now(), lease_expires_at = mf_now() + :timeout,
    wait_reason = NULL
WHERE id = :scan AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who)
  AND attempt_count = COALESCE(CAST(:attempt AS integer), 1)
  AND (CAST(:assignment AS text) IS NULL OR assignment_id = :assignment)
RETURNING lease_expires_at, endpoint_id;

-- name: insert_attempt
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, settled_status, settled_available_at,
                      settled_fail_reason, next_assignments, result_digest, cause)
VALUES (:scan, :seq, :attempt, :assignment, :worker, :leased_at, mf_now(), :outcome,
        :summary, :artifact, :settled_status, :settled_available_at,
        :settled_fail_reason, :next_assignments, :result_digest, :cause);

-- name: bump_totals
UPDATE scan_totals SET count = count + :n
WHERE endpoint_id = :endpoint AND outcome = :outcome AND shard = :shard;

-- name: name_cause
-- A cause's pattern under its key, with the version of the rules that made it, the first
-- time any attempt fails of it.
INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
VALUES (:cause, :pattern, mf_now(), :grouping_version)
ON CONFLICT (cause) DO NOTHING;

-- fragment: source_token
-- The source a presented token speaks for, on a live endpoint (principal, endpoint_id).
SELECT tokens.principal, tokens.endpoint_id
FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
WHERE tokens.token_hash = :digest AND tokens.role = 'source'
  AND endpoints.revoked_at IS NULL

-- fragment: new_scan_columns
-- The columns a source's insert of new scans sets (insert_scans, which begins with them,
-- spells them out: a statement's leading comment lines are its why, never an include).
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count,
                   attempt_base, redrive_count, paused_due_at)

-- name: submit_as_source
-- A source's token checked and its scan inserted in one statement (one round trip).
WITH who AS (
    -- include: source_token
)
-- include: new_scan_columns
SELECT who.endpoint_id, :queue, :name, :version, :kind, :payload, 'QUEUED', TRUE,
       who.principal, mf_now(), mf_now(),
       CASE WHEN paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN paused.queue IS NOT NULL THEN mf_now() END
FROM who LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = who.endpoint_id AND paused.queue = :queue
WHERE TRUE
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING *;

-- name: submit_many_as_source @sqlite
-- Submissions of one source that met at the database (store/work/coalesce.py): its token
-- checked once and every item (a JSON array of {queue, name, version, kind, payload})
-- inserted in one statement; the ones whose live key exists are left out of RETURNING.
WITH who AS (
    -- include: source_token
)
-- include: new_scan_columns
SELECT who.endpoint_id, item.value ->> '$.queue', item.value ->> '$.name',
       item.value ->> '$.version', item.value ->> '$.kind', item.value ->> '$.payload',
       'QUEUED', TRUE, who.principal, mf_now(), mf_now(),
       CASE WHEN paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN paused.queue IS NOT NULL THEN mf_now() END
FROM who CROSS JOIN json_each(:items) AS item
LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = who.endpoint_id AND paused.queue = item.value ->> '$.queue'
WHERE TRUE
ORDER BY item.key
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING *;

-- name: submit_many_as_source @postgresql
WITH who AS (
    -- include: source_token
)
-- include: new_scan_columns
SELECT who.endpoint_id, item.queue, item.name, item.version, item.kind, item.payload,
       'QUEUED', TRUE, who.principal, mf_now(), mf_now(),
       CASE WHEN paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN paused.queue IS NOT NULL THEN mf_now() END
FROM who CROSS JOIN jsonb_to_recordset(CAST(:items AS jsonb))
    AS item(queue text, name text, version text, kind text, payload text)
LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = who.endpoint_id AND paused.queue = item.queue
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING *;

-- name: insert_scans @sqlite
-- A batch of scans (a JSON array of {queue, name, version, kind, payload}) for one endpoint,
-- in one statement; the ones whose live key exists are left out of RETURNING.
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count,
                   attempt_base, redrive_count, paused_due_at)
SELECT :endpoint, item.value ->> '$.queue', item.value ->> '$.name',
       item.value ->> '$.version', item.value ->> '$.kind', item.value ->> '$.payload',
       :status, :verified, :source, mf_now(), mf_now(),
       CASE WHEN :status = 'QUEUED' AND paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN :status = 'QUEUED' AND paused.queue IS NOT NULL THEN mf_now() END
FROM json_each(:items) AS item
LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = :endpoint AND paused.queue = item.value ->> '$.queue'
WHERE TRUE
ORDER BY item.key
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING *;

-- name: insert_scans @postgresql
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count,
                   attempt_base, redrive_count, paused_due_at)
SELECT :endpoint, item.queue, item.name, item.version, item.kind, item.payload,
       CAST(:status AS varchar), :verified, :source, mf_now(), mf_now(),
       CASE WHEN :status = 'QUEUED' AND paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN :status = 'QUEUED' AND paused.queue IS NOT NULL THEN mf_now() END
FROM jsonb_to_recordset(CAST(:items AS jsonb))
    AS item(queue text, name text, version text, kind text, payload text)
LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = :endpoint AND paused.queue = item.queue
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING *;

-- name: live_scan
-- The live scan of a key, through the partial unique index ux_scans_live_key.
SELECT *
FROM scans
WHERE endpoint_id = :endpoint AND name = :name AND version = :version AND kind = :kind
  AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- name: promote_from_quarantine @sqlite
-- A quarantined scan let into QUEUED: due now, or parked when its queue is paused. On
-- PostgreSQL the paused queue's row is taken FOR KEY SHARE, as a redrive takes it
-- (store/operator/redrive.py::REQUEUE says why): a resume lifting the pause meanwhile waits for this
-- transaction, or this statement for the resume's, so the scan is never left parked in a
-- queue no longer paused.
UPDATE scans SET status = 'QUEUED', updated_at = mf_now(),
    available_at = CASE WHEN EXISTS (
        SELECT 1 FROM paused_queues AS paused
        WHERE paused.endpoint_id = scans.endpoint_id AND paused.queue = scans.queue
    ) THEN NULL ELSE mf_now() END,
    paused_due_at = CASE WHEN EXISTS (
        SELECT 1 FROM paused_queues AS paused
        WHERE paused.endpoint_id = scans.endpoint_id AND paused.queue = scans.queue
    ) THEN mf_now() END,
    verified = :verified, source = COALESCE(:source, source)
WHERE id = :scan AND status = 'QUARANTINED'
RETURNING *;

-- name: promote_from_quarantine @postgresql
WITH paused AS MATERIALIZED (
    SELECT queue FROM paused_queues
    WHERE (endpoint_id, queue) = (SELECT endpoint_id, queue FROM scans WHERE id = :scan)
    FOR KEY SHARE
)
UPDATE scans SET status = 'QUEUED', updated_at = mf_now(),
    available_at = CASE WHEN EXISTS (SELECT 1 FROM paused) THEN NULL ELSE mf_now() END,
    paused_due_at = CASE WHEN EXISTS (SELECT 1 FROM paused) THEN mf_now() END,
    verified = :verified, source = COALESCE(:source, source)
WHERE id = :scan AND status = 'QUARANTINED'
RETURNING *;

-- name: close_as_operator
-- An operator's fail of the current attempt, whoever holds it: a compare-and-set on the
-- assignment the operator saw.
UPDATE scans SET status = :status, updated_at = mf_now(), lease_expires_at = NULL,
    wait_reason = NULL, fail_reason = :fail_reason,
    finished_at = CASE WHEN CAST(:terminal AS boolean) THEN mf_now() END,
    dead_lettered_at = CASE WHEN CAST(:dead AS boolean) THEN mf_now() END,
    cause = CASE WHEN CAST(:dead AS boolean) THEN CAST(:cause AS text) END,
    result = :result,
    available_at = CASE WHEN :terminal THEN NULL ELSE mf_now() + CAST(:delay AS bigint) END
WHERE id = :scan AND status = 'PENDING' AND attempt_count = :attempt
  AND assignment_id = :assignment
RETURNING *;

-- name: fail_unleased
UPDATE scans SET status = 'FAILED', fail_reason = 'failed', finished_at = mf_now(),
    updated_at = mf_now(), result = NULL, available_at = NULL
WHERE id = :scan AND status IN ('QUEUED', 'QUARANTINED')
RETURNING id;

-- name: lease @sqlite
-- The worker's token checked and up to :limit due scans of its endpoint leased, oldest first,
-- in one statement. The due scans are a walk of ix_scans_queued (endpoint_id, available_at,
-- id) WHERE status = 'QUEUED' that stops after :limit rows; the literal status is what lets
-- both planners prove the partial index (tests/integration/test_plans.py). On PostgreSQL the
-- leased rows are then found by key (`= ANY(ARRAY(...))`): a generic plan takes `LIMIT
-- :limit` for a tenth of the queue and would rather hash the whole table than probe the key.
WITH who AS (
    -- include: worker_token
)
UPDATE scans SET status = 'PENDING', attempt_count = attempt_count + 1,
    assignment_id = :prefix || id, worker = (SELECT principal FROM who),
    leased_at = mf_now(), lease_expires_at = mf_now() + :timeout, wait_reason = NULL,
    updated_at = mf_now()
WHERE id IN (
    SELECT id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND status = 'QUEUED'
      AND available_at <= mf_now()
      AND queue NOT IN (
          SELECT queue FROM paused_queues WHERE endpoint_id = (SELECT endpoint_id FROM who)
      )
      -- include: retry_elsewhere
    ORDER BY available_at, id LIMIT :limit
)
RETURNING *;

-- name: lease @postgresql
WITH who AS (
    -- include: worker_token
), due AS (
    SELECT id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND status = 'QUEUED'
      AND available_at <= mf_now()
      AND queue NOT IN (
          SELECT queue FROM paused_queues WHERE endpoint_id = (SELECT endpoint_id FROM who)
      )
      -- include: retry_elsewhere
    ORDER BY available_at, id LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
    assignment_id = :prefix || CAST(scans.id AS text), worker = (SELECT principal FROM who),
    leased_at = mf_now(), lease_expires_at = mf_now() + :timeout, wait_reason = NULL,
    updated_at = mf_now()
FROM due WHERE scans.id = due.id AND scans.id = ANY(ARRAY(SELECT due.id FROM due))
RETURNING scans.*;

-- name: lapsed_of_endpoint @sqlite
-- Lapsed leases (and waits), oldest lapse first, with the clock they were judged by: a walk
-- of ix_scans_pending_lease (endpoint_id, lease_expires_at) WHERE status = 'PENDING'.
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now() AS now
FROM scans
WHERE status = 'PENDING' AND endpoint_id = :endpoint AND lease_expires_at < mf_now()
ORDER BY lease_expires_at LIMIT :limit;

-- name: lapsed_of_endpoint @postgresql
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now() AS now
FROM scans
WHERE status = 'PENDING' AND endpoint_id = :endpoint AND lease_expires_at < mf_now()
ORDER BY lease_expires_at LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: lapsed_anywhere @sqlite
-- Every endpoint's lapsed leases (the sweeper), oldest lapse first: each endpoint's oldest
-- :limit from its walk of ix_scans_pending_lease, as LAPSED_OF_ENDPOINT walks it, then the
-- oldest :limit of those (no index orders every endpoint's leases by deadline: migration 0026).
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.verified, scans.source, scans.created_at, scans.worker, scans.leased_at,
       scans.attempt_count, scans.assignment_id, scans.wait_reason, scans.attempt_base,
       mf_now() AS now
FROM endpoints JOIN scans ON scans.id IN (
    SELECT lapsed.id FROM scans AS lapsed
    WHERE lapsed.status = 'PENDING' AND lapsed.endpoint_id = endpoints.id
      AND lapsed.lease_expires_at < mf_now()
    ORDER BY lapsed.lease_expires_at LIMIT :limit
)
ORDER BY scans.lease_expires_at LIMIT :limit;

-- name: lapsed_anywhere @postgresql
-- The rows are locked once chosen, so no lease past the :limit is held by this sweep, and
-- found by key: the status and deadline are checked again on the locked rows in forms no
-- partial index's predicate matches (a generic plan would rather walk a whole index over
-- the leases than probe the key :limit times).
WITH due AS (
    SELECT lapsed.id
    FROM endpoints CROSS JOIN LATERAL (
        SELECT id, lease_expires_at FROM scans
        WHERE status = 'PENDING' AND endpoint_id = endpoints.id
          AND lease_expires_at < mf_now()
        ORDER BY lease_expires_at LIMIT :limit
    ) AS lapsed
    ORDER BY lapsed.lease_expires_at LIMIT :limit
)
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now() AS now
FROM scans
WHERE id = ANY(ARRAY(SELECT due.id FROM due))
  AND status || '' = 'PENDING' AND lease_expires_at + 0 < mf_now()
ORDER BY lease_expires_at
FOR UPDATE SKIP LOCKED;

-- name: close_lapsed_attempt
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, cause)
VALUES (:scan, :seq, :attempt, :assignment, :worker, :leased_at, mf_now(), :outcome,
        :summary, NULL, :cause);

-- name: dead_letter_lapsed
UPDATE scans SET status = 'FAILED', dead_lettered_at = mf_now(), finished_at = mf_now(),
    updated_at = mf_now(), fail_reason = :reason, lease_expires_at = NULL,
    wait_reason = NULL, cause = :cause
WHERE id = :scan AND status = 'PENDING';

-- name: requeue_lapsed
UPDATE scans SET status = 'QUEUED', available_at = mf_now() + :delay,
    updated_at = mf_now(), lease_expires_at = NULL, wait_reason = NULL
WHERE id = :scan AND status = 'PENDING';

-- name: package_scans
-- The token checked, then the live scans of the key (ux_scans_live_key, whose prefix is
-- (endpoint_id, name, version); at most one per kind) and the latest ended one
-- (ix_scans_ended_key walked backwards from its newest id, migration 0011: without it a
-- result for a finished scan would read the endpoint's whole history to be refused). The
-- statuses are literals so both planners prove each partial index's predicate. One row with
-- NULLs when the key names nothing; no row when the token is not a worker's.
WITH who AS (
    -- include: worker_token
), live AS (
    SELECT id, status, worker, assignment_id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND name = :name
      AND version = :version AND status IN ('QUARANTINED', 'QUEUED', 'PENDING')
), ended AS (
    SELECT id, status, worker, assignment_id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND name = :name
      AND version = :version AND status IN ('FINISHED', 'FAILED')
    ORDER BY id DESC LIMIT 1
), found AS (
    SELECT id, status, worker, assignment_id FROM live
    UNION ALL
    SELECT id, status, worker, assignment_id FROM ended
)
SELECT who.principal, found.id AS scan_id, found.status, found.worker, found.assignment_id
FROM who LEFT JOIN found ON 1 = 1;

-- name: sole_holder_lease
-- The scan's current attempt if :worker holds its lease and closed no earlier attempt of it
-- (its attempts by primary key prefix, scan_id).
SELECT scans.attempt_count, scans.assignment_id FROM scans
WHERE scans.id = :scan AND scans.status = 'PENDING' AND scans.worker = :worker
  AND NOT EXISTS (
      SELECT 1 FROM attempts WHERE attempts.scan_id = :scan AND attempts.worker = :worker
  );

-- name: owned_scan
SELECT scans.*, endpoints.name AS endpoint
FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.id = :scan AND endpoints.owner_id = :owner;

-- name: attempts_of_scan
SELECT seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact
FROM attempts WHERE scan_id = :scan ORDER BY seq;

-- name: list_scans @sqlite
-- Newest first over the owner's endpoints (or the one named), each filter optional (NULL: any),
-- strictly older than the keyset :before (always bound: an optional keyset is an OR no planner can
-- seek through, and PostgreSQL would read every scan and sort them). :dead TRUE keeps dead letters
-- only, FALSE everything else; :paused TRUE keeps the QUEUED scans a pause holds
-- (lifecycle.rules.queue_state: in a paused queue, or still parked), FALSE everything else, each
-- one's queue looked up by paused_queues' key; :pattern is a search (store/work/search.py) over
-- name, source and kind, or :term_id the scan's id. Walks the primary key backwards from :before and
-- stops after :limit rows; CROSS JOIN keeps scans the outer loop on SQLite, which would otherwise
-- start from the owner's endpoints and sort every scan they hold.
SELECT scans.*, endpoints.name AS endpoint
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
  AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND (:status IS NULL OR scans.status = :status)
  AND (:queue IS NULL OR scans.queue = :queue)
  AND (:dead IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
  AND (:paused IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = :paused)
  AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\'
       OR scans.source LIKE :pattern ESCAPE '\' OR scans.kind LIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND scans.id < :before
ORDER BY scans.id DESC LIMIT :limit;

-- name: list_scans @postgresql
SELECT scans.*, endpoints.name AS endpoint
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:status AS text) IS NULL OR scans.status = :status)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (CAST(:dead AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
  AND (CAST(:paused AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = :paused)
  AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\'
       OR scans.source ILIKE :pattern ESCAPE '\' OR scans.kind ILIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND scans.id < :before
ORDER BY scans.id DESC LIMIT :limit;

-- name: list_scans_newer @sqlite
-- The way back from a later page: the scans newer than :newer_than, oldest first, walking
-- the primary key forwards; the caller reverses them.
SELECT scans.*, endpoints.name AS endpoint
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
  AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND (:status IS NULL OR scans.status = :status)
  AND (:queue IS NULL OR scans.queue = :queue)
  AND (:dead IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
  AND (:paused IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = :paused)
  AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\'
       OR scans.source LIKE :pattern ESCAPE '\' OR scans.kind LIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND scans.id > :newer_than
ORDER BY scans.id LIMIT :limit;

-- name: list_scans_newer @postgresql
SELECT scans.*, endpoints.name AS endpoint
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:status AS text) IS NULL OR scans.status = :status)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (CAST(:dead AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
  AND (CAST(:paused AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = :paused)
  AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\'
       OR scans.source ILIKE :pattern ESCAPE '\' OR scans.kind ILIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND scans.id > :newer_than
ORDER BY scans.id LIMIT :limit;

-- name: count_scans @sqlite
-- How many scans a listing's filter matches, counted up to :limit: the listing's own walk of
-- the primary key, so a count under a search costs what a page of it costs, never more.
SELECT count(*) FROM (
SELECT scans.id
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
  AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND (:status IS NULL OR scans.status = :status)
  AND (:queue IS NULL OR scans.queue = :queue)
  AND (:dead IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
  AND (:paused IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = :paused)
  AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\'
       OR scans.source LIKE :pattern ESCAPE '\' OR scans.kind LIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND scans.id < :before
ORDER BY scans.id DESC LIMIT :limit
) AS capped;

-- name: count_scans @postgresql
SELECT count(*) FROM (
SELECT scans.id
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:status AS text) IS NULL OR scans.status = :status)
  AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
  AND (CAST(:dead AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
  AND (CAST(:paused AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = :paused)
  AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\'
       OR scans.source ILIKE :pattern ESCAPE '\' OR scans.kind ILIKE :pattern ESCAPE '\'
       OR scans.id = :term_id)
  AND scans.id < :before
ORDER BY scans.id DESC LIMIT :limit
) AS capped;

-- name: diagnose_refusal
SELECT status, attempt_count, assignment_id, worker FROM scans
WHERE id = :scan AND endpoint_id = :endpoint;

-- name: replayed_result
-- A result this worker sent before, found by its assignment among its scan's attempts (the
-- key's prefix on PostgreSQL, uq_attempts_assignment on SQLite).
SELECT attempts.attempt, attempts.closed_at, attempts.settled_status,
       attempts.settled_available_at, attempts.settled_fail_reason,
       attempts.next_assignments, attempts.outcome, attempts.result_digest
FROM attempts JOIN scans ON scans.id = attempts.scan_id
WHERE attempts.scan_id = :scan AND attempts.assignment_id = :assignment
  AND attempts.worker = :worker AND scans.endpoint_id = :endpoint
  AND attempts.settled_status IS NOT NULL;

-- name: replayed_jobs @sqlite
-- The jobs a replayed answer leased, still leased to this worker (a JSON array of ids).
SELECT *
FROM scans
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status = 'PENDING' AND worker = :worker AND lease_expires_at >= mf_now()
ORDER BY id;

-- name: replayed_jobs @postgresql
SELECT *
FROM scans
WHERE id IN (SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb)))
  AND status = 'PENDING' AND worker = :worker AND lease_expires_at >= mf_now()
ORDER BY id;

-- name: complete @postgresql
-- PostgreSQL: the token, every close of the batch (its JSON items), their history rows with
-- the answer each was given, the outcome totals, and up to :fetch next leases (only when
-- something closed and nothing was a replay), in one statement. Rows: 'closed' and
-- 'leased', each with the scan as the statement left it (no payload or result for a close).
-- The closes are found by primary key only, whatever the statistics say: `scans.id = item.scan`
-- is repeated as `= ANY(ARRAY(...))`, an index condition on the key (PostgreSQL guesses 100
-- rows for a set-returning function and would rather hash every PENDING scan than probe the
-- key 100 times), and the endpoint is compared as `endpoint_id + 0`, which no index serves
-- (statistics taken before a large intake made ux_scans_live_key, every live scan of the
-- endpoint, look cheaper; tests/integration/test_plans.py holds both), and the status as
-- `status || ''`, which no partial index's predicate matches: under load ix_scans_pending_lease
-- holds every lease since the last vacuum, and a bitmap of it ANDed with the key's cost more
-- than the rest of the statement (docs/performance.md). The replay check is a lookup of the
-- history's key by scan the same way, its few attempts filtered by assignment (an assignment id
-- names its scan, so the two lists cannot pair wrongly), never a read of the attempt history
-- at large; and so are the next leases (a generic plan takes `LIMIT :fetch` for a tenth of
-- the queue, see leasing.py). The causes the closes met are named after it, as on SQLite
-- (results.py).
-- (PostgreSQL only: SQLite runs CLOSE_RESULTS, LEASE and INSERT_HISTORY in steps.)
WITH who AS (
    -- include: worker_token
), item AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS item(
        scan bigint, attempt integer, assignment text, status text, fail_reason text,
        terminal boolean, dead boolean, result text, delay bigint, outcome text,
        summary text, artifact text, result_digest text, cause text)
), closed AS (
    UPDATE scans SET status = item.status, updated_at = mf_now(),
        lease_expires_at = NULL, wait_reason = NULL, fail_reason = item.fail_reason,
        finished_at = CASE WHEN item.terminal THEN mf_now() END,
        dead_lettered_at = CASE WHEN item.dead THEN mf_now() END,
        cause = CASE WHEN item.dead THEN item.cause END,
        result = item.result,
        available_at = CASE WHEN item.terminal THEN NULL ELSE mf_now() + item.delay END
    FROM item, who
    -- include: items_close
    RETURNING
        -- include: closed_scan
        , 0 AS req, item.outcome, item.summary, item.artifact, item.result_digest,
        item.cause AS attempt_cause
), replay AS (
    SELECT attempts.scan_id FROM attempts
    WHERE attempts.scan_id = ANY(ARRAY(SELECT item.scan FROM item))
      AND attempts.assignment_id = ANY(ARRAY(SELECT item.assignment FROM item))
-- include: next_leases
), history AS (
    -- include: history_of_closed
           outcome, summary, artifact, status, available_at,
           fail_reason, (SELECT string_agg(assignment_id, ',') FROM leased),
           result_digest, attempt_cause
    FROM closed
), total AS (
    UPDATE scan_totals SET count = scan_totals.count + ended.n
    FROM (
        SELECT CASE WHEN status = 'FINISHED' THEN 'finished'
                    WHEN dead_lettered_at IS NOT NULL THEN 'dead_lettered'
                    ELSE 'failed' END AS outcome,
               count(*) AS n
        FROM closed WHERE status IN ('FINISHED', 'FAILED') GROUP BY 1
    ) AS ended
    WHERE scan_totals.endpoint_id = (SELECT endpoint_id FROM who)
      AND scan_totals.outcome = ended.outcome AND scan_totals.shard = :shard
)
-- include: closed_and_leased

-- name: complete_one @postgresql
-- COMPLETE for a request of one result (a worker at batch 1): the item's fields are the
-- statement's parameters, used where COMPLETE reads its items, and the outcome total it adds
-- to (:ended, NULL when the scan goes round again) is decided with them, so the plan has no
-- items to scan and join, no aggregate, and a third fewer nodes to start on every request
-- (docs/performance.md, *The database's work per scan*).
-- (PostgreSQL only: SQLite runs CLOSE_RESULTS, LEASE and INSERT_HISTORY in steps.)
WITH who AS (
    -- include: worker_token
), closed AS (
    UPDATE scans SET status = CAST(:status AS text), updated_at = mf_now(),
        lease_expires_at = NULL, wait_reason = NULL,
        fail_reason = CAST(:fail_reason AS text),
        finished_at = CASE WHEN CAST(:terminal AS boolean) THEN mf_now() END,
        dead_lettered_at = CASE WHEN CAST(:dead AS boolean) THEN mf_now() END,
        cause = CASE WHEN CAST(:dead AS boolean) THEN CAST(:cause AS text) END,
        result = CAST(:result AS text),
        available_at = CASE WHEN CAST(:terminal AS boolean) THEN NULL
                            ELSE mf_now() + CAST(:delay AS bigint) END
    FROM who
    WHERE scans.id = CAST(:scan AS bigint)
      AND scans.endpoint_id + 0 = who.endpoint_id
      AND scans.status || '' = 'PENDING' AND scans.worker = who.principal
      AND scans.attempt_count = COALESCE(CAST(:attempt AS integer), 1)
      AND (CAST(:assignment AS text) IS NULL
           OR scans.assignment_id = CAST(:assignment AS text))
    RETURNING
        -- include: closed_scan
        , 0 AS req
), replay AS (
    SELECT attempts.scan_id FROM attempts
    WHERE attempts.scan_id = CAST(:scan AS bigint)
      AND attempts.assignment_id = CAST(:assignment AS text)
-- include: next_leases
), history AS (
    -- include: history_of_closed
           CAST(:outcome AS text), CAST(:summary AS text),
           CAST(:artifact AS text), status, available_at, fail_reason,
           (SELECT string_agg(assignment_id, ',') FROM leased),
           CAST(:result_digest AS text), CAST(:cause AS text)
    FROM closed
), total AS (
    UPDATE scan_totals SET count = scan_totals.count + 1
    WHERE scan_totals.endpoint_id = (SELECT endpoint_id FROM who)
      AND scan_totals.outcome = CAST(:ended AS text) AND scan_totals.shard = :shard
      AND EXISTS (SELECT 1 FROM closed)
)
-- include: closed_and_leased

-- name: complete_together @postgresql
-- Requests of finished results, from any workers, that met (results.py,
-- Results._run_together): each request's token checked (`ask`), each of its results closed
-- (`item`), the next leases each request asked for (`share_out`), the history rows and the
-- outcome totals, in one statement, as COMPLETE does for one request. The tokens and the
-- closes are found by key, as in COMPLETE. A request some result of which does not close here
-- is answered alone afterwards, as a request of its own (a replay, a refusal; the closes made
-- here are replays then); it takes next leases here only when something of it closed and
-- none of the rest is a replay (`replay`), as COMPLETE leases. Rows as COMPLETE's, with the
-- request each was for (`req`).
-- (PostgreSQL only: SQLite runs each request's steps in its own transaction.)
WITH ask AS (
    SELECT * FROM jsonb_to_recordset(CAST(:asks AS jsonb)) AS ask(
        req integer, digest text, wants integer)
), item AS (
    SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS item(
        req integer, scan bigint, attempt integer, assignment text, result text,
        outcome text, summary text, artifact text, result_digest text)
), who AS (
    -- include: workers_of_asks
), closed AS (
    UPDATE scans SET status = 'FINISHED', updated_at = mf_now(),
        lease_expires_at = NULL, wait_reason = NULL, fail_reason = NULL,
        finished_at = mf_now(), dead_lettered_at = NULL, cause = NULL,
        result = item.result, available_at = NULL
    FROM item JOIN who ON who.req = item.req
    -- include: items_close
    RETURNING
        -- include: closed_scan
        , item.req, item.outcome, item.summary, item.artifact, item.result_digest
), unclosed AS (
    SELECT item.req, item.scan, item.assignment FROM item
    WHERE NOT EXISTS (
        SELECT 1 FROM closed WHERE closed.req = item.req AND closed.id = item.scan
    )
), replay AS (
    SELECT unclosed.req FROM unclosed, attempts
    WHERE attempts.scan_id = ANY(ARRAY(SELECT unclosed.scan FROM unclosed))
      AND attempts.scan_id = unclosed.scan AND attempts.assignment_id = unclosed.assignment
), asking AS (
    -- include: asking_columns
    FROM who WHERE who.wants > 0 AND who.req IN (SELECT closed.req FROM closed)
      AND who.req NOT IN (SELECT replay.req FROM replay)
-- include: share_out
), history AS (
    -- include: history_of_closed
           outcome, summary, artifact, status, available_at,
           fail_reason,
           (SELECT string_agg(leased.assignment_id, ',') FROM leased
            WHERE leased.req = closed.req),
           result_digest, NULL
    FROM closed
), total AS (
    UPDATE scan_totals SET count = scan_totals.count + ended.n
    FROM (SELECT endpoint_id, count(*) AS n FROM closed GROUP BY endpoint_id) AS ended
    WHERE scan_totals.endpoint_id = ended.endpoint_id
      AND scan_totals.outcome = 'finished' AND scan_totals.shard = :shard
)
-- include: closed_and_leased

-- name: lease_together @postgresql
-- Polls that met (leasing.py, Leasing._run_together): each item's token checked and the due
-- scans of each endpoint shared out between its polls in their order (`share_out`), as
-- COMPLETE_TOGETHER shares out its next leases. A row per poll whose token is a live
-- worker's (`asked`), with each scan leased to it, or with none (its columns NULL) when it got
-- none; a poll without a row is answered alone (a token refused).
-- (PostgreSQL only: SQLite runs each poll in process.)
WITH ask AS (
    SELECT * FROM jsonb_to_recordset(CAST(:asks AS jsonb)) AS ask(
        req integer, digest text, wants integer)
), who AS (
    -- include: workers_of_asks
), asking AS (
    -- include: asking_columns
    FROM who WHERE who.wants > 0
-- include: share_out
)
SELECT who.req AS asked, leased.* FROM who LEFT JOIN leased ON leased.req = who.req;

-- fragment: workers_of_asks
-- The live workers the requests' tokens speak for (req, principal, endpoint_id, wants), each
-- token found by key as COMPLETE finds its closes.
SELECT ask.req, tokens.principal, tokens.endpoint_id, ask.wants
FROM ask
JOIN tokens ON tokens.token_hash = ask.digest AND tokens.role = 'worker'
JOIN endpoints ON endpoints.id = tokens.endpoint_id AND endpoints.revoked_at IS NULL
WHERE tokens.token_hash = ANY(ARRAY(SELECT ask.digest FROM ask))

-- fragment: asking_columns
-- A request that takes scans, and how many of its endpoint's due scans the requests before
-- it take first (`skip`).
SELECT who.req, who.principal, who.endpoint_id, who.wants,
       sum(who.wants) OVER (PARTITION BY who.endpoint_id ORDER BY who.req)
           - who.wants AS skip

-- fragment: share_out
-- The next leases of the requests of `asking`: each walks its endpoint's due scans with its
-- own worker's retry rule (the SQL twin of lifecycle.elsewhere.may_lease, as
-- `retry_elsewhere` is), as far as the requests before it take (`skip`) and its own share
-- after them; the scans past its skip are its own. When the walks agree (no retry its worker
-- may not take yet among them) the shares are disjoint; where they do not, a scan two
-- requests reached goes to the earlier and the later gets fewer than it asked for.
), due AS (
    SELECT asking.req, asking.principal, asking.skip, walk.id,
           row_number() OVER (PARTITION BY asking.req
                              ORDER BY walk.available_at, walk.id) AS n
    FROM asking CROSS JOIN LATERAL (
        SELECT scans.id, scans.available_at FROM scans
        WHERE scans.endpoint_id = asking.endpoint_id AND scans.status = 'QUEUED'
          AND scans.available_at <= mf_now()
          AND scans.queue NOT IN (
              SELECT queue FROM paused_queues WHERE endpoint_id = asking.endpoint_id
          )
          AND (scans.worker IS NULL OR scans.worker <> asking.principal
               OR scans.available_at <= mf_now() - :elsewhere
               OR NOT EXISTS (
                   SELECT 1 FROM tokens AS other
                   WHERE other.endpoint_id = asking.endpoint_id
                     AND other.role = 'worker'
                     AND other.principal <> asking.principal
                     AND other.last_used_at > mf_now() - :asking
               ))
        ORDER BY scans.available_at, scans.id LIMIT asking.skip + asking.wants
        FOR UPDATE SKIP LOCKED
    ) AS walk
), pair AS (
    SELECT DISTINCT ON (due.id) due.req, due.principal, due.id
    FROM due WHERE due.n > due.skip
    ORDER BY due.id, due.req
), leased AS (
    UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
        assignment_id = :prefix || CAST(scans.id AS text), worker = pair.principal,
        leased_at = mf_now(), lease_expires_at = mf_now() + :timeout, wait_reason = NULL,
        updated_at = mf_now()
    FROM pair
    WHERE scans.id = pair.id AND scans.id = ANY(ARRAY(SELECT pair.id FROM pair))
    RETURNING scans.*, pair.req

-- fragment: history_of_closed
-- The history rows of the result statements' closes (`closed`), up to their outcome: the
-- attempt, its assignment and worker, and when it was leased and closed; each statement
-- adds the rest.
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at,
                      closed_at, outcome, summary, artifact, settled_status,
                      settled_available_at, settled_fail_reason, next_assignments,
                      result_digest, cause)
SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker,
       leased_at, mf_now(),

-- fragment: items_close
-- Which scans the items of COMPLETE and COMPLETE_TOGETHER close: each its own by key, still
-- PENDING under the worker its token speaks for (`who`), on the attempt and assignment it
-- names (the compare-and-set of lifecycle.rules.diagnose_stale).
WHERE scans.id = item.scan AND scans.id = ANY(ARRAY(SELECT item.scan FROM item))
  AND scans.endpoint_id + 0 = who.endpoint_id
  AND scans.status || '' = 'PENDING' AND scans.worker = who.principal
  AND scans.attempt_count = COALESCE(item.attempt, 1)
  AND (item.assignment IS NULL OR scans.assignment_id = item.assignment)

-- fragment: closed_scan
-- A closed scan as COMPLETE and COMPLETE_ONE return it (the columns of a scan record less
-- its payload and result).
scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
scans.status, scans.verified, scans.source, scans.worker, scans.attempt_count,
scans.assignment_id, scans.leased_at, scans.lease_expires_at, scans.wait_reason,
scans.created_at, scans.updated_at, scans.finished_at, scans.dead_lettered_at,
scans.fail_reason, scans.attempt_base, scans.available_at, scans.redriven_at,
scans.redrive_count

-- fragment: next_leases
-- The next leases of COMPLETE and COMPLETE_ONE: up to :fetch due scans of the worker's
-- endpoint, only when something closed (`closed`) and nothing was a replay (`replay`).
), due AS (
    SELECT scans.id FROM scans
    WHERE scans.endpoint_id = (SELECT endpoint_id FROM who) AND scans.status = 'QUEUED'
      AND scans.available_at <= mf_now()
      AND scans.queue NOT IN (
          SELECT queue FROM paused_queues WHERE endpoint_id = (SELECT endpoint_id FROM who)
      )
      -- include: retry_elsewhere
      AND EXISTS (SELECT 1 FROM closed) AND NOT EXISTS (SELECT 1 FROM replay)
    ORDER BY scans.available_at, scans.id LIMIT :fetch
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
        assignment_id = :prefix || CAST(scans.id AS text),
        worker = (SELECT principal FROM who), leased_at = mf_now(),
        lease_expires_at = mf_now() + :timeout, wait_reason = NULL, updated_at = mf_now()
    WHERE scans.id = ANY(ARRAY(SELECT due.id FROM due))
    RETURNING scans.*, 0 AS req

-- fragment: closed_and_leased
-- The rows of the result statements: each scan closed and each leased, with what was done to
-- it (`done`) and the request it was done for (`req`, 0 for a statement of one request).
SELECT 'closed' AS done, req, id, endpoint_id, queue, name, version, kind, NULL AS payload,
       status, verified, source, worker, attempt_count, assignment_id, leased_at,
       lease_expires_at, wait_reason, created_at, updated_at, finished_at, dead_lettered_at,
       fail_reason, NULL AS result, attempt_base, available_at, redriven_at, redrive_count
FROM closed
UNION ALL
SELECT 'leased', req, id, endpoint_id, queue, name, version, kind, payload, status, verified,
       source, worker, attempt_count, assignment_id, leased_at, lease_expires_at,
       wait_reason, created_at, updated_at, finished_at, dead_lettered_at, fail_reason,
       result, attempt_base, available_at, redriven_at, redrive_count
FROM leased;

-- name: close_results @sqlite
-- SQLite: every close of the request in one statement (its JSON items, the first per scan),
-- each the compare-and-set of `lifecycle.rules.diagnose_stale` on the worker's current
-- assignment; a result without attempt and assignment id (the rollout form) closes attempt 1
-- only. PostgreSQL does this inside COMPLETE. `+scans.endpoint_id` keeps SQLite from walking
-- the endpoint's leases through ix_scans_pending_lease: each item finds its scan by key.
-- (SQLite only: PostgreSQL closes results inside COMPLETE.)
UPDATE scans SET status = item.value ->> '$.status', updated_at = mf_now(),
    lease_expires_at = NULL, wait_reason = NULL,
    fail_reason = item.value ->> '$.fail_reason',
    finished_at = CASE WHEN item.value ->> '$.terminal' THEN mf_now() END,
    dead_lettered_at = CASE WHEN item.value ->> '$.dead' THEN mf_now() END,
    cause = CASE WHEN item.value ->> '$.dead' THEN item.value ->> '$.cause' END,
    result = item.value ->> '$.result',
    available_at = CASE WHEN item.value ->> '$.terminal' THEN NULL
                        ELSE mf_now() + (item.value ->> '$.delay') END
FROM json_each(:items) AS item
WHERE scans.id = item.value ->> '$.scan' AND +scans.endpoint_id = :endpoint
  AND scans.status = 'PENDING' AND scans.worker = :worker
  AND scans.attempt_count = COALESCE(item.value ->> '$.attempt', 1)
  AND (item.value ->> '$.assignment' IS NULL
       OR scans.assignment_id = item.value ->> '$.assignment')
RETURNING *;
