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
-- A table whose size moved by :moved of what the planner knows (reltuples, which a vacuum
-- keeps too; below 0 before either ran), or whose rows all changed over once since its last
-- analysis: its shape, not its churn (store/engine/planner_statistics.py). The shares are
-- cast: PostgreSQL would infer bigint from the row counts and take 0.2 as 0.
-- (PostgreSQL only: SQLite's plans do not follow statistics.)
SELECT stats.relname FROM pg_stat_user_tables AS stats
JOIN pg_class AS known ON known.oid = stats.relid
WHERE stats.relname IN ('scans', 'attempts')
  AND stats.n_mod_since_analyze >= :at_least
  AND (abs(stats.n_live_tup - GREATEST(known.reltuples, 0))
           >= CAST(:moved AS float8) * GREATEST(known.reltuples, 0)
       OR stats.n_mod_since_analyze >= CAST(:turnover AS float8) * stats.n_live_tup)
ORDER BY stats.relname;

-- name: analyze_scans @postgresql
-- SKIP_LOCKED: when another server process is analysing the table, this one need not.
-- (PostgreSQL only.)
ANALYZE (SKIP_LOCKED) scans;

-- name: analyze_attempts @postgresql
-- (PostgreSQL only.)
ANALYZE (SKIP_LOCKED) attempts;

-- name: queue_dead_rows @postgresql
-- A row when `scans` holds enough dead row versions to vacuum (store/engine/queue_vacuum.py).
-- (PostgreSQL only: SQLite removes an index entry with its row.)
SELECT relname FROM pg_stat_user_tables
WHERE relname = 'scans' AND n_dead_tup >= GREATEST(:at_least, CAST(:share AS float8) * n_live_tup);

-- name: vacuum_scans @postgresql
-- SKIP_LOCKED: when another server process is vacuuming the table, this one need not.
-- (PostgreSQL only.)
VACUUM (SKIP_LOCKED) scans;

-- name: ping
SELECT 1;

-- name: connection_pragmas @sqlite
-- Every SQLite connection, the server's and the CLI's. WAL lets readers run beside the single
-- writer. synchronous=NORMAL skips the fsync per commit: a power loss (not a process crash)
-- may drop the last few commits; see the README. How long a statement waits on a locked file
-- is the driver's `timeout` (store/engine/sqlite.py), not a pragma.
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
PRAGMA foreign_keys=ON;
PRAGMA cache_size=-65536;
PRAGMA temp_store=MEMORY;

-- name: begin_write @sqlite
-- A write takes the write lock up front, so a locked file is waited for here and never turns
-- into a deadlock error when two readers both try to upgrade.
BEGIN IMMEDIATE;

-- name: begin_read @sqlite
BEGIN;

-- name: commit @sqlite
COMMIT;

-- name: rollback @sqlite
ROLLBACK;

-- name: pin_clock @postgresql
-- Tests pin `mf_now()` to a fake clock on every connection (migration 0009 reads it).
SELECT set_config('mainframe.clock_us', :now, false);

-- name: session_settings @postgresql
-- A session that could not send the relied-on settings at start (session pooling) sets them
-- once after connecting, in one round trip.
SELECT set_config(setting.key, setting.value, false)
FROM jsonb_each_text(CAST(:settings AS jsonb)) AS setting;

-- name: no_statement_timeout @postgresql
-- A migration must not be cut short by the role's own statement bound (a long index build);
-- local to its transaction, so it ends with it even behind a pooler.
SELECT set_config('statement_timeout', '0', true);

-- name: function_lock @postgresql
-- One server at a time makes a statement's function (store/engine/pg_functions.py).
-- (PostgreSQL only, as what follows: SQLite keeps no functions and needs none.)
SELECT pg_advisory_xact_lock(hashtext(:function));

-- name: function_arity @postgresql
SELECT pronargs AS arity FROM pg_proc WHERE proname = :function LIMIT 1;

-- name: function_definition @postgresql
-- The function of a statement ({statement}), returning its rows as they are ({columns}: each
-- column's name and type); PL/pgSQL keeps the statement's plan per server connection, and
-- RETURN QUERY hands the rows straight to the call, with no cursor and no row by row loop.
-- A name a statement shares with a column of the result means the statement's column.
CREATE FUNCTION {function}({types}) RETURNS TABLE ({columns}) LANGUAGE plpgsql AS $mf$
#variable_conflict use_column
BEGIN
    RETURN QUERY {statement};
END $mf$;

-- name: function_type_names @postgresql
-- Types by oid (a statement's parameters, its result's columns, from its description),
-- spelled as a function's definition takes them.
SELECT CAST(COALESCE(array_agg(format_type(u.oid, NULL) ORDER BY u.n), '{}') AS text[]) AS types
FROM unnest(CAST(:oids AS oid[])) WITH ORDINALITY AS u(oid, n);

-- name: function_call @postgresql
SELECT * FROM {function}({placeholders});

-- name: prepared_names @postgresql
-- Whether a statement prepared under :name is on this server connection by that name: a
-- pooler that keeps prepared statements (PgBouncer 1.21 and later) prepares it under a name
-- of its own (postgres.py, PostgresDatabase._pooler_keeps_prepared).
-- (PostgreSQL only: SQLite keeps no prepared statements between connections.)
SELECT count(*) AS found FROM pg_prepared_statements WHERE name = :name;

-- name: deallocate @postgresql
-- A statement prepared on this server connection by name ({name}: the store's own, letters,
-- digits and underscores), no longer wanted.
-- (PostgreSQL only.)
DEALLOCATE {name};
