"""Resources: source records of the declared business types, their long bodies and their search projection.

- ``resource_records``: the current version of one record of a declared type (seed 000 §2), keyed by its
  owner: two users of a tenant may each have a ``todo:1``. ``data`` is what the declaration's schema
  accepted, without the values of its long fields; ``data_sha256`` is of the whole data, so the same data
  written again is a replay. ``revision`` comes from the one write sequence.
- ``resource_artifacts``: a long field (a transcript's text) of a record's current version, stored in the
  artifact store under the sha256 of its JSON encoding; here its metadata.
- ``resource_search``: the search projection (seed 000 §4.1), written in the record's transaction: one row
  per declared search field of the record, with its normalised text and lexemes, so a search matches only
  the fields a run may read (seed 000 §3.2). GIN on the lexemes and on trigrams of the text.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TABLES = ("resource_records", "resource_artifacts", "resource_search")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE resource_records (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            owner_id text NOT NULL,
            resource text NOT NULL,
            record_id text NOT NULL,
            version integer NOT NULL,
            data jsonb NOT NULL,
            data_sha256 text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            revision bigint NOT NULL,
            PRIMARY KEY (tenant_id, owner_id, resource, record_id)
        );
        CREATE INDEX resource_records_recent ON resource_records (tenant_id, owner_id, resource, updated_at);

        CREATE TABLE resource_artifacts (
            tenant_id text NOT NULL,
            owner_id text NOT NULL,
            resource text NOT NULL,
            record_id text NOT NULL,
            field_path text NOT NULL,
            sha256 text NOT NULL,
            size_bytes bigint NOT NULL,
            characters bigint NOT NULL,
            PRIMARY KEY (tenant_id, owner_id, resource, record_id, field_path),
            FOREIGN KEY (tenant_id, owner_id, resource, record_id) REFERENCES resource_records ON DELETE CASCADE
        );
        CREATE INDEX resource_artifacts_by_sha256 ON resource_artifacts (sha256);

        CREATE TABLE resource_search (
            tenant_id text NOT NULL,
            owner_id text NOT NULL,
            resource text NOT NULL,
            record_id text NOT NULL,
            field_path text NOT NULL,
            version integer NOT NULL,
            search_text text NOT NULL,
            tokens tsvector NOT NULL,
            source_revision bigint NOT NULL,
            PRIMARY KEY (tenant_id, owner_id, resource, record_id, field_path),
            FOREIGN KEY (tenant_id, owner_id, resource, record_id) REFERENCES resource_records ON DELETE CASCADE
        );
        CREATE INDEX resource_search_tokens ON resource_search USING gin (tokens);
        CREATE INDEX resource_search_trigrams ON resource_search USING gin (search_text gin_trgm_ops);
        """
    )
    for table in TABLES:
        isolate_by_tenant(table)


def downgrade() -> None:
    op.execute("DROP TABLE resource_search, resource_artifacts, resource_records")
