"""Full text: re-derive every projection's tokens as lexemes (English words Snowball-stemmed).

Queries are stemmed from this revision on (``memory.text.lexemes``), so rows
projected before it would match only where the stem equals the word. This
recomputes ``tokens`` for every projection row from its memory version, tenant by
tenant (each in its own ``mnemo.tenant_id`` context, so row-level security holds
even for an owner that does not bypass it), in batches. Purged memories keep their
empty tokens: their content is already scrubbed.

It calls the application's lexeme function on purpose: the point is that stored
and query lexemes come from the same code.

Revision ID: 0006
Revises: 0005
"""

from alembic import op
from sqlalchemy import text

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BATCH = 2_000


def _rederive(stemmed: bool) -> None:
    from memory.text import lexemes, tokens

    derive = lexemes if stemmed else tokens
    connection = op.get_bind()
    tenants = [row[0] for row in connection.execute(text("SELECT tenant_id FROM tenants ORDER BY tenant_id"))]
    for tenant in tenants:
        connection.execute(text("SELECT set_config('mnemo.tenant_id', :t, true)"), {"t": tenant})
        after = None
        while True:
            rows = connection.execute(
                text(
                    "SELECT s.memory_id, concat_ws(' ', m.key, m.abstract, m.overview, m.content) AS searchable"
                    " FROM memory_search s JOIN memories m ON m.tenant_id = s.tenant_id"
                    "  AND m.memory_id = s.memory_id AND m.version = s.version"
                    " WHERE s.tenant_id = :t AND m.purged_at IS NULL"
                    " AND (CAST(:after AS uuid) IS NULL OR s.memory_id > :after)"
                    " ORDER BY s.memory_id LIMIT :n"
                ),
                {"t": tenant, "after": after, "n": BATCH},
            ).all()
            if not rows:
                break
            connection.execute(
                text(
                    "UPDATE memory_search SET tokens = to_tsvector('simple', :tokens)"
                    " WHERE tenant_id = :t AND memory_id = :id"
                ),
                [{"t": tenant, "id": row.memory_id, "tokens": " ".join(derive(row.searchable))} for row in rows],
            )
            after = rows[-1].memory_id


def upgrade() -> None:
    _rederive(stemmed=True)


def downgrade() -> None:
    _rederive(stemmed=False)
