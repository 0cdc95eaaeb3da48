-- activity_chart
SELECT activity.at_us, SUM(activity.finished), SUM(activity.failed),
       SUM(activity.dead_lettered)
FROM activity JOIN endpoints ON endpoints.id = activity.endpoint_id
WHERE endpoints.owner_id = $1 AND activity.span = $2 AND activity.at_us >= $3
GROUP BY activity.at_us;

-- add_activity
INSERT INTO activity (endpoint_id, worker, span, at_us, finished, failed, dead_lettered,
                      attempt_failures, lapsed)
VALUES ($1, $2, $3, mf_now() - mf_now() % $4, $5, $6,
        $7, $8, $9)
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
ANALYZE (SKIP_LOCKED) attempts;

-- analyze_scans
ANALYZE (SKIP_LOCKED) scans;

-- any_owner
SELECT id FROM owners LIMIT 1;

-- attempts_of_scan
SELECT seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact
FROM attempts WHERE scan_id = $1 ORDER BY seq;

-- audit_entries
SELECT id, at, action, count, scan_ids, filter, origin, endpoint, detail FROM audit
WHERE owner_id = $1 AND id < $2
ORDER BY id DESC LIMIT $3;

-- authenticate
SELECT tokens.role, tokens.principal, tokens.owner_id, tokens.endpoint_id,
       endpoints.name, endpoints.revoked_at, tokens.id
FROM tokens LEFT JOIN endpoints ON endpoints.id = tokens.endpoint_id
WHERE tokens.token_hash = $1;

-- bump_totals
UPDATE scan_totals SET count = count + $1
WHERE endpoint_id = $2 AND outcome = $3 AND shard = $4;

-- cause_facets
SELECT cause_facets.cause, cause_facets.facet, endpoints.name, cause_facets.value,
       cause_facets.hits
FROM cause_facets JOIN endpoints ON endpoints.id = cause_facets.endpoint_id
WHERE endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND cause_facets.cause IN (SELECT jsonb_array_elements_text(CAST($3 AS jsonb)))
ORDER BY cause_facets.hits DESC, endpoints.name, cause_facets.value;

-- cause_hours
SELECT cause_hours.cause, cause_hours.hour_us, SUM(cause_hours.dead_letters)
FROM cause_hours JOIN endpoints ON endpoints.id = cause_hours.endpoint_id
WHERE endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND cause_hours.cause IN (SELECT jsonb_array_elements_text(CAST($3 AS jsonb)))
  AND cause_hours.hour_us >= $4
GROUP BY cause_hours.cause, cause_hours.hour_us;

-- cause_pattern
SELECT pattern FROM causes WHERE cause = $1;

-- causes_of_scans
SELECT scans.id, causes.cause, causes.pattern, causes.grouping_version
FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
JOIN causes ON causes.cause = scans.cause
WHERE scans.id = ANY(ARRAY(
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
)) AND endpoints.owner_id = $2;

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
    WHERE endpoints.owner_id = $1
      AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
    GROUP BY dead_letter_causes.cause
) AS counted JOIN causes ON causes.cause = counted.cause
WHERE (counted.last_seen_at, counted.cause) < ($3, $4)
ORDER BY counted.last_seen_at DESC, counted.cause DESC
LIMIT $5;

-- close_as_operator
UPDATE scans SET status = $1, updated_at = mf_now(), lease_expires_at = NULL,
    wait_reason = NULL, fail_reason = $2,
    finished_at = CASE WHEN CAST($3 AS boolean) THEN mf_now() END,
    dead_lettered_at = CASE WHEN CAST($4 AS boolean) THEN mf_now() END,
    cause = CASE WHEN CAST($4 AS boolean) THEN CAST($5 AS text) END,
    result = $6,
    available_at = CASE WHEN $3 THEN NULL ELSE mf_now() + CAST($7 AS bigint) END
WHERE id = $8 AND status = 'PENDING' AND attempt_count = $9
  AND assignment_id = $10
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- close_lapsed_attempt
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, cause)
VALUES ($1, $2, $3, $4, $5, $6, mf_now(), $7,
        $8, NULL, $9);

-- close_results
-- SQLite only: PostgreSQL closes results inside COMPLETE.;

-- close_revoked_attempts
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, cause)
SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker, leased_at,
       mf_now(), 'endpoint_revoked', NULL, NULL, $1
FROM scans WHERE endpoint_id = $2 AND status = 'PENDING';

