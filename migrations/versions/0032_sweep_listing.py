"""Sweeps list the tenants with work in one statement (issue 28, many tenants).

A sweep that spends an activity on every tenant to find out whether it has work costs minutes per run at
thousands of tenants, and its history outgrows Temporal's limit. ``sweep_listing`` is a SELECT-only policy on
the tables the sweeps' rules read, open only in a transaction that set ``mnemo.sweep_listing``
(:func:`memory.identity.tenants.listing_session`, read-only), as ``metrics_scrape`` (0018) is for the metrics.

Revision ID: 0032
Revises: 0031
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

LISTED = ("memory_search", "memories", "tombstones", "sessions", "session_commits", "knowledge_candidates")
"""The tables the embedding, session-commit and knowledge-review sweeps' rules read."""


def upgrade() -> None:
    for table in LISTED:
        op.execute(
            f"CREATE POLICY sweep_listing ON {table} FOR SELECT "
            "USING (current_setting('mnemo.sweep_listing', true) = 'on')"
        )


def downgrade() -> None:
    for table in LISTED:
        op.execute(f"DROP POLICY sweep_listing ON {table}")
