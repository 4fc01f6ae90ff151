"""Ids are owned (issue 23): a user's ids live in that user's namespace.

- ``deletion_jobs``: a ``deletion_request_id`` is unique per requester, not per tenant, so nobody can use up
  (squat) another user's id; ``tenants.id_secret`` keys the default ids of a ``DELETE`` that names none, so
  nobody else can compute them.
- ``memory_events`` and ``memories``: an idempotency key is unique per user (the events' writer, the memories'
  creator), so one user's key never collides with, blocks or reveals another's.
- ``sessions``: the primary key gains the user; a session's summaries, commits and links carry their session's
  user (filled in from it) and a message's ``sequence_no`` is unique per user's session. Two users can each have
  a session ``s1``; nobody can pre-claim, block or probe another's.

Existing rows keep their ids: what was unique per tenant is unique per user too. Going down needs every id to be
unique per tenant again, which two users' equal ids break; it refuses rather than drop one.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


ID_SECRET_DEFAULT = "replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')"
"""Volatile: each existing tenant gets a secret of its own (244 random bits)."""
SESSION_CHILDREN = {"session_summaries": "version", "session_commits": "commit_id", "session_links": "target, relation"}
"""Each table keyed by its session, and the rest of its primary key."""


def upgrade() -> None:
    op.execute(f"ALTER TABLE tenants ADD COLUMN id_secret text NOT NULL DEFAULT {ID_SECRET_DEFAULT}")
    op.execute(
        """
        ALTER TABLE deletion_jobs DROP CONSTRAINT deletion_jobs_tenant_id_deletion_request_id_key;
        ALTER TABLE deletion_jobs ADD CONSTRAINT deletion_jobs_requester_request_id
            UNIQUE (tenant_id, requested_by, deletion_request_id);
        ALTER TABLE memory_events DROP CONSTRAINT memory_events_tenant_id_idempotency_key_key;
        ALTER TABLE memory_events ADD CONSTRAINT memory_events_user_idempotency_key
            UNIQUE (tenant_id, user_id, idempotency_key);
        DROP INDEX memories_idempotency;
        CREATE UNIQUE INDEX memories_idempotency ON memories (tenant_id, created_by, idempotency_key)
            WHERE idempotency_key IS NOT NULL;

        DROP INDEX memory_events_session_sequence;
        CREATE UNIQUE INDEX memory_events_session_sequence
            ON memory_events (tenant_id, user_id, session_id, sequence_no) WHERE sequence_no IS NOT NULL;
        """
    )
    for table in SESSION_CHILDREN:
        op.execute(f"ALTER TABLE {table} ADD COLUMN user_id text")
        op.execute(
            f"UPDATE {table} AS child SET user_id = s.user_id FROM sessions AS s"
            " WHERE s.tenant_id = child.tenant_id AND s.session_id = child.session_id"
        )
        op.execute(f"ALTER TABLE {table} ALTER COLUMN user_id SET NOT NULL")
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_tenant_id_session_id_fkey")
    op.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_pkey")
    op.execute("ALTER TABLE sessions ADD PRIMARY KEY (tenant_id, user_id, session_id)")
    for table, rest in SESSION_CHILDREN.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        op.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (tenant_id, user_id, session_id, {rest})")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_session_fkey"
                   " FOREIGN KEY (tenant_id, user_id, session_id) REFERENCES sessions (tenant_id, user_id, session_id)")
    op.execute(
        """
        DROP INDEX session_summaries_by_commit;
        CREATE UNIQUE INDEX session_summaries_by_commit ON session_summaries (tenant_id, user_id, session_id, commit_id)
            WHERE commit_id IS NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX session_summaries_by_commit;
        CREATE UNIQUE INDEX session_summaries_by_commit ON session_summaries (tenant_id, session_id, commit_id)
            WHERE commit_id IS NOT NULL;
        """
    )
    for table, rest in SESSION_CHILDREN.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_session_fkey")
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        op.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (tenant_id, session_id, {rest})")
    op.execute("ALTER TABLE sessions DROP CONSTRAINT sessions_pkey")
    op.execute("ALTER TABLE sessions ADD PRIMARY KEY (tenant_id, session_id)")
    for table in SESSION_CHILDREN:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_tenant_id_session_id_fkey"
                   " FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, session_id)")
        op.execute(f"ALTER TABLE {table} DROP COLUMN user_id")
    op.execute(
        """
        DROP INDEX memory_events_session_sequence;
        CREATE UNIQUE INDEX memory_events_session_sequence ON memory_events (tenant_id, session_id, sequence_no)
            WHERE sequence_no IS NOT NULL;
        DROP INDEX memories_idempotency;
        CREATE UNIQUE INDEX memories_idempotency ON memories (tenant_id, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        ALTER TABLE memory_events DROP CONSTRAINT memory_events_user_idempotency_key;
        ALTER TABLE memory_events ADD CONSTRAINT memory_events_tenant_id_idempotency_key_key
            UNIQUE (tenant_id, idempotency_key);
        ALTER TABLE deletion_jobs DROP CONSTRAINT deletion_jobs_requester_request_id;
        ALTER TABLE deletion_jobs ADD CONSTRAINT deletion_jobs_tenant_id_deletion_request_id_key
            UNIQUE (tenant_id, deletion_request_id);
        ALTER TABLE tenants DROP COLUMN id_secret;
        """
    )