-- complete
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
), item AS (
    SELECT * FROM jsonb_to_recordset(CAST($2 AS jsonb)) AS item(
        scan bigint, attempt integer, assignment text, status text, fail_reason text,
        terminal boolean, dead boolean, result text, delay bigint, outcome text,
        summary text, artifact text, result_digest text, cause text, pattern text,
        grouping_version integer)
), closed AS (
    UPDATE scans SET status = item.status, updated_at = mf_now(),
        lease_expires_at = NULL, wait_reason = NULL, fail_reason = item.fail_reason,
        finished_at = CASE WHEN item.terminal THEN mf_now() END,
        dead_lettered_at = CASE WHEN item.dead THEN mf_now() END,
        cause = CASE WHEN item.dead THEN item.cause END,
        result = item.result,
        available_at = CASE WHEN item.terminal THEN NULL ELSE mf_now() + item.delay END
    FROM item, who
    WHERE scans.id = item.scan AND scans.id = ANY(ARRAY(SELECT item.scan FROM item))
      AND scans.endpoint_id + 0 = who.endpoint_id
      AND scans.status = 'PENDING' AND scans.worker = who.principal
      AND scans.attempt_count = COALESCE(item.attempt, 1)
      AND (item.assignment IS NULL OR scans.assignment_id = item.assignment)
    RETURNING scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version,
              scans.kind, scans.status, scans.verified, scans.source, scans.worker,
              scans.attempt_count, scans.assignment_id, scans.leased_at,
              scans.lease_expires_at, scans.wait_reason, scans.created_at,
              scans.updated_at, scans.finished_at, scans.dead_lettered_at,
              scans.fail_reason, scans.attempt_base, scans.available_at,
              scans.redriven_at, scans.redrive_count,
              item.outcome, item.summary, item.artifact, item.result_digest,
              item.cause AS attempt_cause
), named AS (
    INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
    SELECT DISTINCT item.cause, item.pattern, mf_now(), item.grouping_version FROM item
    WHERE item.cause IS NOT NULL AND EXISTS (SELECT 1 FROM closed)
    ON CONFLICT (cause) DO NOTHING
), replay AS (
    SELECT attempts.scan_id FROM attempts
    WHERE attempts.scan_id = ANY(ARRAY(SELECT item.scan FROM item))
      AND attempts.assignment_id = ANY(ARRAY(SELECT item.assignment FROM item))
), due AS (
    SELECT scans.id FROM scans
    WHERE scans.endpoint_id = (SELECT endpoint_id FROM who) AND scans.status = 'QUEUED'
      AND scans.available_at <= mf_now()
      AND scans.queue NOT IN (
          SELECT queue FROM paused_queues WHERE endpoint_id = (SELECT endpoint_id FROM who)
      )
      AND (scans.worker IS NULL OR scans.worker <> (SELECT principal FROM who)
           OR scans.available_at <= mf_now() - $3
           OR NOT EXISTS (
               SELECT 1 FROM tokens AS other
               WHERE other.endpoint_id = (SELECT endpoint_id FROM who)
                 AND other.role = 'worker'
                 AND other.principal <> (SELECT principal FROM who)
                 AND other.last_used_at > mf_now() - $4
           ))
      AND EXISTS (SELECT 1 FROM closed) AND NOT EXISTS (SELECT 1 FROM replay)
    ORDER BY scans.available_at, scans.id LIMIT $5
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
        assignment_id = $6 || CAST(scans.id AS text),
        worker = (SELECT principal FROM who), leased_at = mf_now(),
        lease_expires_at = mf_now() + $7, wait_reason = NULL, updated_at = mf_now()
    FROM due WHERE scans.id = due.id AND scans.id = ANY(ARRAY(SELECT due.id FROM due))
    RETURNING scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version,
              scans.kind, scans.payload, scans.status, scans.verified, scans.source,
              scans.worker, scans.attempt_count, scans.assignment_id, scans.leased_at,
              scans.lease_expires_at, scans.wait_reason, scans.created_at,
              scans.updated_at, scans.finished_at, scans.dead_lettered_at,
              scans.fail_reason, scans.result, scans.attempt_base, scans.available_at,
              scans.redriven_at, scans.redrive_count
), history AS (
    INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at,
                          closed_at, outcome, summary, artifact, settled_status,
                          settled_available_at, settled_fail_reason, next_assignments,
                          result_digest, cause)
    SELECT id, attempt_base + attempt_count, attempt_count, assignment_id, worker,
           leased_at, mf_now(), outcome, summary, artifact, status, available_at,
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
      AND scan_totals.outcome = ended.outcome AND scan_totals.shard = $8
)
SELECT 'closed', id, endpoint_id, queue, name, version, kind, NULL, status, verified,
       source, worker, attempt_count, assignment_id, leased_at, lease_expires_at,
       wait_reason, created_at, updated_at, finished_at, dead_lettered_at, fail_reason,
       NULL, attempt_base, available_at, redriven_at, redrive_count
FROM closed
UNION ALL
SELECT 'leased', id, endpoint_id, queue, name, version, kind, payload, status, verified,
       source, worker, attempt_count, assignment_id, leased_at, lease_expires_at,
       wait_reason, created_at, updated_at, finished_at, dead_lettered_at, fail_reason,
       result, attempt_base, available_at, redriven_at, redrive_count
FROM leased;

-- count_dead_letters
SELECT count(*), COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL THEN 1 ELSE 0 END), 0)
FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.name ILIKE $3 ESCAPE '\'
       OR scans.source ILIKE $3 ESCAPE '\' OR scans.kind ILIKE $3 ESCAPE '\'
       OR scans.id = $4)
  AND (CAST($5 AS text) IS NULL OR scans.fail_reason = $5)
  AND (CAST($6 AS bigint) IS NULL OR scans.dead_lettered_at >= $6)
  AND (CAST($7 AS text) IS NULL OR scans.queue = $7)
  AND (CAST($8 AS text) IS NULL OR scans.cause = $8);

-- count_due_audit
SELECT count(*), 0 FROM audit WHERE at <= mf_now() - $1;

-- count_due_board_sessions
SELECT count(*), 0 FROM board_sessions WHERE expires_at <= mf_now() - $1;

-- count_due_dead_letters
SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
FROM scans
WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NOT NULL
  AND scans.dead_lettered_at <= mf_now() - $1;

-- count_due_delivery_counts
SELECT count(*), 0 FROM delivery_counts WHERE minute_us <= mf_now() - $1 - 60000000;

-- count_due_failed_scans
SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
FROM scans
WHERE scans.status = 'FAILED' AND scans.dead_lettered_at IS NULL
  AND scans.finished_at <= mf_now() - $1;

