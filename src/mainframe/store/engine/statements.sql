-- The engine's own statements: the readiness ping and the planner statistics.
-- Loaded by name (store/engine/statements.py): `:name` parameters, `mf_now()` the
-- deployment's clock in microseconds.

-- name: settings_in_force @postgresql
-- The relied-on settings as this session has them.
-- (PostgreSQL only: SQLite has no session settings.)
SELECT name, setting FROM pg_settings
WHERE name IN (SELECT jsonb_object_keys(CAST(:names AS jsonb)));

-- name: host_writable @postgresql
-- Whether this host takes writes: a standby is in recovery; a primary may be set read-only.
-- (PostgreSQL only: a SQLite file is writable or the server does not start.)
SELECT NOT pg_is_in_recovery()
       AND current_setting('default_transaction_read_only') = 'off';

-- name: role_defaults @postgresql
-- The statements that make the settings the role's defaults in this database, built by the
-- database itself so names and values are quoted as it quotes them (run by db upgrade).
-- (PostgreSQL only: SQLite has no roles.)
SELECT format('ALTER ROLE CURRENT_USER IN DATABASE %I SET %I = %L',
              current_database(), setting.key, setting.value)
FROM jsonb_each_text(CAST(:settings AS jsonb)) AS setting
ORDER BY setting.key;

-- name: stale_tables @postgresql
-- (PostgreSQL only: SQLite's plans do not follow statistics.)
SELECT relname FROM pg_stat_user_tables
WHERE relname IN ('scans', 'attempts')
  AND n_mod_since_analyze >= GREATEST(:at_least, :share * n_live_tup)
ORDER BY relname;

-- name: analyze_scans @postgresql
-- SKIP_LOCKED: when another server process is analysing the table, this one need not.
-- (PostgreSQL only.)
ANALYZE (SKIP_LOCKED) scans;

-- name: analyze_attempts @postgresql
-- (PostgreSQL only.)
ANALYZE (SKIP_LOCKED) attempts;

-- name: ping
SELECT 1;
