"""Knowledge (issue 27): candidates under review, and the published, versioned items recall may use.

A candidate is never knowledge: ``knowledge_candidates`` holds what was proposed (redacted before it was
stored), who proposed it and where its review stands; ``knowledge_items`` holds what a reviewer approved,
one row per version, with its search columns (full text, trigram, vector) written in the publishing
transaction. One ACTIVE version per item, and per (key, scope) when the item has a key.

Revision ID: 0030
Revises: 0029
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE knowledge_candidates (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            candidate_id uuid NOT NULL,
            version integer NOT NULL DEFAULT 1,
            state_version integer NOT NULL DEFAULT 1,
            status text NOT NULL CHECK (status IN
                ('PENDING_REVIEW', 'CHANGES_REQUESTED', 'APPROVED', 'REJECTED', 'WITHDRAWN', 'EXPIRED')),
            target text NOT NULL DEFAULT 'knowledge' CHECK (target IN ('knowledge', 'skill')),
            skill_name text,
            key text,
            claim text NOT NULL,
            structured jsonb,
            authority text NOT NULL CHECK (authority IN ('P0', 'P1', 'P2', 'P3')),
            scope_type text NOT NULL CHECK (scope_type IN ('TENANT', 'PROJECT')),
            project_id text,
            source_refs text[] NOT NULL,
            evidence jsonb NOT NULL DEFAULT '[]',
            valid_from timestamptz,
            valid_to timestamptz,
            supersedes uuid,
            origin text NOT NULL CHECK (origin IN ('API', 'SESSION_COMMIT', 'TASK', 'PROMOTION', 'REREVIEW')),
            origin_ref text,
            author_user_id text NOT NULL,
            author_agent_id text,
            content_sha256 text NOT NULL,
            redactions jsonb NOT NULL DEFAULT '[]',
            duplicates jsonb NOT NULL DEFAULT '[]',
            conflicts jsonb NOT NULL DEFAULT '[]',
            review_deadline timestamptz,
            review_started_at timestamptz,
            reminders_sent integer NOT NULL DEFAULT 0,
            decision text,
            decision_reason text,
            decided_by text,
            decided_at timestamptz,
            knowledge_id uuid,
            knowledge_version integer,
            idempotency_key text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, candidate_id),
            CHECK ((scope_type = 'PROJECT') = (project_id IS NOT NULL)),
            CHECK ((target = 'skill') = (skill_name IS NOT NULL)),
            CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to > valid_from)
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX knowledge_candidates_idempotency ON knowledge_candidates "
        "(tenant_id, author_user_id, idempotency_key) WHERE idempotency_key IS NOT NULL"
    )
    op.execute("CREATE INDEX knowledge_candidates_status ON knowledge_candidates (tenant_id, status, created_at)")
    op.execute("CREATE INDEX knowledge_candidates_unreviewed ON knowledge_candidates (tenant_id, created_at) "
               "WHERE review_started_at IS NULL AND status IN ('PENDING_REVIEW', 'CHANGES_REQUESTED')")
    op.execute("CREATE INDEX knowledge_candidates_sources ON knowledge_candidates USING gin (source_refs)")
    isolate_by_tenant("knowledge_candidates")
    op.execute(
        """
        CREATE TABLE knowledge_items (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            knowledge_id uuid NOT NULL,
            version integer NOT NULL,
            status text NOT NULL CHECK (status IN ('ACTIVE', 'SUPERSEDED', 'WITHDRAWN')),
            key text,
            claim text NOT NULL,
            structured jsonb,
            authority text NOT NULL CHECK (authority IN ('P0', 'P1', 'P2', 'P3')),
            scope_type text NOT NULL CHECK (scope_type IN ('TENANT', 'PROJECT')),
            project_id text,
            source_refs text[] NOT NULL,
            evidence jsonb NOT NULL DEFAULT '[]',
            valid_from timestamptz,
            valid_to timestamptz,
            candidate_id uuid NOT NULL,
            author_user_id text NOT NULL,
            reviewer_user_id text NOT NULL,
            published_at timestamptz NOT NULL DEFAULT now(),
            supersedes_version integer,
            content_sha256 text NOT NULL,
            withdrawn_reason text,
            search_text text NOT NULL,
            tokens tsvector NOT NULL,
            embedding vector,
            embedding_model text,
            PRIMARY KEY (tenant_id, knowledge_id, version),
            FOREIGN KEY (tenant_id, candidate_id) REFERENCES knowledge_candidates (tenant_id, candidate_id),
            CHECK ((scope_type = 'PROJECT') = (project_id IS NOT NULL))
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX knowledge_items_one_active ON knowledge_items (tenant_id, knowledge_id) "
        "WHERE status = 'ACTIVE'"
    )
    op.execute(
        "CREATE UNIQUE INDEX knowledge_items_one_active_key ON knowledge_items "
        "(tenant_id, key, scope_type, coalesce(project_id, '')) WHERE status = 'ACTIVE' AND key IS NOT NULL"
    )
    op.execute("CREATE INDEX knowledge_items_tokens ON knowledge_items USING gin (tokens)")
    op.execute("CREATE INDEX knowledge_items_trigram ON knowledge_items USING gin (search_text gin_trgm_ops)")
    op.execute("CREATE INDEX knowledge_items_sources ON knowledge_items USING gin (source_refs)")
    isolate_by_tenant("knowledge_items")


def downgrade() -> None:
    op.execute("DROP TABLE knowledge_items")
    op.execute("DROP TABLE knowledge_candidates")
