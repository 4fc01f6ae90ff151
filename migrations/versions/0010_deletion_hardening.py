"""Deletion hardening: verification probes keyed by a digest of their text.

A probe is a deleted memory's text (and each of its clauses), kept until verification has
searched for it. It was part of the primary key, and random text does not compress: a memory of
~2,800 random letters made an index row over the B-tree limit (2,704 bytes), so its deletion
failed with a 500 and the memory could never be forgotten. The key is now the SHA-256 of the
text; the text stays beside it for the search.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

from migrations.rls import per_tenant

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

PROBE_SHA256 = "encode(sha256(convert_to(probe, 'UTF8')), 'hex')"
"""``memory.deletion.barrier.probe_digest`` in SQL."""


def upgrade() -> None:
    op.execute("ALTER TABLE deletion_probes ADD COLUMN probe_sha256 text")
    per_tenant(f"UPDATE deletion_probes SET probe_sha256 = {PROBE_SHA256} WHERE tenant_id = :t")
    op.execute("ALTER TABLE deletion_probes ALTER COLUMN probe_sha256 SET NOT NULL")
    op.execute("ALTER TABLE deletion_probes DROP CONSTRAINT deletion_probes_pkey")
    op.execute("ALTER TABLE deletion_probes ADD CONSTRAINT deletion_probes_pkey PRIMARY KEY (tenant_id, job_id, probe_sha256)")


def downgrade() -> None:
    # Fails loudly if a pending job holds a probe too long for the old key: dropping it would weaken that job's verification.
    op.execute("ALTER TABLE deletion_probes DROP CONSTRAINT deletion_probes_pkey")
    op.execute("ALTER TABLE deletion_probes ADD CONSTRAINT deletion_probes_pkey PRIMARY KEY (tenant_id, job_id, probe)")
    op.execute("ALTER TABLE deletion_probes DROP COLUMN probe_sha256")
