-- Accounts and credentials: owners, endpoints and their outcome totals, tokens, board sessions,
-- the audit trail.
-- Loaded by name (store/engine/statements.py): `:name` parameters, `mf_now()` the
-- deployment's clock in microseconds.

-- name: insert_redrive_audit
INSERT INTO audit (owner_id, at, action, count, scan_ids, filter, origin, detail)
VALUES (:owner, mf_now(), 'redrive', 0, :scan_ids, :filter, :origin, :detail)
RETURNING id;

-- name: insert_audit_entry
INSERT INTO audit (owner_id, at, action, count, origin, endpoint, detail)
VALUES (:owner, mf_now(), :action, :count, :origin, :endpoint, :detail);

-- name: set_audit_requeued
-- A redrive's row as its chunks so far requeued: how many, and the ids it names.
UPDATE audit SET count = :count, detail = :detail WHERE id = :audit;

-- name: audit_entries
-- A walk of ix_audit_owner (owner_id, id) backwards from the keyset :before.
SELECT id, at, action, count, scan_ids, filter, origin, endpoint, detail FROM audit
WHERE owner_id = :owner AND id < :before
ORDER BY id DESC LIMIT :limit;

-- name: authenticate
-- One probe of the unique token_hash index and the endpoint's primary key.
SELECT tokens.role, tokens.principal, tokens.owner_id, tokens.endpoint_id,
       endpoints.name AS endpoint, endpoints.revoked_at, tokens.id AS token_id
FROM tokens LEFT JOIN endpoints ON endpoints.id = tokens.endpoint_id
WHERE tokens.token_hash = :digest;

-- name: touch_token
UPDATE tokens SET last_used_at = mf_now()
WHERE token_hash = :digest
  AND (last_used_at IS NULL OR last_used_at <= mf_now() - :coarse);

-- name: touch_submitted
-- A source's last accepted submission (store/accounts/submissions.py): one probe of the unique
-- token_hash, written only once the last value is older than :coarse.
UPDATE tokens SET last_submitted_at = mf_now()
WHERE token_hash = :digest AND role = 'source'
  AND (last_submitted_at IS NULL OR last_submitted_at <= mf_now() - :coarse);

-- name: source_submissions
-- Every source credential of a live endpoint with its last accepted submission, and the
-- database's now to judge it by (the metrics' reconciliation, `mainframe stats`). Credentials
-- are what owners issued, a few hundred at most: read whole, as the paused queues are.
SELECT endpoints.name AS endpoint, tokens.principal AS source, tokens.last_submitted_at,
       mf_now() AS now
FROM tokens JOIN endpoints ON endpoints.id = tokens.endpoint_id
WHERE tokens.role = 'source' AND endpoints.revoked_at IS NULL
ORDER BY endpoints.name, tokens.principal;

-- name: endpoint_source_submissions
-- One endpoint's source credentials with their last accepted submission (its board page).
SELECT principal AS source, last_submitted_at, mf_now() AS now FROM tokens
WHERE endpoint_id = :endpoint AND role = 'source'
ORDER BY principal;

-- name: endpoint_name
SELECT name FROM endpoints WHERE id = :endpoint;

-- name: owner_id
SELECT id FROM owners WHERE name = :name;

-- name: any_owner
SELECT id FROM owners LIMIT 1;

-- name: insert_owner
INSERT INTO owners (name, created_at) VALUES (:name, mf_now()) RETURNING id;

-- name: endpoint_by_name
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE name = :name;

-- name: endpoint_by_id
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE id = :endpoint;

-- name: owned_endpoints
SELECT id, name, owner_id, open_intake, revoked_at, created_at
FROM endpoints WHERE owner_id = :owner ORDER BY name;

-- name: insert_endpoint
INSERT INTO endpoints (name, owner_id, open_intake, created_at)
VALUES (:name, :owner, :open_intake, mf_now())
RETURNING id, name, owner_id, open_intake, revoked_at, created_at;

-- name: insert_token
INSERT INTO tokens (token_hash, role, owner_id, endpoint_id, principal, created_at)
VALUES (:digest, :role, :owner, :endpoint, :principal, mf_now())
RETURNING id, principal, role, created_at, last_used_at;

-- name: endpoint_tokens
SELECT id, principal, role, created_at, last_used_at FROM tokens
WHERE endpoint_id = :endpoint ORDER BY id;

-- name: delete_token
DELETE FROM tokens WHERE id = :token AND endpoint_id = :endpoint RETURNING principal, role;

-- name: lock_endpoint_for_token @sqlite
-- Two credentials issued at once under one name would both find none taken on PostgreSQL;
-- the endpoint's row lock makes the second wait for the first (SQLite has one writer).
SELECT id FROM endpoints WHERE id = :endpoint;

-- name: lock_endpoint_for_token @postgresql
SELECT id FROM endpoints WHERE id = :endpoint FOR UPDATE;

-- name: delete_owner_tokens
-- An owner's own tokens have no endpoint: they sit under NULL in the endpoint index.
DELETE FROM tokens
WHERE endpoint_id IS NULL AND owner_id = :owner AND role = 'owner'
RETURNING id;

-- name: end_owner_sessions
-- A rotated token may have signed a browser in: its live sessions end with it, through the
-- expiry index (the sign-in page then says the session ended).
UPDATE board_sessions SET expires_at = mf_now()
WHERE expires_at > mf_now() AND owner_id = :owner;

-- name: owner_names
-- Up to two names: enough to tell "the only owner" from "several".
SELECT name FROM owners ORDER BY name LIMIT :limit;

-- name: token_named
SELECT id FROM tokens WHERE endpoint_id = :endpoint AND principal = :principal LIMIT 1;

-- name: insert_session
INSERT INTO board_sessions (session_hash, owner_id, csrf, created_at, expires_at)
VALUES (:session, :owner, :csrf, mf_now(), mf_now() + :lifetime)
RETURNING expires_at;

-- name: find_session
-- Ended sessions too (`live` false): the sign-in page says why the operator is there.
SELECT board_sessions.owner_id, owners.name AS owner, board_sessions.csrf,
       board_sessions.expires_at, board_sessions.flash, board_sessions.expires_at > mf_now() AS live
FROM board_sessions JOIN owners ON owners.id = board_sessions.owner_id
WHERE board_sessions.session_hash = :session;

-- name: delete_session
DELETE FROM board_sessions WHERE session_hash = :session;

-- name: set_session_flash
UPDATE board_sessions SET flash = :flash
WHERE session_hash = :session AND expires_at > mf_now();

-- name: take_session_flash
-- Clears the flash only if it is still the one read: whoever clears it is the one to show it.
UPDATE board_sessions SET flash = NULL WHERE session_hash = :session AND flash = :flash;

-- name: insert_zero_total
INSERT INTO scan_totals (endpoint_id, outcome, shard, count)
VALUES (:endpoint, :outcome, :shard, 0);

-- name: outcome_totals
SELECT outcome, SUM(count) AS total FROM scan_totals GROUP BY outcome;
