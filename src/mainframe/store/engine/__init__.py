"""The engine: the transaction interface over SQLite and PostgreSQL, the schema and its
migrations."""
