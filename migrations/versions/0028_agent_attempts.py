"""Agent-performed steps (issue 26, item 2): an attempt holds a lease, and a step can wait for an agent.

``task_attempts`` gains the lease an agent's claim holds (``lease_expires_at``, on the database clock, and the
``lease_seconds`` a heartbeat renews it by), the digest of the body that ended it (``completion_digest``: the same
body again is a replay) and who claimed it (``actor``); an attempt whose lease ran out is ``LEASE_EXPIRED``.
``task_steps`` gains what the step was opened with (``input_extra``, e.g. a reviewer's reason) and the statuses
of a step performed outside the worker: ``WAITING`` (open for an agent) and ``GAVE_UP`` (its agent gave up).

Revision ID: 0028
Revises: 0027
"""

from alembic import op

from migrations.rls import per_tenant

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def _statuses(table: str, statuses: str) -> None:
    op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_status_check")
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_status_check CHECK (status IN ({statuses}))")


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE task_attempts
            ADD COLUMN lease_expires_at timestamptz,
            ADD COLUMN lease_seconds integer CHECK (lease_seconds BETWEEN 1 AND 86400),
            ADD COLUMN completion_digest text,
            ADD COLUMN actor text;
        ALTER TABLE task_steps ADD COLUMN input_extra jsonb;
        CREATE INDEX task_attempts_running ON task_attempts (tenant_id, task_id, step_id, input_version)
            WHERE status = 'RUNNING';
        """
    )
    _statuses("task_attempts", "'RUNNING', 'SUCCEEDED', 'FAILED', 'ABANDONED', 'LEASE_EXPIRED'")
    _statuses("task_steps", "'RUNNING', 'SUCCEEDED', 'FAILED', 'WAITING', 'GAVE_UP'")


def downgrade() -> None:
    per_tenant("UPDATE task_attempts SET status = 'ABANDONED' WHERE tenant_id = :t AND status = 'LEASE_EXPIRED'")
    per_tenant("UPDATE task_steps SET status = CASE status WHEN 'WAITING' THEN 'RUNNING' ELSE 'FAILED' END "
               "WHERE tenant_id = :t AND status IN ('WAITING', 'GAVE_UP')")
    _statuses("task_attempts", "'RUNNING', 'SUCCEEDED', 'FAILED', 'ABANDONED'")
    _statuses("task_steps", "'RUNNING', 'SUCCEEDED', 'FAILED'")
    op.execute(
        """
        DROP INDEX task_attempts_running;
        ALTER TABLE task_steps DROP COLUMN input_extra;
        ALTER TABLE task_attempts DROP COLUMN lease_expires_at, DROP COLUMN lease_seconds,
            DROP COLUMN completion_digest, DROP COLUMN actor;
        """
    )
