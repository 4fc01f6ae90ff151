"""Deletion fingerprints: salted hashes of the deleted content's shingles, kept past the job.

The residue scan (:mod:`memory.deletion.residue`) looks for them in every text-bearing column of every
tenant table, the artifact stores and the tenant's workflow histories; a restore carries them into the
restored database and scans it again. Hashes, never the text. No foreign key to the job: a restored
database from before the deletion has no such job row, yet must be scanned for its fingerprints.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE deletion_fingerprints (
            tenant_id text NOT NULL,
            job_id uuid NOT NULL,
            kind text NOT NULL CHECK (kind IN ('units', 'lexeme_runs', 'posting_windows')),
            text_no integer NOT NULL,
            shingle bigint NOT NULL,
            PRIMARY KEY (tenant_id, job_id, kind, text_no, shingle)
        )
        """
    )
    isolate_by_tenant("deletion_fingerprints")


def downgrade() -> None:
    op.execute("DROP TABLE deletion_fingerprints")