-- count_due_finished_scans
SELECT count(*), SUM((SELECT count(*) FROM attempts WHERE attempts.scan_id = scans.id))
FROM scans
WHERE scans.status = 'FINISHED' AND scans.finished_at <= mf_now() - $1;

-- count_hooks
SELECT count(*) FROM hooks WHERE endpoint_id = $1;

-- count_scans
SELECT count(*) FROM (
SELECT scans.id
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.status = $3)
  AND (CAST($4 AS text) IS NULL OR scans.queue = $4)
  AND (CAST($5 AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = $5)
  AND (CAST($6 AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = $6)
  AND (CAST($7 AS text) IS NULL OR scans.name ILIKE $7 ESCAPE '\'
       OR scans.source ILIKE $7 ESCAPE '\' OR scans.kind ILIKE $7 ESCAPE '\'
       OR scans.id = $8)
  AND scans.id < $9
ORDER BY scans.id DESC LIMIT $10
) AS capped;

-- dead_letter_ids
SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.dead_lettered_at IS NOT NULL
  AND endpoints.owner_id = $1 AND endpoints.revoked_at IS NULL
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.name ILIKE $3 ESCAPE '\'
       OR scans.source ILIKE $3 ESCAPE '\' OR scans.kind ILIKE $3 ESCAPE '\'
       OR scans.id = $4)
  AND (CAST($5 AS text) IS NULL OR scans.fail_reason = $5)
  AND (CAST($6 AS bigint) IS NULL OR scans.dead_lettered_at >= $6)
  AND (CAST($7 AS text) IS NULL OR scans.queue = $7)
  AND (CAST($8 AS text) IS NULL OR scans.cause = $8)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC;

-- dead_letter_lapsed
UPDATE scans SET status = 'FAILED', dead_lettered_at = mf_now(), finished_at = mf_now(),
    updated_at = mf_now(), fail_reason = $1, lease_expires_at = NULL,
    wait_reason = NULL, cause = $2
WHERE id = $3 AND status = 'PENDING';

-- dead_letter_revoked
UPDATE scans SET status = 'FAILED', dead_lettered_at = mf_now(), finished_at = mf_now(),
    updated_at = mf_now(), lease_expires_at = NULL, wait_reason = NULL,
    fail_reason = 'endpoint_revoked', cause = $1
WHERE endpoint_id = $2 AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- dead_letter_total
SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0),
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_causes.dead_letters ELSE 0 END), 0)
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2);

-- dead_letters_by_key
SELECT COALESCE(SUM(dead_letter_counts.dead_letters), 0),
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_counts.dead_letters ELSE 0 END), 0)
FROM dead_letter_counts JOIN endpoints ON endpoints.id = dead_letter_counts.endpoint_id
WHERE endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR dead_letter_counts.cause = $3)
  AND (CAST($4 AS text) IS NULL OR dead_letter_counts.queue = $4)
  AND (CAST($5 AS text) IS NULL OR dead_letter_counts.fail_reason = $5);

-- dead_letters_now
SELECT dead_letter_causes.endpoint_id, SUM(dead_letter_causes.dead_letters)
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = $1
GROUP BY dead_letter_causes.endpoint_id;

-- dead_letters_of_cause
SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0),
       COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                         THEN dead_letter_causes.dead_letters ELSE 0 END), 0)
FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
WHERE endpoints.owner_id = $1 AND dead_letter_causes.cause = $2
  AND (CAST($3 AS text) IS NULL OR endpoints.name = $3);

-- delete_hook
DELETE FROM hooks WHERE id = $1 AND endpoint_id = $2 RETURNING url;

-- delete_owner_tokens
DELETE FROM tokens
WHERE endpoint_id IS NULL AND owner_id = $1 AND role = 'owner'
RETURNING id;

-- delete_session
DELETE FROM board_sessions WHERE session_hash = $1;

-- delete_token
DELETE FROM tokens WHERE id = $1 AND endpoint_id = $2 RETURNING principal, role;

-- delivery_clock
SELECT mf_now();

-- delivery_window_totals
SELECT SUM(delivery_counts.attempts), SUM(delivery_counts.failures)
FROM delivery_counts JOIN endpoints ON endpoints.id = delivery_counts.endpoint_id
WHERE endpoints.owner_id = $1
  AND delivery_counts.minute_us >= $2 AND delivery_counts.minute_us < $3;

-- diagnose_refusal
SELECT status, attempt_count, assignment_id, worker FROM scans
WHERE id = $1 AND endpoint_id = $2;

-- disable_hook
UPDATE hooks SET enabled = FALSE, disabled_reason = $1
WHERE id = $2 AND enabled = TRUE AND consecutive_failures >= $3;

-- due_dead_letters
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NOT NULL
  AND dead_lettered_at <= mf_now() - $1
ORDER BY dead_lettered_at LIMIT $2
FOR UPDATE SKIP LOCKED;

-- due_failed_scans
SELECT id FROM scans
WHERE status = 'FAILED' AND dead_lettered_at IS NULL AND finished_at <= mf_now() - $1
ORDER BY finished_at LIMIT $2
FOR UPDATE SKIP LOCKED;

-- due_finished_scans
SELECT id FROM scans
WHERE status = 'FINISHED' AND finished_at <= mf_now() - $1
ORDER BY finished_at LIMIT $2
FOR UPDATE SKIP LOCKED;

-- enable_hook
UPDATE hooks SET enabled = TRUE, disabled_reason = NULL, consecutive_failures = 0
WHERE id = $1 AND endpoint_id = $2
RETURNING id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason,
          created_at, consecutive_failures, last_delivery_at;

