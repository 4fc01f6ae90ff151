"""The memory store: tenants, keys, events, versioned memories, search projection, tenant RLS.

Revision ID: 0001
Revises:
"""

from alembic import op

from migrations.rls import APP_ROLE, isolate_by_tenant

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TENANT_TABLES = ("principals", "memory_events", "memories", "memory_search")


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute("CREATE SEQUENCE mnemo_revision_seq")
    op.execute(
        """
        CREATE TABLE tenants (
            tenant_id text PRIMARY KEY CHECK (tenant_id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE principals (
            tenant_id text NOT NULL REFERENCES tenants,
            user_id text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, user_id)
        );
        CREATE TABLE api_keys (
            key_id text PRIMARY KEY,
            tenant_id text NOT NULL REFERENCES tenants,
            user_id text NOT NULL,
            agent_id text,
            roles text[] NOT NULL,
            secret_sha256 text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz,
            FOREIGN KEY (tenant_id, user_id) REFERENCES principals
        );
        CREATE TABLE memory_events (
            tenant_id text NOT NULL REFERENCES tenants,
            event_id uuid NOT NULL,
            idempotency_key text NOT NULL,
            request_sha256 text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('MESSAGE', 'TOOL_RESULT', 'TASK_EVENT')),
            user_id text NOT NULL,
            agent_id text,
            session_id text,
            payload jsonb NOT NULL,
            occurred_at timestamptz NOT NULL,
            stored_at timestamptz NOT NULL DEFAULT now(),
            revision bigint NOT NULL,
            PRIMARY KEY (tenant_id, event_id),
            UNIQUE (tenant_id, idempotency_key)
        );
        CREATE TABLE memories (
            tenant_id text NOT NULL REFERENCES tenants,
            memory_id uuid NOT NULL,
            version integer NOT NULL CHECK (version >= 1),
            status text NOT NULL CHECK (status IN
                ('CANDIDATE', 'ACTIVE', 'SUPERSEDED', 'EXPIRED', 'REVOKED', 'DELETED')),
            category text NOT NULL CHECK (category IN ('PROFILE', 'PREFERENCE', 'ENTITY', 'EVENT',
                'CASE', 'PATTERN', 'TOOL_EXPERIENCE', 'SKILL_EXECUTION')),
            space text NOT NULL CHECK (space IN ('SYSTEM', 'TENANT', 'AGENT', 'USER', 'SESSION')),
            owner_id text NOT NULL,
            key text,
            project_id text,
            session_id text,
            abstract text NOT NULL,
            overview text,
            content text NOT NULL,
            source_id text NOT NULL,
            source_type text NOT NULL,
            captured_at timestamptz NOT NULL,
            stored_at timestamptz NOT NULL DEFAULT now(),
            evidence_refs jsonb NOT NULL DEFAULT '[]',
            source_level text NOT NULL CHECK (source_level IN ('E1', 'E2', 'E3', 'E4')),
            confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            observed_at timestamptz,
            effective_from timestamptz,
            effective_to timestamptz,
            expires_at timestamptz,
            last_confirmed_at timestamptz,
            allowed_purposes text[] NOT NULL DEFAULT '{}',
            supersedes_version integer,
            created_by text NOT NULL,
            idempotency_key text,
            request_sha256 text,
            revision bigint NOT NULL,
            PRIMARY KEY (tenant_id, memory_id, version),
            CHECK (effective_to IS NULL OR effective_from IS NULL OR effective_to > effective_from),
            CHECK ((supersedes_version IS NULL) = (version = 1))
        );
        -- At most one live (not superseded) version per memory: the head.
        CREATE UNIQUE INDEX memories_one_head ON memories (tenant_id, memory_id)
            WHERE status <> 'SUPERSEDED';
        CREATE UNIQUE INDEX memories_idempotency ON memories (tenant_id, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        CREATE INDEX memories_visibility ON memories (tenant_id, space, owner_id, status);
        CREATE TABLE memory_search (
            tenant_id text NOT NULL,
            memory_id uuid NOT NULL,
            version integer NOT NULL,
            search_text text NOT NULL,
            tokens tsvector NOT NULL,
            embedding vector(384),
            embedding_model text,
            source_revision bigint NOT NULL,
            PRIMARY KEY (tenant_id, memory_id),
            FOREIGN KEY (tenant_id, memory_id, version) REFERENCES memories
        );
        CREATE INDEX memory_search_tokens ON memory_search USING gin (tokens);
        CREATE INDEX memory_search_trgm ON memory_search USING gin (search_text gin_trgm_ops);
        """
    )
    # The application runs as a role that cannot bypass RLS, even when it logs in as a superuser.
    op.execute(
        f"""
        DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                CREATE ROLE {APP_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS;
            END IF;
        END $$;
        """
    )
    op.execute(f"GRANT {APP_ROLE} TO CURRENT_USER")
    op.execute(f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE mnemo_revision_seq TO {APP_ROLE}")
    # Row-level security by tenant: the second wall behind the tenant filter in every query.
    for table in TENANT_TABLES:
        isolate_by_tenant(table)


def downgrade() -> None:
    op.execute("DROP TABLE memory_search, memories, memory_events, api_keys, principals, tenants")
    op.execute("DROP SEQUENCE mnemo_revision_seq")
    op.execute(f"REVOKE USAGE ON SCHEMA public FROM {APP_ROLE}")
