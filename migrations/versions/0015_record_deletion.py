"""Deleting one source record: ``record`` is a deletion scope and a tombstone type.

``DELETE /records/{resource}/{record_id}`` writes a job of scope ``record`` and a tombstone of type ``record``
whose target is ``resource:record_id`` (what :func:`memory.resources.records.not_forgotten` reads).

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _checks(types: str, *, valid: bool = True) -> None:
    suffix = "" if valid else " NOT VALID"
    op.execute(
        f"""
        ALTER TABLE deletion_jobs DROP CONSTRAINT deletion_jobs_scope_type_check,
            ADD CONSTRAINT deletion_jobs_scope_type_check CHECK (scope_type IN ({types})){suffix};
        ALTER TABLE tombstones DROP CONSTRAINT tombstones_target_type_check,
            ADD CONSTRAINT tombstones_target_type_check CHECK (target_type IN ({types})){suffix};
        """
    )


def upgrade() -> None:
    _checks("'memory', 'event', 'session', 'subject', 'record'")


def downgrade() -> None:
    # Jobs and tombstones of deleted records stay (a tombstone must outlive what it stands for): not re-checked.
    _checks("'memory', 'event', 'session', 'subject'", valid=False)
