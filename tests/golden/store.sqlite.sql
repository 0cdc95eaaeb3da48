-- activity_chart
SELECT activity.at_us, SUM(activity.finished), SUM(activity.failed),
       SUM(activity.dead_lettered)
FROM activity JOIN endpoints ON endpoints.id = activity.endpoint_id
WHERE endpoints.owner_id = :owner AND activity.span = :span AND activity.at_us >= :since
GROUP BY activity.at_us;

-- add_activity
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

-- all_paused_queues
SELECT endpoints.name, paused_queues.queue
FROM paused_queues JOIN endpoints ON endpoints.id = paused_queues.endpoint_id;

-- analyze_attempts
-- PostgreSQL only.;

-- analyze_scans
-- PostgreSQL only.;

-- any_owner
SELECT id FROM owners LIMIT 1;

-- attempts_of_scan
SELECT seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact
FROM attempts WHERE scan_id = :scan ORDER BY seq;

-- audit_entries
SELECT id, at, action, count, scan_ids, filter, origin, endpoint, detail FROM audit
WHERE owner_id = :owner AND id < :before
ORDER BY id DESC LIMIT :limit;

-- authenticate
SELECT tokens.role, tokens.principal, tokens.owner_id, tokens.endpoint_id,
       endpoints.name, endpoints.revoked_at, tokens.id
FROM tokens LEFT JOIN endpoints ON endpoints.id = tokens.endpoint_id
WHERE tokens.token_hash = :digest;

-- bump_totals
UPDATE scan_totals SET count = count + :n
WHERE endpoint_id = :endpoint AND outcome = :outcome AND shard = :shard;

-- cause_facets
SELECT cause_facets.cause, cause_facets.facet, endpoints.name, cause_facets.value,
       cause_facets.hits
FROM cause_facets JOIN endpoints ON endpoints.id = cause_facets.endpoint_id
WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND cause_facets.cause IN (SELECT value FROM json_each(:causes))
ORDER BY cause_facets.hits DESC, endpoints.name, cause_facets.value;

-- cause_hours
SELECT cause_hours.cause, cause_hours.hour_us, SUM(cause_hours.dead_letters)
FROM cause_hours JOIN endpoints ON endpoints.id = cause_hours.endpoint_id
WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
  AND cause_hours.cause IN (SELECT value FROM json_each(:causes))
  AND cause_hours.hour_us >= :since
GROUP BY cause_hours.cause, cause_hours.hour_us;

-- cause_pattern
SELECT pattern FROM causes WHERE cause = :cause;

-- causes_of_scans
SELECT scans.id, causes.cause, causes.pattern, causes.grouping_version
FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
JOIN causes ON causes.cause = scans.cause
WHERE scans.id IN (SELECT value FROM json_each(:ids)) AND endpoints.owner_id = :owner;

-- causes_page
SELECT counted.cause, causes.pattern, counted.dead_letters, counted.first_seen_at,
       counted.last_seen_at, counted.example_scan_id
FROM (
    SELECT dead_letter_causes.cause, SUM(dead_letter_causes.dead_letters) AS dead_letters,
           MIN(dead_letter_causes.first_seen_at) AS first_seen_at,
           MAX(dead_letter_causes.last_seen_at) AS last_seen_at,
           MAX(dead_letter_causes.example_scan_id) AS example_scan_id
    FROM dead_letter_causes JOIN endpoints
        ON endpoints.id = dead_letter_causes.endpoint_id
    WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
    GROUP BY dead_letter_causes.cause
) AS counted JOIN causes ON causes.cause = counted.cause
WHERE (counted.last_seen_at, counted.cause) < (:after_seen, :after_cause)
ORDER BY counted.last_seen_at DESC, counted.cause DESC
LIMIT :limit;

-- close_as_operator
UPDATE scans SET status = :status, updated_at = mf_now(), lease_expires_at = NULL,
    wait_reason = NULL, fail_reason = :fail_reason,
    finished_at = CASE WHEN :terminal THEN mf_now() END,
    dead_lettered_at = CASE WHEN :dead THEN mf_now() END,
    cause = CASE WHEN :dead THEN :cause END,
    result = :result,
    available_at = CASE WHEN :terminal THEN NULL ELSE mf_now() + :delay END
