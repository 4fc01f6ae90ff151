"""Deletion hardening: probes keyed by a digest, an outbox of workflow starts, evidence links by index.

- A probe is a deleted memory's text (and each of its clauses), kept until verification has
  searched for it. It was part of the primary key, and random text does not compress: a memory of
  ~2,800 random letters made an index row over the B-tree limit (2,704 bytes), so its deletion
  failed with a 500 and the memory could never be forgotten. The key is now the SHA-256 of the
  text; the text stays beside it for the search.
- ``deletion_outbox``: the barrier transaction records that the job's workflow must be started;
  the row goes once Temporal has it (``memory.deletion.outbox``). A deletion accepted while
  Temporal was down stayed ``accepted`` forever unless the request was repeated. Besides the
  tenant policy, a read-only policy lets the drainer (``mnemo worker``) find every tenant's
  pending starts in one query, in a transaction that says so (``mnemo.outbox_drain``).
- ``memories_evidence``: the barrier now finds memories derived from the deleted records inside
  the request, so "who cites these links" is a GIN lookup instead of a scan of the tenant.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

from migrations.rls import isolate_by_tenant, per_tenant

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

PROBE_SHA256 = "encode(sha256(convert_to(probe, 'UTF8')), 'hex')"
"""``memory.deletion.barrier.probe_digest`` in SQL."""


def upgrade() -> None:
    op.execute("ALTER TABLE deletion_probes ADD COLUMN probe_sha256 text")
    per_tenant(f"UPDATE deletion_probes SET probe_sha256 = {PROBE_SHA256} WHERE tenant_id = :t")
    op.execute("ALTER TABLE deletion_probes ALTER COLUMN probe_sha256 SET NOT NULL")
    op.execute("ALTER TABLE deletion_probes DROP CONSTRAINT deletion_probes_pkey")
    op.execute(
        "ALTER TABLE deletion_probes ADD CONSTRAINT deletion_probes_pkey PRIMARY KEY (tenant_id, job_id, probe_sha256)"
    )
    op.execute(
        """
        CREATE TABLE deletion_outbox (
            tenant_id text NOT NULL,
            job_id uuid NOT NULL,
            enqueued_at timestamptz NOT NULL DEFAULT now(),
            attempts integer NOT NULL DEFAULT 0,
            last_attempt_at timestamptz,
            last_error text,
            PRIMARY KEY (tenant_id, job_id),
            FOREIGN KEY (tenant_id, job_id) REFERENCES deletion_jobs
        );
        CREATE INDEX deletion_outbox_enqueued ON deletion_outbox (enqueued_at);
        CREATE INDEX memories_evidence ON memories USING gin (evidence_refs);
        """
    )
    isolate_by_tenant("deletion_outbox")
    op.execute(
        "CREATE POLICY outbox_drain ON deletion_outbox FOR SELECT "
        "USING (current_setting('mnemo.outbox_drain', true) = 'on')"
    )


def downgrade() -> None:
    op.execute("DROP INDEX memories_evidence")
    op.execute("DROP TABLE deletion_outbox")
    # Fails loudly if a pending job holds a probe too long for the old key: dropping it would weaken that job's
    # verification.
    op.execute("ALTER TABLE deletion_probes DROP CONSTRAINT deletion_probes_pkey")
    op.execute("ALTER TABLE deletion_probes ADD CONSTRAINT deletion_probes_pkey PRIMARY KEY (tenant_id, job_id, probe)")
    op.execute("ALTER TABLE deletion_probes DROP COLUMN probe_sha256")
