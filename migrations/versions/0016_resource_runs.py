"""Runs and per-agent resource policies (seed 000 §3.1).

- ``resource_policies``: what an admin lets one agent of the tenant do with one resource type: operations
  and field paths (JSON Pointers). No row: the agent may not use the type at all.
- ``resource_runs``: one run a trusted runtime registered for an agent, reading for the runtime key's user,
  with the authorization snapshot frozen when it started (resource → operations, fields). Every read of the
  run intersects that snapshot with the current policy, so a grant added later never widens a started run.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("resource_policies", "resource_runs")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE resource_policies (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            agent_id text NOT NULL,
            resource text NOT NULL,
            operations text[] NOT NULL,
            fields text[] NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            updated_by text NOT NULL,
            PRIMARY KEY (tenant_id, agent_id, resource)
        );

        CREATE TABLE resource_runs (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            run_id uuid NOT NULL,
            user_id text NOT NULL,
            agent_id text NOT NULL,
            thread_id text NOT NULL,
            snapshot jsonb NOT NULL,
            registered_by text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            ended_at timestamptz,
            PRIMARY KEY (tenant_id, run_id)
        );
        CREATE INDEX resource_runs_by_thread ON resource_runs (tenant_id, user_id, thread_id, started_at);
        """
    )
    for table in TABLES:
        isolate_by_tenant(table)


def downgrade() -> None:
    op.execute("DROP TABLE resource_runs, resource_policies")