WHERE id = :scan AND status = 'PENDING' AND attempt_count = :attempt
  AND assignment_id = :assignment
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- close_lapsed_attempt
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, cause)
VALUES (:scan, :seq, :attempt, :assignment, :worker, :leased_at, mf_now(), :outcome,
        :summary, NULL, :cause);

-- close_results
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
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- close_revoked_attempts
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, cause)
SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker, leased_at,
       mf_now(), 'endpoint_revoked', NULL, NULL, :cause
FROM scans WHERE endpoint_id = :endpoint AND status = 'PENDING';

-- complete
-- PostgreSQL only: SQLite runs CLOSE_RESULTS, LEASE and INSERT_HISTORY in steps.;

-- count_dead_letters
SELECT count(*), COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL THEN 1 ELSE 0 END), 0)
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

-- count_due_audit
SELECT count(*), 0 FROM audit WHERE at <= mf_now() - :kept;

-- count_due_board_sessions
SELECT count(*), 0 FROM board_sessions WHERE expires_at <= mf_now() - :kept;

-- count_due_dead_letters
SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
FROM scans
WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NOT NULL
  AND scans.dead_lettered_at <= mf_now() - :kept;

-- count_due_delivery_counts
SELECT count(*), 0 FROM delivery_counts WHERE minute_us <= mf_now() - :kept - 60000000;

-- count_due_failed_scans
SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
FROM scans
WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NULL
  AND scans.finished_at <= mf_now() - :kept;

-- count_due_finished_scans
SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
FROM scans
WHERE scans.status = 'FINISHED' AND scans.finished_at <= mf_now() - :kept;

-- count_hooks
SELECT count(*) FROM hooks WHERE endpoint_id = :endpoint;

-- count_scans
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

-- dead_letter_ids
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

-- dead_letter_lapsed
UPDATE scans SET status = 'FAILED', dead_lettered_at = mf_now(), finished_at = mf_now(),
    updated_at = mf_now(), fail_reason = :reason, lease_expires_at = NULL,
    wait_reason = NULL, cause = :cause
WHERE id = :scan AND status = 'PENDING';

-- dead_letter_revoked
UPDATE scans SET status = 'FAILED', dead_lettered_at = mf_now(), finished_at = mf_now(),
    updated_at = mf_now(), lease_expires_at = NULL, wait_reason = NULL,
    fail_reason = 'endpoint_revoked', cause = :cause
WHERE endpoint_id = :endpoint AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- dead_letter_total
SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0),
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_causes.dead_letters ELSE 0 END), 0)
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint);

-- dead_letters_by_key
SELECT COALESCE(SUM(dead_letter_counts.dead_letters), 0),
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_counts.dead_letters ELSE 0 END), 0)
FROM dead_letter_counts JOIN endpoints ON endpoints.id = dead_letter_counts.endpoint_id
WHERE endpoints.owner_id = :owner
  AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
  AND (CAST(:cause AS text) IS NULL OR dead_letter_counts.cause = :cause)
  AND (CAST(:queue AS text) IS NULL OR dead_letter_counts.queue = :queue)
  AND (CAST(:reason AS text) IS NULL OR dead_letter_counts.fail_reason = :reason);

-- dead_letters_now
SELECT dead_letter_causes.endpoint_id, SUM(dead_letter_causes.dead_letters)
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = :owner
GROUP BY dead_letter_causes.endpoint_id;

-- dead_letters_of_cause
SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0),
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_causes.dead_letters ELSE 0 END), 0)
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = :owner AND dead_letter_causes.cause = :cause
  AND (:endpoint IS NULL OR endpoints.name = :endpoint);

-- delete_hook
DELETE FROM hooks WHERE id = :hook AND endpoint_id = :endpoint RETURNING url;

-- delete_owner_tokens
DELETE FROM tokens
WHERE endpoint_id IS NULL AND owner_id = :owner AND role = 'owner'
RETURNING id;

