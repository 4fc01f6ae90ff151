"""Forgetting: deletion jobs and their layers, tombstones, subject epochs, retention, audit.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TENANT_TABLES = (
    "subject_epochs",
    "deletion_jobs",
    "deletion_layers",
    "tombstones",
    "deletion_probes",
    "rebuild_blocks",
    "retention_holds",
    "retention_policies",
    "audit_log",
)


def upgrade() -> None:
    op.execute(
        """
        -- Bumped in the barrier transaction; a writer holding an older value is refused.
        CREATE TABLE subject_epochs (
            tenant_id text NOT NULL REFERENCES tenants,
            user_id text NOT NULL,
            deletion_epoch bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant_id, user_id)
        );
        CREATE TABLE deletion_jobs (
            tenant_id text NOT NULL REFERENCES tenants,
            job_id uuid NOT NULL,
            deletion_request_id text NOT NULL,
            request_sha256 text NOT NULL,
            scope_type text NOT NULL CHECK (scope_type IN ('memory', 'event', 'session', 'subject')),
            scope jsonb NOT NULL,
            subject_user_id text NOT NULL,
            requested_by text NOT NULL,
            status text NOT NULL CHECK (status IN ('accepted', 'running', 'retry_wait', 'blocked_by_retention',
                'failed_requires_action', 'completed')),
            epoch bigint NOT NULL,
            barrier_revision bigint NOT NULL,
            workflow_id text NOT NULL,
            barrier_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            completed_at timestamptz,
            last_error text,
            PRIMARY KEY (tenant_id, job_id),
            UNIQUE (tenant_id, deletion_request_id)
        );
        CREATE TABLE deletion_layers (
            tenant_id text NOT NULL,
            job_id uuid NOT NULL,
            layer text NOT NULL,
            position integer NOT NULL,
            status text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
            removed integer NOT NULL DEFAULT 0,
            remaining integer,
            evidence jsonb NOT NULL DEFAULT '{}',
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, job_id, layer),
            FOREIGN KEY (tenant_id, job_id) REFERENCES deletion_jobs
        );
        -- Outlive the content they stand for: recall checks them, restore re-applies them.
        CREATE TABLE tombstones (
            tenant_id text NOT NULL REFERENCES tenants,
            target_type text NOT NULL CHECK (target_type IN ('memory', 'event', 'session', 'subject')),
            target_id text NOT NULL,
            owner_user_id text NOT NULL,
            job_id uuid NOT NULL,
            -- Covers rows written at or before this revision; later writes are new data.
            revision bigint NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, target_type, target_id, owner_user_id)
        );
        -- A transient copy of what verification searches for; purged when the job completes.
        CREATE TABLE deletion_probes (
            tenant_id text NOT NULL,
            job_id uuid NOT NULL,
            probe text NOT NULL,
            PRIMARY KEY (tenant_id, job_id, probe),
            FOREIGN KEY (tenant_id, job_id) REFERENCES deletion_jobs
        );
        -- "Do not rebuild the deleted memory from this event."
        CREATE TABLE rebuild_blocks (
            tenant_id text NOT NULL,
            event_id uuid NOT NULL,
            memory_id uuid NOT NULL,
            job_id uuid NOT NULL,
            PRIMARY KEY (tenant_id, event_id, memory_id)
        );
        CREATE TABLE retention_holds (
            tenant_id text NOT NULL REFERENCES tenants,
            hold_id uuid NOT NULL,
            user_id text NOT NULL,
            reason text NOT NULL,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            released_at timestamptz,
            PRIMARY KEY (tenant_id, hold_id)
        );
        CREATE TABLE retention_policies (
            tenant_id text NOT NULL REFERENCES tenants,
            target text NOT NULL,
            keep_days integer NOT NULL CHECK (keep_days > 0),
            PRIMARY KEY (tenant_id, target)
        );
        -- Ids, versions and hashes only: never the content itself.
        CREATE TABLE audit_log (
            tenant_id text NOT NULL REFERENCES tenants,
            audit_id bigint GENERATED ALWAYS AS IDENTITY,
            at timestamptz NOT NULL DEFAULT now(),
            actor text NOT NULL,
            action text NOT NULL,
            memory_id uuid,
            version integer,
            job_id uuid,
            detail jsonb NOT NULL DEFAULT '{}',
            PRIMARY KEY (tenant_id, audit_id)
        );
        CREATE INDEX audit_log_memory ON audit_log (tenant_id, memory_id);
        -- A deleted memory keeps its (scrubbed) versions; none of them is a head any more.
        DROP INDEX memories_one_head;
        CREATE UNIQUE INDEX memories_one_head ON memories (tenant_id, memory_id)
            WHERE status NOT IN ('SUPERSEDED', 'DELETED');
        -- When a purge scrubbed the row's content (the row itself stays, as an id with a tombstone).
        ALTER TABLE memories ADD COLUMN purged_at timestamptz;
        ALTER TABLE memory_events ADD COLUMN purged_at timestamptz;
        CREATE INDEX memories_owner ON memories (tenant_id, owner_id);
        CREATE INDEX memories_session ON memories (tenant_id, session_id) WHERE session_id IS NOT NULL;
        CREATE INDEX memory_events_user ON memory_events (tenant_id, user_id);
        """
    )
    for table in TENANT_TABLES:
        isolate_by_tenant(table)


def downgrade() -> None:
    op.execute("DROP INDEX memories_owner, memories_session, memory_events_user")
    op.execute("ALTER TABLE memories DROP COLUMN purged_at")
    op.execute("ALTER TABLE memory_events DROP COLUMN purged_at")
    op.execute(f"DROP TABLE {', '.join(reversed(TENANT_TABLES))}")