-- end_owner_sessions
UPDATE board_sessions SET expires_at = mf_now()
WHERE expires_at > mf_now() AND owner_id = $1;

-- ended_now
SELECT ended.endpoint_id, ended.outcome, SUM(ended.n) FROM (
    SELECT scan_totals.endpoint_id, scan_totals.outcome, scan_totals.count AS n
    FROM scan_totals JOIN endpoints ON endpoints.id = scan_totals.endpoint_id
    WHERE endpoints.owner_id = $1 AND scan_totals.outcome IN ('finished', 'failed')
    UNION ALL
    SELECT pruned_scans.endpoint_id, pruned_scans.outcome, -pruned_scans.count
    FROM pruned_scans JOIN endpoints ON endpoints.id = pruned_scans.endpoint_id
    WHERE endpoints.owner_id = $1 AND pruned_scans.outcome IN ('finished', 'failed')
) AS ended
GROUP BY ended.endpoint_id, ended.outcome;

-- endpoint_by_id
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE id = $1;

-- endpoint_by_name
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE name = $1;

-- endpoint_name
SELECT name FROM endpoints WHERE id = $1;

-- endpoint_owner
SELECT endpoints.owner_id, owners.name
FROM endpoints JOIN owners ON owners.id = endpoints.owner_id
WHERE endpoints.name = $1;

-- endpoint_tokens
SELECT id, principal, role, created_at, last_used_at FROM tokens
WHERE endpoint_id = $1 ORDER BY id;

-- fail_unleased
UPDATE scans SET status = 'FAILED', fail_reason = 'failed', finished_at = mf_now(),
    updated_at = mf_now(), result = NULL, available_at = NULL
WHERE id = $1 AND status IN ('QUEUED', 'QUARANTINED')
RETURNING id;

-- find_session
SELECT board_sessions.owner_id, owners.name, board_sessions.csrf, board_sessions.expires_at,
       board_sessions.flash, board_sessions.expires_at > mf_now()
FROM board_sessions JOIN owners ON owners.id = board_sessions.owner_id
WHERE board_sessions.session_hash = $1;

-- heartbeat
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
)
UPDATE scans SET updated_at = mf_now(),
    lease_expires_at = CASE WHEN wait_reason IS NULL THEN mf_now() + $2
                            ELSE lease_expires_at END
WHERE id = $3 AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who)
  AND attempt_count = COALESCE(CAST($4 AS integer), 1)
  AND (CAST($5 AS text) IS NULL OR assignment_id = $5)
RETURNING lease_expires_at, endpoint_id;

-- hook_health
SELECT hooks.endpoint_id, hooks.id, hooks.url, hooks.queue, hooks.enabled,
       hooks.disabled_reason, hooks.consecutive_failures, hooks.last_delivery_at
FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
WHERE endpoints.owner_id = $1 ORDER BY hooks.id;

-- hook_targets
SELECT hooks.id, hooks.endpoint_id, hooks.url, hooks.queue, hooks.rate_per_minute,
       hooks.secret,
       CASE WHEN hooks.previous_valid_until > mf_now() THEN hooks.previous_secret END
FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
WHERE hooks.endpoint_id = $1 AND hooks.enabled = TRUE AND endpoints.revoked_at IS NULL
ORDER BY hooks.id;

-- host_writable
SELECT NOT pg_is_in_recovery()
       AND current_setting('default_transaction_read_only') = 'off';

-- insert_attempt
INSERT INTO attempts (scan_id, seq, attempt, assignment_id, worker, leased_at, closed_at,
                      outcome, summary, artifact, settled_status, settled_available_at,
                      settled_fail_reason, next_assignments, result_digest, cause)
VALUES ($1, $2, $3, $4, $5, $6, mf_now(), $7,
        $8, $9, $10, $11,
        $12, $13, $14, $15);

-- insert_audit_entry
INSERT INTO audit (owner_id, at, action, count, origin, endpoint, detail)
VALUES ($1, mf_now(), $2, $3, $4, $5, $6);

-- insert_endpoint
INSERT INTO endpoints (name, owner_id, open_intake, created_at)
VALUES ($1, $2, $3, mf_now())
RETURNING id, name, owner_id, open_intake, revoked_at, created_at;

-- insert_hook
INSERT INTO hooks (endpoint_id, url, queue, rate_per_minute, enabled, secret,
                   consecutive_failures, created_at)
VALUES ($1, $2, $3, $4, TRUE, $5, 0, mf_now())
RETURNING id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason,
          created_at, consecutive_failures, last_delivery_at;

-- insert_owner
INSERT INTO owners (name, created_at) VALUES ($1, mf_now()) RETURNING id;

-- insert_redrive_audit
INSERT INTO audit (owner_id, at, action, count, scan_ids, filter, origin, detail)
VALUES ($1, mf_now(), 'redrive', 0, $2, $3, $4, $5)
RETURNING id;

-- insert_scans
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count,
                   attempt_base, redrive_count, paused_due_at)
SELECT $1, item.queue, item.name, item.version, item.kind, item.payload,
       CAST($2 AS varchar), $3, $4, mf_now(), mf_now(),
       CASE WHEN $2 = 'QUEUED' AND paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN $2 = 'QUEUED' AND paused.queue IS NOT NULL THEN mf_now() END
FROM jsonb_to_recordset(CAST($5 AS jsonb))
    AS item(queue text, name text, version text, kind text, payload text)
LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = $1 AND paused.queue = item.queue
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- insert_session
INSERT INTO board_sessions (session_hash, owner_id, csrf, created_at, expires_at)
VALUES ($1, $2, $3, mf_now(), mf_now() + $4)
RETURNING expires_at;

-- insert_token
INSERT INTO tokens (token_hash, role, owner_id, endpoint_id, principal, created_at)
VALUES ($1, $2, $3, $4, $5, mf_now())
RETURNING id, principal, role, created_at, last_used_at;

-- insert_zero_total
INSERT INTO scan_totals (endpoint_id, outcome, shard, count)
VALUES ($1, $2, $3, 0);

-- lapsed_anywhere
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now()
FROM scans
WHERE status = 'PENDING' AND lease_expires_at < mf_now()
ORDER BY lease_expires_at LIMIT $1
FOR UPDATE SKIP LOCKED;

-- lapsed_of_endpoint
SELECT id, endpoint_id, queue, name, version, kind, verified, source, created_at, worker,
       leased_at, attempt_count, assignment_id, wait_reason, attempt_base, mf_now()
FROM scans
WHERE status = 'PENDING' AND endpoint_id = $1 AND lease_expires_at < mf_now()
ORDER BY lease_expires_at LIMIT $2
FOR UPDATE SKIP LOCKED;

-- lease
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
), due AS (
    SELECT id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND status = 'QUEUED'
      AND available_at <= mf_now()
      AND queue NOT IN (
          SELECT queue FROM paused_queues WHERE endpoint_id = (SELECT endpoint_id FROM who)
      )
      AND (scans.worker IS NULL OR scans.worker <> (SELECT principal FROM who)
           OR scans.available_at <= mf_now() - $2
           OR NOT EXISTS (
               SELECT 1 FROM tokens AS other
               WHERE other.endpoint_id = (SELECT endpoint_id FROM who)
                 AND other.role = 'worker'
                 AND other.principal <> (SELECT principal FROM who)
                 AND other.last_used_at > mf_now() - $3
           ))
    ORDER BY available_at, id LIMIT $4
    FOR UPDATE SKIP LOCKED
)
UPDATE scans SET status = 'PENDING', attempt_count = scans.attempt_count + 1,
    assignment_id = $5 || CAST(scans.id AS text), worker = (SELECT principal FROM who),
    leased_at = mf_now(), lease_expires_at = mf_now() + $6, wait_reason = NULL,
    updated_at = mf_now()
FROM due WHERE scans.id = due.id AND scans.id = ANY(ARRAY(SELECT due.id FROM due))
RETURNING scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
          scans.payload, scans.status, scans.verified, scans.source, scans.worker,
          scans.attempt_count, scans.assignment_id, scans.leased_at,
          scans.lease_expires_at, scans.wait_reason, scans.created_at, scans.updated_at,
          scans.finished_at, scans.dead_lettered_at, scans.fail_reason, scans.result,
          scans.attempt_base, scans.available_at, scans.redriven_at, scans.redrive_count;

-- leases_held
SELECT worker, count(*) FROM scans
WHERE endpoint_id = $1 AND status = 'PENDING'
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
  AND endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.fail_reason = $3)
  AND (CAST($4 AS bigint) IS NULL OR scans.dead_lettered_at >= $4)
  AND (CAST($5 AS text) IS NULL OR scans.queue = $5)
  AND (scans.dead_lettered_at, scans.id) < ($6, $7)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT $8;

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
  AND endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.fail_reason = $3)
  AND (CAST($4 AS bigint) IS NULL OR scans.dead_lettered_at >= $4)
  AND (CAST($5 AS text) IS NULL OR scans.queue = $5)
  AND (scans.dead_lettered_at, scans.id) > ($6, $7)
ORDER BY scans.dead_lettered_at, scans.id
LIMIT $8;

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
WHERE scans.cause = $1 AND scans.dead_lettered_at IS NOT NULL
  AND endpoints.id = scans.endpoint_id
  AND endpoints.owner_id = $2
  AND (CAST($3 AS text) IS NULL OR endpoints.name = $3)
  AND (CAST($4 AS text) IS NULL OR scans.fail_reason = $4)
  AND (CAST($5 AS bigint) IS NULL OR scans.dead_lettered_at >= $5)
  AND (CAST($6 AS text) IS NULL OR scans.queue = $6)
  AND (scans.dead_lettered_at, scans.id) < ($7, $8)
ORDER BY scans.dead_lettered_at DESC, scans.id DESC
LIMIT $9;

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
WHERE scans.cause = $1 AND scans.dead_lettered_at IS NOT NULL
  AND endpoints.id = scans.endpoint_id
  AND endpoints.owner_id = $2
  AND (CAST($3 AS text) IS NULL OR endpoints.name = $3)
  AND (CAST($4 AS text) IS NULL OR scans.fail_reason = $4)
  AND (CAST($5 AS bigint) IS NULL OR scans.dead_lettered_at >= $5)
  AND (CAST($6 AS text) IS NULL OR scans.queue = $6)
  AND (scans.dead_lettered_at, scans.id) > ($7, $8)
ORDER BY scans.dead_lettered_at, scans.id
LIMIT $9;

-- list_hooks
SELECT id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason, created_at,
       consecutive_failures, last_delivery_at
FROM hooks WHERE endpoint_id = $1 ORDER BY id;

