"""Full text: every projection row re-derived with the day its memory was observed, as words.

From this revision the lexical projection is :func:`memory.store.memory_text.lexical_text` (what the memory
says, then ``8 May 2023``), and recall's lexical scores read the same text. Rows projected before it would
miss the date words, so this re-derives ``search_text``, ``tokens`` and the postings (``memory_lexemes``,
migration 0008, derived from ``tokens`` in SQL as the application does) of every current projection row,
tenant by tenant (each in its own ``mnemo.tenant_id`` context, so row-level security holds), in batches.
Vectors are untouched: the embedded text does not carry the date. Purged memories keep their empty
projection: their content is already scrubbed.

It calls the application's text functions on purpose, as migration 0006 does: stored and scored lexemes
must come from the same code. Downgrade re-derives the rows without the date words.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Callable

from alembic import op
from sqlalchemy import text

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

BATCH = 1_000


def _rederive(with_dates: bool) -> None:
    from memory.models import Memory
    from memory.store.audience import audience
    from memory.store.memory_text import lexical_text, memory_text
    from memory.text import lexemes, normalize

    rule: Callable[[Memory], str] = lexical_text if with_dates else memory_text
    connection = op.get_bind()
    tenants = [row[0] for row in connection.execute(text("SELECT tenant_id FROM tenants ORDER BY tenant_id"))]
    for tenant in tenants:
        connection.execute(text("SELECT set_config('mnemo.tenant_id', :t, true)"), {"t": tenant})
        after = None
        while True:
            rows = connection.execute(
                text(
                    "SELECT s.memory_id, m.key, m.abstract, m.overview, m.content, m.observed_at,"
                    "       m.space, m.owner_id, m.session_id"
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
            updates = []
            for row in rows:
                said = rule(Memory(key=row.key, abstract=row.abstract, overview=row.overview, content=row.content,
                                   observed_at=row.observed_at))
                updates.append({"t": tenant, "id": row.memory_id, "text": normalize(said),
                                "tokens": " ".join(lexemes(said)),
                                "audience": audience(row.space, row.owner_id, row.session_id)})
            connection.execute(
                text("UPDATE memory_search SET search_text = :text, tokens = to_tsvector('simple', :tokens)"
                     " WHERE tenant_id = :t AND memory_id = :id"),
                updates,
            )
            connection.execute(
                text("DELETE FROM memory_lexemes WHERE tenant_id = :t AND memory_id = ANY(:ids)"),
                {"t": tenant, "ids": [row.memory_id for row in rows]},
            )
            connection.execute(
                text("INSERT INTO memory_lexemes (tenant_id, audience, lexeme, revision, memory_id, version)"
                     " SELECT s.tenant_id, :audience, unnest(tsvector_to_array(s.tokens)), s.source_revision,"
                     "        s.memory_id, s.version"
                     " FROM memory_search s WHERE s.tenant_id = :t AND s.memory_id = :id"),
                updates,
            )
            after = rows[-1].memory_id


def upgrade() -> None:
    _rederive(with_dates=True)


def downgrade() -> None:
    _rederive(with_dates=False)
