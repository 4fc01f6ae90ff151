"""The artifact store in PostgreSQL (issue 24): task artifacts, record bodies and published reports, readable by
every API replica and worker, no longer files on the disk of whichever process wrote them.

- ``artifact_objects``: one row per stored artifact, keyed by its namespace (``tasks``, ``records/<tenant
  hash>``, ``publications``) and its sha256; ``created_at`` is what a subject deletion compares with its barrier.
- ``artifact_chunks``: the bytes, in rows of at most 1 MiB, so a read streams them one by one.
- ``publications``: each publication destination's reports by idempotency key (the files are artifacts), and
  the operation that produced or found each, so every replica and worker sees the same publications.

No tenant column, so no row-level security: only :mod:`memory.artifact_store.postgres` and
:mod:`activities.stores` read these tables, by namespace. Files of an existing data directory are moved in by
``mnemo import-artifacts`` (``mnemo dev`` runs it at start).

Revision ID: 0024
Revises: 0023
"""

from alembic import op

from migrations.rls import APP_ROLE

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE artifact_objects (
            namespace text NOT NULL,
            sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
            size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
            chunk_count integer NOT NULL CHECK (chunk_count >= 0),
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, sha256)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE artifact_chunks (
            namespace text NOT NULL,
            sha256 text NOT NULL,
            seq integer NOT NULL CHECK (seq >= 0),
            data bytea NOT NULL,
            PRIMARY KEY (namespace, sha256, seq),
            FOREIGN KEY (namespace, sha256) REFERENCES artifact_objects (namespace, sha256) ON DELETE CASCADE
        )
        """
    )
    # The chunks are already compressed (PNG) or small: store them as they are, without TOAST compression.
    op.execute("ALTER TABLE artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL")
    op.execute(
        """
        CREATE TABLE publications (
            destination text NOT NULL,
            key_hash text NOT NULL,
            operation_id text NOT NULL,
            files jsonb NOT NULL,
            metadata jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (destination, key_hash)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE publication_operations (
            destination text NOT NULL,
            operation_id text NOT NULL,
            key_hash text NOT NULL,
            PRIMARY KEY (destination, operation_id)
        )
        """
    )
    for table in ("artifact_objects", "artifact_chunks", "publications", "publication_operations"):
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}")


def downgrade() -> None:
    op.execute("DROP TABLE publication_operations")
    op.execute("DROP TABLE publications")
    op.execute("DROP TABLE artifact_chunks")
    op.execute("DROP TABLE artifact_objects")