-- list_scans
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.status = $3)
  AND (CAST($4 AS text) IS NULL OR scans.queue = $4)
  AND (CAST($5 AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = $5)
  AND (CAST($6 AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = $6)
  AND (CAST($7 AS text) IS NULL OR scans.name ILIKE $7 ESCAPE '\'
       OR scans.source ILIKE $7 ESCAPE '\' OR scans.kind ILIKE $7 ESCAPE '\'
       OR scans.id = $8)
  AND scans.id < $9
ORDER BY scans.id DESC LIMIT $10;

-- list_scans_newer
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
FROM scans CROSS JOIN endpoints
WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = $1
  AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
  AND (CAST($3 AS text) IS NULL OR scans.status = $3)
  AND (CAST($4 AS text) IS NULL OR scans.queue = $4)
  AND (CAST($5 AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = $5)
  AND (CAST($6 AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
      scans.available_at IS NULL OR EXISTS (
          SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
            AND paused_queues.queue = scans.queue
      ))) = $6)
  AND (CAST($7 AS text) IS NULL OR scans.name ILIKE $7 ESCAPE '\'
       OR scans.source ILIKE $7 ESCAPE '\' OR scans.kind ILIKE $7 ESCAPE '\'
       OR scans.id = $8)
  AND scans.id > $9
ORDER BY scans.id LIMIT $10;

-- live_counts
SELECT scans.endpoint_id, 'queued', count(*),
       SUM(CASE WHEN scans.available_at IS NULL THEN 1 ELSE 0 END) FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = $1 AND scans.status = 'QUEUED' GROUP BY scans.endpoint_id
UNION ALL
SELECT scans.endpoint_id, 'pending', count(*), 0 FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = $1 AND scans.status = 'PENDING' GROUP BY scans.endpoint_id
UNION ALL
SELECT scans.endpoint_id, 'quarantined', count(*), 0 FROM scans
JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE endpoints.owner_id = $1 AND scans.status = 'QUARANTINED'
GROUP BY scans.endpoint_id
UNION ALL
SELECT paused_queues.endpoint_id, 'unparked', SUM(held.unparked), 0
FROM endpoints JOIN paused_queues ON paused_queues.endpoint_id = endpoints.id
CROSS JOIN LATERAL (
    SELECT count(*) AS unparked FROM scans
    WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
      AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
) AS held
WHERE endpoints.owner_id = $1
GROUP BY paused_queues.endpoint_id;

-- live_scan
SELECT id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
       worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
       created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
       attempt_base, available_at, redriven_at, redrive_count
FROM scans
WHERE endpoint_id = $1 AND name = $2 AND version = $3 AND kind = $4
  AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- lock_endpoint_for_token
SELECT id FROM endpoints WHERE id = $1 FOR UPDATE;

-- lock_hook_endpoint
SELECT revoked_at FROM endpoints WHERE id = $1 FOR UPDATE;

-- lock_revoked_scans
SELECT id FROM scans
WHERE endpoint_id = $1 AND status IN ('QUARANTINED', 'QUEUED', 'PENDING')
ORDER BY id FOR UPDATE;

-- name_cause
INSERT INTO causes (cause, pattern, first_seen_at, grouping_version)
VALUES ($1, $2, mf_now(), $3)
ON CONFLICT (cause) DO NOTHING;

-- note_hook_delivered
UPDATE hooks SET consecutive_failures = 0, last_delivery_at = mf_now()
WHERE id = $1;

-- note_hook_failed
UPDATE hooks SET consecutive_failures = consecutive_failures + 1 WHERE id = $1;

-- note_pruned_scans
INSERT INTO pruned_scans (endpoint_id, outcome, count) VALUES ($1, $2, $3)
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
WHERE endpoint_id = $1 AND status = 'QUEUED' AND available_at <= mf_now()
  AND queue NOT IN (SELECT queue FROM paused_queues WHERE endpoint_id = $1)
ORDER BY available_at, id LIMIT 1;

-- outcome_totals
SELECT outcome, SUM(count) FROM scan_totals GROUP BY outcome;

-- owned_endpoints
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE owner_id = $1 ORDER BY name;

-- owned_scan
SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
       scans.payload, scans.status, scans.verified, scans.source, scans.worker,
       scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
       scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
       scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
       scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
WHERE scans.id = $1 AND endpoints.owner_id = $2;

-- owner_id
SELECT id FROM owners WHERE name = $1;

-- owner_names
SELECT name FROM owners ORDER BY name LIMIT $1;

-- package_scans
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
), live AS (
    SELECT id, status, worker, assignment_id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND name = $2
      AND version = $3 AND status IN ('QUARANTINED', 'QUEUED', 'PENDING')
), ended AS (
    SELECT id, status, worker, assignment_id FROM scans
    WHERE endpoint_id = (SELECT endpoint_id FROM who) AND name = $2
      AND version = $3 AND status IN ('FINISHED', 'FAILED')
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
    WHERE endpoint_id = $1 AND status = 'QUEUED' AND available_at IS NOT NULL
      AND (available_at, id) > ($2, $3) AND queue = $4
    ORDER BY available_at, id LIMIT $5
)
RETURNING id, paused_due_at;

-- pause_queue
INSERT INTO paused_queues (endpoint_id, queue, paused_at, paused_by)
VALUES ($1, $2, mf_now(), $3)
ON CONFLICT (endpoint_id, queue) DO NOTHING
RETURNING paused_at;

-- paused_queues_of_endpoint
SELECT queue, paused_at, paused_by FROM paused_queues
WHERE endpoint_id = $1 ORDER BY queue;

-- pending_states
SELECT count(*),
       SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count < $1
                THEN 1 ELSE 0 END),
       SUM(CASE WHEN lease_expires_at < mf_now() AND attempt_count >= $1
                THEN 1 ELSE 0 END)
