"""Task schedules (issue 26, item 5): a tenant's named schedules, each starting a task of a type on a cron.

``task_schedules`` is the registry: a firing starts a task only while its row exists and is not paused; Temporal's
Schedule (id ``task-schedule-{tenant}-{name}``) holds the timer. The last firing's outcome is kept on the row.

Revision ID: 0029
Revises: 0028
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE task_schedules (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            name text NOT NULL,
            owner_user_id text NOT NULL,
            task_type text NOT NULL,
            goal jsonb NOT NULL,
            cron text NOT NULL,
            timezone text NOT NULL,
            paused boolean NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            last_fired_at timestamptz,
            last_task_id text,
            last_error jsonb,
            PRIMARY KEY (tenant_id, name)
        )
        """
    )
    isolate_by_tenant("task_schedules")


def downgrade() -> None:
    op.execute("DROP TABLE task_schedules")