-- delete_session
DELETE FROM board_sessions WHERE session_hash = :session;

-- delete_token
DELETE FROM tokens WHERE id = :token AND endpoint_id = :endpoint RETURNING principal, role;

-- delivery_clock
SELECT mf_now();

-- delivery_window_totals
SELECT SUM(delivery_counts.attempts), SUM(delivery_counts.failures)
FROM delivery_counts JOIN endpoints ON endpoints.id = delivery_counts.endpoint_id
WHERE endpoints.owner_id = :owner
  AND delivery_counts.minute_us >= :start AND delivery_counts.minute_us < :end;

-- diagnose_refusal
SELECT status, attempt_count, assignment_id, worker FROM scans
WHERE id = :scan AND endpoint_id = :endpoint;

-- disable_hook
UPDATE hooks SET enabled = FALSE, disabled_reason = :reason
WHERE id = :hook AND enabled = TRUE AND consecutive_failures >= :at_least;

-- due_dead_letters
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NOT NULL
  AND dead_lettered_at <= mf_now() - :kept
ORDER BY dead_lettered_at LIMIT :limit;

-- due_failed_scans
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NULL AND finished_at <= mf_now() - :kept
ORDER BY finished_at LIMIT :limit;

-- due_finished_scans
SELECT id FROM scans
WHERE status = 'FINISHED' AND finished_at <= mf_now() - :kept
ORDER BY finished_at LIMIT :limit;

-- enable_hook
UPDATE hooks SET enabled = TRUE, disabled_reason = NULL, consecutive_failures = 0
WHERE id = :hook AND endpoint_id = :endpoint
RETURNING id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason,
          created_at, consecutive_failures, last_delivery_at;

-- end_owner_sessions
UPDATE board_sessions SET expires_at = mf_now()
WHERE expires_at > mf_now() AND owner_id = :owner;

-- ended_now
SELECT ended.endpoint_id, ended.outcome, SUM(ended.n) FROM (
    SELECT scan_totals.endpoint_id, scan_totals.outcome, scan_totals.count AS n
    FROM scan_totals JOIN endpoints ON endpoints.id = scan_totals.endpoint_id
    WHERE endpoints.owner_id = :owner AND scan_totals.outcome IN ('finished', 'failed')
    UNION ALL
    SELECT pruned_scans.endpoint_id, pruned_scans.outcome, -pruned_scans.count
    FROM pruned_scans JOIN endpoints ON endpoints.id = pruned_scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND pruned_scans.outcome IN ('finished', 'failed')
) AS ended
GROUP BY ended.endpoint_id, ended.outcome;

-- endpoint_by_id
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE id = :endpoint;

-- endpoint_by_name
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE name = :name;

-- endpoint_name
SELECT name FROM endpoints WHERE id = :endpoint;

-- endpoint_owner
SELECT endpoints.owner_id, owners.name
FROM endpoints JOIN owners ON owners.id = endpoints.owner_id
WHERE endpoints.name = :endpoint;

-- endpoint_tokens
SELECT id, principal, role, created_at, last_used_at FROM tokens
WHERE endpoint_id = :endpoint ORDER BY id;

-- fail_unleased
UPDATE scans SET status = 'FAILED', fail_reason = 'failed', finished_at = mf_now(),
    updated_at = mf_now(), result = NULL, available_at = NULL
WHERE id = :scan AND status IN ('QUEUED', 'QUARANTINED')
RETURNING id;

-- find_session
SELECT board_sessions.owner_id, owners.name, board_sessions.csrf, board_sessions.expires_at,
       board_sessions.flash, board_sessions.expires_at > mf_now()
FROM board_sessions JOIN owners ON owners.id = board_sessions.owner_id
WHERE board_sessions.session_hash = :session;

-- heartbeat
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
)
UPDATE scans SET updated_at = mf_now(),
    lease_expires_at = CASE WHEN wait_reason IS NULL THEN mf_now() + :timeout
                            ELSE lease_expires_at END
WHERE id = :scan AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who) AND attempt_count = COALESCE(:attempt, 1)
  AND (:assignment IS NULL OR assignment_id = :assignment)
