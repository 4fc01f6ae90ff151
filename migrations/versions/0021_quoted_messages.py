"""Memories: where in the content the message a reply quotes begins (``quote_start``).

A memory written from a reply (``POST /memory-candidates`` with ``message.replying_to``) holds the other
speaker's message after its own words; recall's lexical scores count those quoted words at a fraction of
the memory's own (:data:`memory.recall.scoring.QUOTED_WEIGHT`), so a question in the quoted message's
words finds that message's own memory first. NULL for everything else. Memories written before this
revision are not parsed for a quote: their quoted words keep counting in full.

The check keeps the offset inside the content; purging a memory scrubs the offset with the content.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("quote_start", sa.Integer(), nullable=True))
    # NOT VALID, then VALIDATE: the scan of existing rows runs without the exclusive lock that blocks writes.
    op.execute(
        "ALTER TABLE memories ADD CONSTRAINT memories_quote_inside_content"
        " CHECK (quote_start IS NULL OR (quote_start > 0 AND quote_start < char_length(content))) NOT VALID"
    )
    op.execute("ALTER TABLE memories VALIDATE CONSTRAINT memories_quote_inside_content")


def downgrade() -> None:
    op.drop_constraint("memories_quote_inside_content", "memories", type_="check")
    op.drop_column("memories", "quote_start")
