"""Console sessions: a person signed in to /console/ with an API key.

Only the sha256 of the random session id is stored (the cookie holds the id), beside the key's id (never its
secret: every request judges the key again by its row), the CSRF token of the session's forms, and when it
was created and last used (the idle timeout). A global table like ``api_keys``: a session is looked up
before its tenant is known. Deleting a key deletes its sessions.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

from migrations.rls import APP_ROLE

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE console_sessions (
            session_sha256 text PRIMARY KEY CHECK (session_sha256 ~ '^[0-9a-f]{{64}}$'),
            key_id text NOT NULL REFERENCES api_keys (key_id) ON DELETE CASCADE,
            csrf_token text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX console_sessions_key_id ON console_sessions (key_id);
        GRANT SELECT, INSERT, UPDATE, DELETE ON console_sessions TO {APP_ROLE};
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE console_sessions")