FROM scans WHERE status = 'PENDING';

-- ping
SELECT 1;

-- plan_with_values
SET LOCAL plan_cache_mode = force_custom_plan;

-- promote_from_quarantine
WITH paused AS MATERIALIZED (
    SELECT queue FROM paused_queues
    WHERE (endpoint_id, queue) = (SELECT endpoint_id, queue FROM scans WHERE id = $1)
    FOR KEY SHARE
)
UPDATE scans SET status = 'QUEUED', updated_at = mf_now(),
    available_at = CASE WHEN EXISTS (SELECT 1 FROM paused) THEN NULL ELSE mf_now() END,
    paused_due_at = CASE WHEN EXISTS (SELECT 1 FROM paused) THEN mf_now() END,
    verified = $2, source = COALESCE($3, source)
WHERE id = $1 AND status = 'QUARANTINED'
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- prune_activity
DELETE FROM activity WHERE span = $1 AND at_us < mf_now() - $2;

-- prune_attempts
DELETE FROM attempts WHERE scan_id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
);

-- prune_audit
DELETE FROM audit WHERE id = ANY(ARRAY(
    SELECT id FROM audit WHERE at <= mf_now() - $1 ORDER BY at LIMIT $2
));

-- prune_board_sessions
DELETE FROM board_sessions WHERE session_hash = ANY(ARRAY(
    SELECT session_hash FROM board_sessions
    WHERE expires_at <= mf_now() - $1 ORDER BY expires_at LIMIT $2
));

-- prune_delivery_counts
DELETE FROM delivery_counts WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM delivery_counts
    WHERE minute_us <= mf_now() - $1 - 60000000 ORDER BY minute_us LIMIT $2
));

-- prune_scans
DELETE FROM scans WHERE id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
) RETURNING endpoint_id;

-- quarantined_count
SELECT count(*) FROM scans WHERE status = 'QUARANTINED';

-- queued_states
SELECT queued.total, queued.waiting, queued.parked, held.unparked, held.waiting, mf_now()
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

-- record_delivery_minute
INSERT INTO delivery_counts (endpoint_id, minute_us, attempts, failures)
VALUES ($1, mf_now() - mf_now() % 60000000, $2, $3)
ON CONFLICT (endpoint_id, minute_us) DO UPDATE
SET attempts = delivery_counts.attempts + excluded.attempts,
    failures = delivery_counts.failures + excluded.failures;

-- redrive_candidates
SELECT scans.id, scans.endpoint_id, endpoints.name, scans.queue, scans.name,
       scans.version, scans.kind, scans.verified, scans.source, scans.created_at,
       endpoints.revoked_at, scans.dead_lettered_at
FROM scans CROSS JOIN endpoints
WHERE scans.id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
) AND endpoints.id = scans.endpoint_id AND endpoints.owner_id = $2
ORDER BY scans.id FOR UPDATE OF scans;

-- redrive_live_keys
SELECT dead.id FROM scans AS dead
JOIN scans AS live ON live.endpoint_id = dead.endpoint_id AND live.name = dead.name
    AND live.version = dead.version AND live.kind = dead.kind
    AND live.status IN ('QUARANTINED', 'QUEUED', 'PENDING')
WHERE dead.id IN (
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
);

-- redrive_requeue
WITH paused AS MATERIALIZED (
    SELECT paused_queues.endpoint_id, paused_queues.queue FROM paused_queues
    WHERE paused_queues.endpoint_id = ANY(ARRAY(
        SELECT scans.endpoint_id FROM scans WHERE scans.id IN (
            SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
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
    SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb))
) AND dead_lettered_at IS NOT NULL
RETURNING id, available_at;

-- replayed_jobs
SELECT id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
       worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
       created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
       attempt_base, available_at, redriven_at, redrive_count
FROM scans
WHERE id IN (SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST($1 AS jsonb)))
  AND status = 'PENDING' AND worker = $2 AND lease_expires_at >= mf_now()
ORDER BY id;

-- replayed_result
SELECT attempts.attempt, attempts.closed_at, attempts.settled_status,
       attempts.settled_available_at, attempts.settled_fail_reason,
       attempts.next_assignments, attempts.outcome, attempts.result_digest
FROM attempts JOIN scans ON scans.id = attempts.scan_id
WHERE attempts.scan_id = $1 AND attempts.assignment_id = $2
  AND attempts.worker = $3 AND scans.endpoint_id = $4
  AND attempts.settled_status IS NOT NULL;

-- requeue_lapsed
UPDATE scans SET status = 'QUEUED', available_at = mf_now() + $1,
    updated_at = mf_now(), lease_expires_at = NULL, wait_reason = NULL
WHERE id = $2 AND status = 'PENDING';

-- resume
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
)
UPDATE scans SET updated_at = mf_now(), lease_expires_at = mf_now() + $2,
    wait_reason = NULL
WHERE id = $3 AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who)
  AND attempt_count = COALESCE(CAST($4 AS integer), 1)
  AND (CAST($5 AS text) IS NULL OR assignment_id = $5)
RETURNING lease_expires_at, endpoint_id;

-- resume_queue
DELETE FROM paused_queues WHERE endpoint_id = $1 AND queue = $2 RETURNING 1;

-- revoke_endpoint
UPDATE endpoints SET revoked_at = mf_now() WHERE id = $1;

-- role_defaults
SELECT format('ALTER ROLE CURRENT_USER IN DATABASE %I SET %I = %L',
              current_database(), setting.key, setting.value)
