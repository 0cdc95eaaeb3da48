-- The statements of what a dragonfly deployment's loader and bot ask for (store/dragonfly/),
-- every one scoped to the caller's endpoint. Scans are found by key through the two partial
-- indexes over it (ux_scans_live_key for live scans, ix_scans_ended_key for ended ones,
-- migration 0011), each branch with its literal statuses so both planners prove the index.

-- fragment: package_columns
scans.id, scans.name, scans.version, scans.status, scans.payload, scans.result,
scans.created_at, scans.source, scans.leased_at, scans.worker, scans.attempt_count,
scans.finished_at, scans.dead_lettered_at,
reports.reported_at, reports.reported_by, reports.summary AS report_summary

-- name: known_packages @sqlite
-- Which of a batch's (name, version) pairs (a JSON array of {name, version}) the endpoint
-- already holds a scan of, in any status.
SELECT item.value ->> '$.name' AS name, item.value ->> '$.version' AS version
FROM json_each(:items) AS item
WHERE EXISTS (
    SELECT 1 FROM scans WHERE scans.endpoint_id = :endpoint
      AND scans.name = item.value ->> '$.name' AND scans.version = item.value ->> '$.version'
      AND scans.status IN ('QUARANTINED', 'QUEUED', 'PENDING')
) OR EXISTS (
    SELECT 1 FROM scans WHERE scans.endpoint_id = :endpoint
      AND scans.name = item.value ->> '$.name' AND scans.version = item.value ->> '$.version'
      AND scans.status IN ('FINISHED', 'FAILED')
);

-- name: known_packages @postgresql
SELECT item.name, item.version
FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS item(name text, version text)
WHERE EXISTS (
    SELECT 1 FROM scans WHERE scans.endpoint_id = :endpoint
      AND scans.name = item.name AND scans.version = item.version
      AND scans.status IN ('QUARANTINED', 'QUEUED', 'PENDING')
) OR EXISTS (
    SELECT 1 FROM scans WHERE scans.endpoint_id = :endpoint
      AND scans.name = item.name AND scans.version = item.version
      AND scans.status IN ('FINISHED', 'FAILED')
);

-- name: packages_of_name
-- Every scan of a name (and version, unless NULL), newest queued first, with its report.
SELECT
    -- include: package_columns
FROM (
    SELECT * FROM scans WHERE endpoint_id = :endpoint AND name = :name
      AND (CAST(:version AS text) IS NULL OR version = :version)
      AND status IN ('QUARANTINED', 'QUEUED', 'PENDING')
    UNION ALL
    SELECT * FROM scans WHERE endpoint_id = :endpoint AND name = :name
      AND (CAST(:version AS text) IS NULL OR version = :version)
      AND status IN ('FINISHED', 'FAILED')
) AS scans
LEFT JOIN dragonfly_reports AS reports
    ON reports.endpoint_id = :endpoint AND reports.name = scans.name
   AND reports.version = scans.version
ORDER BY scans.created_at DESC, scans.id DESC
LIMIT :limit OFFSET :offset;

-- name: count_packages_of_name
SELECT count(*) FROM (
    SELECT id FROM scans WHERE endpoint_id = :endpoint AND name = :name
      AND (CAST(:version AS text) IS NULL OR version = :version)
      AND status IN ('QUARANTINED', 'QUEUED', 'PENDING')
    UNION ALL
    SELECT id FROM scans WHERE endpoint_id = :endpoint AND name = :name
      AND (CAST(:version AS text) IS NULL OR version = :version)
      AND status IN ('FINISHED', 'FAILED')
) AS found;

-- name: packages_finished_since
-- The scans that finished at or after :since (of one name, unless NULL), newest queued
-- first: ix_scans_finished_at from :since on.
SELECT
    -- include: package_columns
FROM scans
LEFT JOIN dragonfly_reports AS reports
    ON reports.endpoint_id = :endpoint AND reports.name = scans.name
   AND reports.version = scans.version
WHERE scans.status = 'FINISHED' AND scans.finished_at >= :since
  AND scans.endpoint_id = :endpoint
  AND (CAST(:name AS text) IS NULL OR scans.name = :name)
ORDER BY scans.created_at DESC, scans.id DESC
LIMIT :limit OFFSET :offset;

-- name: count_packages_finished_since
SELECT count(*) FROM scans
WHERE status = 'FINISHED' AND finished_at >= :since AND endpoint_id = :endpoint
  AND (CAST(:name AS text) IS NULL OR name = :name);

-- name: reported_packages
-- The endpoint's reports, newest first (ix_dragonfly_reports_recent), each with the scan it
-- reported while that scan is kept.
SELECT reports.name AS report_name, reports.version AS report_version,
       reports.scan_id AS report_scan,
    -- include: package_columns