RETURNING lease_expires_at, endpoint_id;

-- hook_health
SELECT hooks.endpoint_id, hooks.id, hooks.url, hooks.queue, hooks.enabled,
       hooks.disabled_reason, hooks.consecutive_failures, hooks.last_delivery_at
FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
WHERE endpoints.owner_id = :owner ORDER BY hooks.id;

-- hook_targets
SELECT hooks.id, hooks.endpoint_id, hooks.url, hooks.queue, hooks.rate_per_minute,
       hooks.secret,
       CASE WHEN hooks.previous_valid_until > mf_now() THEN hooks.previous_secret END
FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
WHERE hooks.endpoint_id = :endpoint AND hooks.enabled = TRUE AND endpoints.revoked_at IS NULL
ORDER BY hooks.id;

-- host_writable
-- PostgreSQL only: a SQLite file is writable or the server does not start.;

-- insert_attempt
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, settled_status, settled_available_at,
                      settled_fail_reason, next_assignments, result_digest, cause)
VALUES (:scan, :seq, :attempt, :assignment, :worker, :leased_at, mf_now(), :outcome,
        :summary, :artifact, :settled_status, :settled_available_at,
        :settled_fail_reason, :next_assignments, :result_digest, :cause);

-- insert_audit_entry
INSERT INTO audit (owner_id, at, action, count, origin, endpoint, detail)
VALUES (:owner, mf_now(), :action, :count, :origin, :endpoint, :detail);

-- insert_endpoint
INSERT INTO endpoints (name, owner_id, open_intake, created_at)
VALUES (:name, :owner, :open_intake, mf_now())
RETURNING id, name, owner_id, open_intake, revoked_at, created_at;

-- insert_hook
INSERT INTO hooks (endpoint_id, url, queue, rate_per_minute, enabled, secret,
                   consecutive_failures, created_at)
VALUES (:endpoint, :url, :queue, :rate, TRUE, :secret, 0, mf_now())
RETURNING id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason,
          created_at, consecutive_failures, last_delivery_at;

-- insert_owner
INSERT INTO owners (name, created_at) VALUES (:name, mf_now()) RETURNING id;

-- insert_redrive_audit
INSERT INTO audit (owner_id, at, action, count, scan_ids, filter, origin, detail)
VALUES (:owner, mf_now(), 'redrive', 0, :scan_ids, :filter, :origin, :detail)
RETURNING id;

-- insert_scans
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
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- insert_session
INSERT INTO board_sessions (session_hash, owner_id, csrf, created_at, expires_at)
VALUES (:session, :owner, :csrf, mf_now(), mf_now() + :lifetime)
RETURNING expires_at;

-- insert_token
INSERT INTO tokens (token_hash, role, owner_id, endpoint_id, principal, created_at)
VALUES (:digest, :role, :owner, :endpoint, :principal, mf_now())
RETURNING id, principal, role, created_at, last_used_at;

-- insert_zero_total
INSERT INTO scan_totals (endpoint_id, outcome, shard, count)
VALUES (:endpoint, :outcome, :shard, 0);

-- lapsed_anywhere
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now()
FROM scans
WHERE status = 'PENDING' AND lease_expires_at < mf_now()
ORDER BY lease_expires_at LIMIT :limit;

-- lapsed_of_endpoint
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now()
FROM scans
WHERE status = 'PENDING' AND endpoint_id = :endpoint AND lease_expires_at < mf_now()
ORDER BY lease_expires_at LIMIT :limit;

-- lease
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
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
      AND (scans.worker IS NULL OR scans.worker <> (SELECT principal FROM who)
           OR scans.available_at <= mf_now() - :elsewhere
           OR NOT EXISTS (
               SELECT 1 FROM tokens AS other
               WHERE other.endpoint_id = (SELECT endpoint_id FROM who)
                 AND other.role = 'worker'
                 AND other.principal <> (SELECT principal FROM who)
                 AND other.last_used_at > mf_now() - :asking
           ))
    ORDER BY available_at, id LIMIT :limit
)
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- leases_held
SELECT worker, count(*) FROM scans
WHERE endpoint_id = :endpoint AND status = 'PENDING'
GROUP BY worker;