FROM jsonb_each_text(CAST($1 AS jsonb)) AS setting
ORDER BY setting.key;

-- rotate_hook
UPDATE hooks SET previous_secret = secret, previous_valid_until = mf_now() + $1,
    secret = $2
WHERE id = $3 AND endpoint_id = $4
RETURNING previous_valid_until, url;

-- search_dead_letters
WITH matched AS MATERIALIZED (
    SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.dead_lettered_at IS NOT NULL
      AND endpoints.owner_id = $1
      AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
      AND (scans.name ILIKE $3 ESCAPE '\' OR scans.source ILIKE $3 ESCAPE '\'
           OR scans.kind ILIKE $3 ESCAPE '\' OR scans.id = $4)
      AND (CAST($5 AS text) IS NULL OR scans.fail_reason = $5)
      AND (CAST($6 AS bigint) IS NULL OR scans.dead_lettered_at >= $6)
      AND (CAST($7 AS text) IS NULL OR scans.queue = $7)
      AND (CAST($8 AS text) IS NULL OR scans.cause = $8)
      AND (scans.dead_lettered_at, scans.id) < ($9, $10)
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
LIMIT $11;

-- search_dead_letters_newer
WITH matched AS MATERIALIZED (
    SELECT scans.id FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.dead_lettered_at IS NOT NULL
      AND endpoints.owner_id = $1
      AND (CAST($2 AS text) IS NULL OR endpoints.name = $2)
      AND (scans.name ILIKE $3 ESCAPE '\' OR scans.source ILIKE $3 ESCAPE '\'
           OR scans.kind ILIKE $3 ESCAPE '\' OR scans.id = $4)
      AND (CAST($5 AS text) IS NULL OR scans.fail_reason = $5)
      AND (CAST($6 AS bigint) IS NULL OR scans.dead_lettered_at >= $6)
      AND (CAST($7 AS text) IS NULL OR scans.queue = $7)
      AND (CAST($8 AS text) IS NULL OR scans.cause = $8)
      AND (scans.dead_lettered_at, scans.id) > ($9, $10)
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
LIMIT $11;

-- set_audit_requeued
UPDATE audit SET count = $1, detail = $2 WHERE id = $3;

-- set_session_flash
UPDATE board_sessions SET flash = $1
WHERE session_hash = $2 AND expires_at > mf_now();

-- settings_in_force
SELECT name, setting FROM pg_settings
WHERE name IN (SELECT jsonb_object_keys(CAST($1 AS jsonb)));

-- stale_tables
SELECT relname FROM pg_stat_user_tables
WHERE relname IN ('scans', 'attempts')
  AND n_mod_since_analyze >= GREATEST($1, $2 * n_live_tup)
ORDER BY relname;

-- submit_as_source
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'source'
      AND endpoints.revoked_at IS NULL
)
INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified,
                   source, created_at, updated_at, available_at, attempt_count,
                   attempt_base, redrive_count, paused_due_at)
SELECT who.endpoint_id, $2, $3, $4, $5, $6, 'QUEUED', TRUE,
       who.principal, mf_now(), mf_now(),
       CASE WHEN paused.queue IS NULL THEN mf_now() END, 0, 0, 0,
       CASE WHEN paused.queue IS NOT NULL THEN mf_now() END
FROM who LEFT JOIN paused_queues AS paused
    ON paused.endpoint_id = who.endpoint_id AND paused.queue = $2
WHERE TRUE
ON CONFLICT (endpoint_id, name, version, kind)
    WHERE status IN ('QUARANTINED', 'QUEUED', 'PENDING') DO NOTHING
RETURNING id, endpoint_id, queue, name, version, kind, payload, status, verified, source,
          worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
          created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
          attempt_base, available_at, redriven_at, redrive_count;

-- take_session_flash
UPDATE board_sessions SET flash = NULL WHERE session_hash = $1 AND flash = $2;

-- token_named
SELECT id FROM tokens WHERE endpoint_id = $1 AND principal = $2 LIMIT 1;

-- touch_token
UPDATE tokens SET last_used_at = mf_now()
WHERE token_hash = $1
  AND (last_used_at IS NULL OR last_used_at <= mf_now() - $2);

-- unpark_queue
UPDATE scans SET available_at = paused_due_at, paused_due_at = NULL
WHERE id IN (
    SELECT id FROM scans
    WHERE endpoint_id = $1 AND status = 'QUEUED' AND available_at IS NULL
      AND id > $2 AND queue = $3
    ORDER BY available_at, id LIMIT $4
)
RETURNING id, endpoint_id, queue, name, version, kind, verified, source, created_at,
          available_at;

-- wait
WITH who AS (
    SELECT tokens.principal, tokens.endpoint_id
    FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
    WHERE tokens.token_hash = $1 AND tokens.role = 'worker'
      AND endpoints.revoked_at IS NULL
)
UPDATE scans SET updated_at = mf_now(), lease_expires_at = mf_now() + $2,
    wait_reason = $3
WHERE id = $4 AND endpoint_id = (SELECT endpoint_id FROM who) AND status = 'PENDING'
  AND worker = (SELECT principal FROM who)
  AND attempt_count = COALESCE(CAST($5 AS integer), 1)
  AND (CAST($6 AS text) IS NULL OR assignment_id = $6)
RETURNING lease_expires_at, endpoint_id;

-- workers_last_hour
SELECT worker, SUM(finished), SUM(attempt_failures), SUM(lapsed)
FROM activity
WHERE endpoint_id = $1 AND span = 'minute' AND at_us >= mf_now() - 3600000000
GROUP BY worker;
