"""API key lifecycle: an optional expiry and the key a rotation replaced.

``expires_at``: after it, the key is refused with ``key_expired``. ``revoked_at`` may now lie in the
future (a rotation's grace period): the key works until then. ``rotated_from``: the key this one
replaced, so ``mnemo keys list`` can show a rotation chain. Both nullable: existing keys keep working.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN expires_at timestamptz, ADD COLUMN rotated_from text")
    op.execute("CREATE INDEX api_keys_principal ON api_keys (tenant_id, user_id)")


def downgrade() -> None:
    op.execute("DROP INDEX api_keys_principal")
    op.execute("ALTER TABLE api_keys DROP COLUMN expires_at, DROP COLUMN rotated_from")
