"""Ids are owned (issue 23): a user's ids live in that user's namespace.

- ``deletion_jobs``: a ``deletion_request_id`` is unique per requester, not per tenant, so nobody can use up
  (squat) another user's id; ``tenants.id_secret`` keys the default ids of a ``DELETE`` that names none, so
  nobody else can compute them.
- ``memory_events`` and ``memories``: an idempotency key is unique per user (the events' writer, the memories'
  creator), so one user's key never collides with, blocks or reveals another's.

Existing rows keep their ids: what was unique per tenant is unique per user too. Going down needs every id to be
unique per tenant again, which two users' equal ids break; it refuses rather than drop one.

Revision ID: 0023
Revises: 0021
"""

from alembic import op

revision = "0023"
down_revision = "0021"
branch_labels = None
depends_on = None


ID_SECRET_DEFAULT = "replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')"
"""Volatile: each existing tenant gets a secret of its own (244 random bits)."""


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
        """
    )


def downgrade() -> None:
    op.execute(
        """
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
