"""The embedded development stack: PostgreSQL, Temporal, worker and API as owned child processes."""
