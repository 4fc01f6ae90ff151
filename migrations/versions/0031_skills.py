"""Skills as files (issue 27, item 5): a tenant's pushed skills and agents' overlays, content-addressed.

``skill_blobs`` holds each file's text once per tenant, by its sha256; ``skill_versions`` holds each pushed
directory as a manifest {relative path: sha256}, numbered per (tenant, space, agent, name). SYSTEM skills are not
here: they ship as files in the package (memory/skills/system/).

Revision ID: 0031
Revises: 0030
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE skill_blobs (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            sha256 text NOT NULL,
            content text NOT NULL,
            PRIMARY KEY (tenant_id, sha256)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE skill_versions (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            space text NOT NULL,
            agent_id text NOT NULL,
            name text NOT NULL,
            version integer NOT NULL CHECK (version > 0),
            manifest jsonb NOT NULL,
            tree_sha256 text NOT NULL,
            declared_version text NOT NULL,
            pushed_by text NOT NULL,
            pushed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, space, agent_id, name, version),
            CHECK ((space = 'TENANT' AND agent_id = '') OR (space = 'AGENT' AND agent_id <> ''))
        )
        """
    )
    isolate_by_tenant("skill_blobs")
    isolate_by_tenant("skill_versions")


def downgrade() -> None:
    op.execute("DROP TABLE skill_versions")
    op.execute("DROP TABLE skill_blobs")