-- list_dead_letters
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name,
       final.seq, final.attempt, final.worker, final.leased_at, final.closed_at,
       final.outcome, final.summary, final.artifact
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

-- list_dead_letters_newer
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name,
       final.seq, final.attempt, final.worker, final.leased_at, final.closed_at,
       final.outcome, final.summary, final.artifact
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

-- list_dead_letters_of_cause
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name,
       final.seq, final.attempt, final.worker, final.leased_at, final.closed_at,
       final.outcome, final.summary, final.artifact
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

-- list_dead_letters_of_cause_newer
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name,
       final.seq, final.attempt, final.worker, final.leased_at, final.closed_at,
       final.outcome, final.summary, final.artifact
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

-- list_hooks
SELECT id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason, created_at,
       consecutive_failures, last_delivery_at
FROM hooks WHERE endpoint_id = :endpoint ORDER BY id;

-- list_scans
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
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

-- list_scans_newer
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
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

-- live_counts
SELECT scans.endpoint_id, 'queued', count(*),
       SUM(CASE WHEN scans.available_at IS NULL THEN 1 ELSE 0 END) FROM scans
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

-- live_scan
SELECT id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
       worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
       created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
       attempt_base, available_at, redriven_at, redrive_count
FROM scans
WHERE endpoint_id = :endpoint AND name = :name AND version = :version AND kind = :kind
  AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- lock_endpoint_for_token
SELECT id FROM endpoints WHERE id = :endpoint;

-- lock_hook_endpoint
SELECT revoked_at FROM endpoints WHERE id = :endpoint;

-- lock_revoked_scans
SELECT id FROM scans
WHERE endpoint_id = :endpoint AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- name_cause
INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
VALUES (:cause, :pattern, mf_now(), :grouping_version)
ON CONFLICT (cause) DO NOTHING;

-- note_hook_delivered
UPDATE hooks SET consecutive_failures = 0, last_delivery_at = mf_now()
WHERE id = :hook;

-- note_hook_failed
UPDATE hooks SET consecutive_failures = consecutive_failures + 1 WHERE id = :hook;

-- note_pruned_scans
INSERT INTO pruned_scans (endpoint_id, outcome, count) VALUES (:endpoint, :outcome, :n)
ON CONFLICT (endpoint_id, outcome) DO UPDATE SET count = pruned_scans.count + excluded.count;

-- now
SELECT mf_now();

-- oldest_due
SELECT MIN(head.available_at) FROM (
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

-- oldest_due_of_endpoint
SELECT available_at FROM scans
WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at <= mf_now()
  AND queue NOT IN (SELECT queue FROM paused_queues WHERE endpoint_id = :endpoint)
ORDER BY available_at, id LIMIT 1;

-- outcome_totals
SELECT outcome, SUM(count) FROM scan_totals GROUP BY outcome;

-- owned_endpoints
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE owner_id = :owner ORDER BY name;

-- owned_scan
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.id = :scan AND endpoints.owner_id = :owner;

-- owner_id
SELECT id FROM owners WHERE name = :name;

-- owner_names
SELECT name FROM owners ORDER BY name LIMIT :limit;

-- package_scans
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
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
SELECT who.principal, found.id, found.status, found.worker, found.assignment_id
FROM who LEFT JOIN found ON 1 = 1;

-- park_queue
UPDATE scans SET paused_due_at = available_at, available_at = NULL
WHERE id IN (
    SELECT id FROM scans
    WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at IS NOT NULL
      AND (available_at, id) > (:after_at, :after_id) AND queue = :queue
    ORDER BY available_at, id LIMIT :limit
)
RETURNING id, paused_due_at;

-- pause_queue
INSERT INTO paused_queues (endpoint_id, queue, paused_at, paused_by)
VALUES (:endpoint, :queue, mf_now(), :by)
ON CONFLICT (endpoint_id, queue) DO NOTHING
RETURNING paused_at;

-- paused_queues_of_endpoint
SELECT queue, paused_at, paused_by FROM paused_queues
WHERE endpoint_id = :endpoint ORDER BY queue;

-- pending_states
SELECT count(*),
       SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count < :max_attempts
                THEN 1 ELSE 0 END),
       SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count >= :max_attempts
                THEN 1 ELSE 0 END)