FROM dragonfly_reports AS reports
LEFT JOIN scans ON scans.id = reports.scan_id
WHERE reports.endpoint_id = :endpoint AND reports.reported_at >= :since
  AND (CAST(:name AS text) IS NULL OR reports.name = :name)
ORDER BY reports.reported_at DESC, reports.name DESC
LIMIT :limit OFFSET :offset;

-- name: count_reported_packages
SELECT count(*) FROM dragonfly_reports
WHERE endpoint_id = :endpoint AND reported_at >= :since
  AND (CAST(:name AS text) IS NULL OR name = :name);

-- name: report_of_name
SELECT version, reported_at FROM dragonfly_reports
WHERE endpoint_id = :endpoint AND name = :name;

-- name: insert_report
-- A second report of the name (of any version) inserts nothing: at most one per name.
INSERT INTO dragonfly_reports (endpoint_id, name, version, scan_id, reported_at, reported_by,
                               summary, inspector_url)
VALUES (:endpoint, :name, :version, :scan, mf_now(), :by, :summary, :inspector_url)
ON CONFLICT (endpoint_id, name) DO NOTHING
RETURNING reported_at;

-- name: queue_status
-- The endpoint's live scans by state, as lifecycle.rules.queue_state judges them, with the
-- oldest backlog's submission time: one walk of ux_scans_live_key's endpoint prefix.
SELECT
    SUM(CASE WHEN status = 'QUEUED' AND (available_at IS NULL OR available_at <= mf_now())
             THEN 1 ELSE 0 END) AS queued,
    SUM(CASE WHEN status = 'QUEUED' AND available_at > mf_now() THEN 1 ELSE 0 END) AS waiting,
    SUM(CASE WHEN status = 'PENDING' AND lease_expires_at >= mf_now()
             THEN 1 ELSE 0 END) AS in_progress,
    SUM(CASE WHEN status = 'PENDING' AND lease_expires_at < mf_now()
             AND attempt_count < :max_attempts THEN 1 ELSE 0 END) AS lapsed,
    SUM(CASE WHEN status = 'PENDING' AND lease_expires_at < mf_now()
             AND attempt_count >= :max_attempts THEN 1 ELSE 0 END) AS exhausted,
    SUM(CASE WHEN status = 'PENDING' AND lease_expires_at IS NULL
             THEN 1 ELSE 0 END) AS stranded,
    MIN(CASE WHEN status = 'QUEUED'
             OR (status = 'PENDING' AND lease_expires_at < mf_now()
                 AND attempt_count < :max_attempts)
             THEN created_at END) AS oldest_queued_at,
    mf_now() AS now
FROM scans
WHERE endpoint_id = :endpoint AND status IN ('QUARANTINED', 'QUEUED', 'PENDING');

-- name: alerting_of
SELECT threshold, updated_at, updated_by FROM dragonfly_alerting WHERE endpoint_id = :endpoint;

-- name: set_alerting
INSERT INTO dragonfly_alerting (endpoint_id, threshold, updated_at, updated_by)
VALUES (:endpoint, :threshold, mf_now(), :by)
ON CONFLICT (endpoint_id) DO UPDATE SET threshold = excluded.threshold,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING threshold, updated_at, updated_by;

-- fragment: suppression_columns
id, name, version, rules, created_at, created_by, updated_at, updated_by

-- name: suppressions_of_name
SELECT
    -- include: suppression_columns
FROM dragonfly_suppressions WHERE endpoint_id = :endpoint AND name = :name
ORDER BY version, created_at, id;

-- name: insert_suppression
INSERT INTO dragonfly_suppressions (id, endpoint_id, name, version, rules, created_at,
                                    created_by, updated_at, updated_by)
VALUES (:id, :endpoint, :name, :version, :rules, mf_now(), :by, mf_now(), :by)
RETURNING
    -- include: suppression_columns
;

-- name: suppression
SELECT
    -- include: suppression_columns
FROM dragonfly_suppressions
WHERE id = :id AND endpoint_id = :endpoint AND name = :name AND version = :version;

-- name: update_suppression
UPDATE dragonfly_suppressions SET rules = :rules, updated_at = mf_now(), updated_by = :by
WHERE id = :id AND endpoint_id = :endpoint AND name = :name AND version = :version
RETURNING
    -- include: suppression_columns
;

-- name: delete_suppression
DELETE FROM dragonfly_suppressions
WHERE id = :id AND endpoint_id = :endpoint AND name = :name AND version = :version
RETURNING id;

-- name: delete_version_suppressions
DELETE FROM dragonfly_suppressions
WHERE endpoint_id = :endpoint AND name = :name AND version = :version
RETURNING id;
