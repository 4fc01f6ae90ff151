"""Row-level security by tenant, the same way for every tenant table of every migration, and per-tenant data steps."""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

APP_ROLE = "mnemo_app"
"""The role the application runs as (``memory.db``): it cannot bypass row-level security."""


def isolate_by_tenant(table: str) -> None:
    """Rows of ``table`` are visible and writable only where ``tenant_id`` is the transaction's tenant.

    FORCE makes the policy bind the table's owner too; the application role gets plain DML.
    """
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {table} "
        "USING (tenant_id = current_setting('mnemo.tenant_id', true)) "
        "WITH CHECK (tenant_id = current_setting('mnemo.tenant_id', true))"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}")


def per_tenant(statement: str) -> None:
    """Run ``statement`` once per tenant (``:t`` is the tenant), in that tenant's row-level-security context."""
    connection = op.get_bind()
    for (tenant,) in connection.execute(text("SELECT tenant_id FROM tenants ORDER BY tenant_id")).all():
        connection.execute(text("SELECT set_config('mnemo.tenant_id', :t, true)"), {"t": tenant})
        connection.execute(text(statement), {"t": tenant})
