-- Hooks: their targets and encrypted secrets, and the delivery counts.
-- Loaded by name (store/engine/statements.py): `:name` parameters, `mf_now()` the
-- deployment's clock in microseconds.

-- name: record_delivery_minute
-- One statement: a bump then an insert would race on PostgreSQL, where two attempts opening a
-- minute at once both find no row and the second insert fails on the primary key.
INSERT INTO delivery_counts (endpoint_id, minute_us, attempts, failures)
VALUES (:endpoint, mf_now() - mf_now() % 60000000, :attempts, :failures)
ON CONFLICT (endpoint_id, minute_us) DO UPDATE
SET attempts = delivery_counts.attempts + excluded.attempts,
    failures = delivery_counts.failures + excluded.failures;

-- name: delivery_window_totals
SELECT SUM(delivery_counts.attempts) AS attempts, SUM(delivery_counts.failures) AS failures
FROM delivery_counts JOIN endpoints ON endpoints.id = delivery_counts.endpoint_id
WHERE endpoints.owner_id = :owner
  AND delivery_counts.minute_us >= :start AND delivery_counts.minute_us < :end;

-- name: delivery_clock
SELECT mf_now();

-- name: lock_hook_endpoint @sqlite
-- Whether the endpoint is revoked, read under a lock of its row on PostgreSQL: two creations
-- at once then count each other's hooks (the cap holds), and a revocation cannot slip between
-- the check and the insert. SQLite's BEGIN IMMEDIATE already admits one writer at a time.
SELECT revoked_at FROM endpoints WHERE id = :endpoint;

-- name: lock_hook_endpoint @postgresql
SELECT revoked_at FROM endpoints WHERE id = :endpoint FOR UPDATE;

-- name: count_hooks
SELECT count(*) AS hooks FROM hooks WHERE endpoint_id = :endpoint;

-- name: insert_hook
INSERT INTO hooks (endpoint_id, url, queue, rate_per_minute, enabled, secret,
                   consecutive_failures, created_at)
VALUES (:endpoint, :url, :queue, :rate, TRUE, :secret, 0, mf_now())
RETURNING id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason,
          created_at, consecutive_failures, last_delivery_at;

-- name: list_hooks
SELECT id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason, created_at,
       consecutive_failures, last_delivery_at
FROM hooks WHERE endpoint_id = :endpoint ORDER BY id;

-- name: delete_hook
DELETE FROM hooks WHERE id = :hook AND endpoint_id = :endpoint RETURNING url;

-- name: rotate_hook
-- The old token moves as it is: rotating never needs to read the old secret, so a hook whose
-- secret no key can open is rotated like any other (its unreadable token never co-signs).
UPDATE hooks SET previous_secret = secret, previous_valid_until = mf_now() + :grace,
    secret = :secret
WHERE id = :hook AND endpoint_id = :endpoint
RETURNING previous_valid_until, url;

-- name: enable_hook
UPDATE hooks SET enabled = TRUE, disabled_reason = NULL, consecutive_failures = 0
WHERE id = :hook AND endpoint_id = :endpoint
RETURNING id, endpoint_id, url, queue, rate_per_minute, enabled, disabled_reason,
          created_at, consecutive_failures, last_delivery_at;

-- name: hook_targets
-- The dispatcher's read (ix_hooks_endpoint). The previous secret comes back only while its
-- rotation grace lasts by the database's clock, so every process stops co-signing together.
SELECT hooks.id, hooks.endpoint_id, hooks.url, hooks.queue, hooks.rate_per_minute,
       hooks.secret,
       CASE WHEN hooks.previous_valid_until > mf_now() THEN hooks.previous_secret END
         AS previous_secret
FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
WHERE hooks.endpoint_id = :endpoint AND hooks.enabled = TRUE AND endpoints.revoked_at IS NULL
ORDER BY hooks.id;

-- name: note_hook_delivered
UPDATE hooks SET consecutive_failures = 0, last_delivery_at = mf_now()
WHERE id = :hook;

-- name: note_hook_failed
UPDATE hooks SET consecutive_failures = consecutive_failures + 1 WHERE id = :hook;

-- name: disable_hook
-- Changes a row only when the hook is still enabled, so exactly one caller learns that it
-- disabled the hook (and counts it).
UPDATE hooks SET enabled = FALSE, disabled_reason = :reason
WHERE id = :hook AND enabled = TRUE AND consecutive_failures >= :at_least;