FROM scans WHERE status = 'PENDING';

-- ping
SELECT 1;

-- plan_with_values
-- PostgreSQL only: SQLite plans every statement with its values bound.;

-- promote_from_quarantine
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
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- prune_activity
DELETE FROM activity WHERE span = :span AND at_us < mf_now() - :kept;

-- prune_attempts
DELETE FROM attempts WHERE scan_id IN (SELECT value FROM json_each(:ids));

-- prune_audit
DELETE FROM audit WHERE id IN (
    SELECT id FROM audit WHERE at <= mf_now() - :kept ORDER BY at LIMIT :limit
);

-- prune_board_sessions
DELETE FROM board_sessions WHERE session_hash IN (
    SELECT session_hash FROM board_sessions
    WHERE expires_at <= mf_now() - :kept ORDER BY expires_at LIMIT :limit
);

-- prune_delivery_counts
DELETE FROM delivery_counts WHERE (endpoint_id, minute_us) IN (
    SELECT endpoint_id, minute_us FROM delivery_counts
    WHERE minute_us <= mf_now() - :kept - 60000000 ORDER BY minute_us LIMIT :limit
);

-- prune_scans
DELETE FROM scans WHERE id IN (SELECT value FROM json_each(:ids)) RETURNING endpoint_id;

-- quarantined_count
SELECT count(*) FROM scans WHERE status = 'QUARANTINED';

-- queued_states
SELECT queued.total, queued.waiting, queued.parked, held.unparked, held.waiting, mf_now()
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

-- record_delivery_minute
INSERT INTO delivery_counts (endpoint_id, minute_us, attempts, failures)
VALUES (:endpoint, mf_now() - mf_now() % 60000000, :attempts, :failures)
ON CONFLICT (endpoint_id, minute_us) DO UPDATE
SET attempts = delivery_counts.attempts + excluded.attempts,
    failures = delivery_counts.failures + excluded.failures;

-- redrive_candidates
SELECT scans.id, scans.endpoint_id, endpoints.name, scans.queue, scans.name,
       scans.version, scans.kind, scans.verified, scans.source, scans.created_at,
       endpoints.revoked_at, scans.dead_lettered_at
FROM scans CROSS JOIN endpoints
WHERE scans.id IN (SELECT value FROM json_each(:ids))
  AND endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner;

-- redrive_live_keys
SELECT dead.id FROM scans AS dead
JOIN scans AS live ON live.endpoint_id = dead.endpoint_id AND live.name = dead.name
    AND live.version = dead.version AND live.kind = dead.kind
    AND live.status IN ('QUARANTINED', 'QUEUED', 'PENDING')
WHERE dead.id IN (SELECT value FROM json_each(:ids));

-- redrive_requeue
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

-- replayed_jobs
SELECT id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
       worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
       created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
       attempt_base, available_at, redriven_at, redrive_count
FROM scans
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status = 'PENDING' AND worker = :worker AND lease_expires_at >= mf_now()
ORDER BY id;

-- replayed_result
SELECT attempts.attempt, attempts.closed_at, attempts.settled_status,
       attempts.settled_available_at, attempts.settled_fail_reason,
       attempts.next_assignments, attempts.outcome, attempts.result_digest
FROM attempts JOIN scans ON scans.id = attempts.scan_id
WHERE attempts.scan_id = :scan AND attempts.assignment_id = :assignment
  AND attempts.worker = :worker AND scans.endpoint_id = :endpoint
  AND attempts.settled_status IS NOT NULL;

-- requeue_lapsed
UPDATE scans SET status = 'QUEUED', available_at = mf_now() + :delay,
    updated_at = mf_now(), lease_expires_at = NULL, wait_reason = NULL
WHERE id = :scan AND status = 'PENDING';

