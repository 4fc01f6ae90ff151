"""Verification rounds' budget (issue 23, finding 7): per tenant, the seconds of residue scans it may still take.

One round verifies every deletion of the tenant whose purge is done (:mod:`memory.deletion.rounds`); the tenant's
rounds take their measured time from a bucket of seconds refilled at a share of one core, so a flood of deletions is
verified in fewer, larger rounds instead of one full scan of the tenant per deletion. A layer status ``purged``
marks a job's verification as waiting for the next round.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

from migrations.rls import isolate_by_tenant, per_tenant

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE residue_rounds (
            tenant_id text PRIMARY KEY,
            tokens double precision NOT NULL,
            updated_at timestamptz NOT NULL,
            last_seconds double precision NOT NULL CHECK (last_seconds >= 0),
            last_jobs integer NOT NULL CHECK (last_jobs >= 1),
            rounds bigint NOT NULL CHECK (rounds >= 1)
        )
        """
    )
    isolate_by_tenant("residue_rounds")
    # A layer status of its own for a job whose purge is done and whose verification waits for a round.
    op.execute("ALTER TABLE deletion_layers DROP CONSTRAINT deletion_layers_status_check")
    op.execute("ALTER TABLE deletion_layers ADD CONSTRAINT deletion_layers_status_check "
               "CHECK (status IN ('pending', 'running', 'purged', 'done', 'failed'))")


def downgrade() -> None:
    per_tenant("UPDATE deletion_layers SET status = 'pending' WHERE status = 'purged' AND tenant_id = :t")
    op.execute("ALTER TABLE deletion_layers DROP CONSTRAINT deletion_layers_status_check")
    op.execute("ALTER TABLE deletion_layers ADD CONSTRAINT deletion_layers_status_check "
               "CHECK (status IN ('pending', 'running', 'done', 'failed'))")
    op.execute("DROP TABLE residue_rounds")