-- resume
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
)
UPDATE scans SET updated_at = mf_now(), lease_expires_at = mf_now() + :timeout,
    wait_reason = NULL
WHERE id = :scan AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who) AND attempt_count = COALESCE(:attempt, 1)
  AND (:assignment IS NULL OR assignment_id = :assignment)
RETURNING lease_expires_at, endpoint_id;

-- resume_queue
DELETE FROM paused_queues WHERE endpoint_id = :endpoint AND queue = :queue RETURNING 1;

-- revoke_endpoint
UPDATE endpoints SET revoked_at = mf_now() WHERE id = :endpoint;

-- role_defaults
-- PostgreSQL only: SQLite has no roles.;

-- rotate_hook
UPDATE hooks SET previous_secret = secret, previous_valid_until = mf_now() + :grace,
    secret = :secret
WHERE id = :hook AND endpoint_id = :endpoint
RETURNING previous_valid_until, url;

-- search_dead_letters
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
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name,
       final.seq, final.attempt, final.worker, final.leased_at, final.closed_at,
       final.outcome, final.summary, final.artifact
FROM matched
JOIN scans ON scans.id = matched.id
JOIN endpoints ON endpoints.id = scans.endpoint_id
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT :limit;

-- search_dead_letters_newer
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
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name,
       final.seq, final.attempt, final.worker, final.leased_at, final.closed_at,
       final.outcome, final.summary, final.artifact
FROM matched
JOIN scans ON scans.id = matched.id
JOIN endpoints ON endpoints.id = scans.endpoint_id
LEFT JOIN attempts AS final
    ON final.scan_id = scans.id AND final.seq = scans.attempt_base + scans.attempt_count
ORDER BY scans.dead_lettered_at, scans.id
LIMIT :limit;

-- set_audit_requeued
UPDATE audit SET count = :count, detail = :detail WHERE id = :audit;

-- set_session_flash
UPDATE board_sessions SET flash = :flash
WHERE session_hash = :session AND expires_at > mf_now();

-- settings_in_force
-- PostgreSQL only: SQLite has no session settings.;

-- stale_tables
-- PostgreSQL only: SQLite's plans do not follow statistics.;

-- submit_as_source
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest AND tokens.role = 'source'
      AND endpoints.revoked_at IS NULL
)
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count,
                   attempt_base, redrive_count, paused_due_at)
SELECT who.endpoint_id, :queue, :name, :version, :kind, :payload, 'QUEUED', TRUE,
       who.principal, mf_now(), mf_now(),
       CASE WHEN paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN paused.queue IS NOT NULL THEN mf_now() END
FROM who LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = who.endpoint_id AND paused.queue = :queue
WHERE TRUE
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- take_session_flash
UPDATE board_sessions SET flash = NULL WHERE session_hash = :session AND flash = :flash;

-- token_named
SELECT id FROM tokens WHERE endpoint_id = :endpoint AND principal = :principal LIMIT 1;

-- touch_token
UPDATE tokens SET last_used_at = mf_now()
WHERE token_hash = :digest
  AND (last_used_at IS NULL OR last_used_at <= mf_now() - :coarse);

-- unpark_queue
UPDATE scans SET available_at = paused_due_at, paused_due_at = NULL
WHERE id IN (
    SELECT id FROM scans
    WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at IS NULL
      AND id > :after_id AND queue = :queue
    ORDER BY available_at, id LIMIT :limit
)
RETURNING id, endpoint_id, queue, name, version, kind, verified, source, created_at,
          available_at;

-- wait
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = :digest AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
)
UPDATE scans SET updated_at = mf_now(), lease_expires_at = mf_now() + :timeout,
    wait_reason = :reason
WHERE id = :scan AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who) AND attempt_count = COALESCE(:attempt, 1)
  AND (:assignment IS NULL OR assignment_id = :assignment)
RETURNING lease_expires_at, endpoint_id;

-- workers_last_hour
SELECT worker, SUM(finished), SUM(attempt_failures), SUM(lapsed)
FROM activity
WHERE endpoint_id = :endpoint AND span = 'minute' AND at_us >= mf_now() - 3600000000
GROUP BY worker;
