"""The tenants a sweep walks: in a stable order, a page at a time, and only those with work when the sweep
can say what work is (an ``EXISTS`` over its own rule, read across tenants in one statement)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import ColumnElement, Engine, select, text
from sqlalchemy.orm import Session

from memory.db import global_session, set_local
from memory.models import Tenant

LISTING_SETTING = "mnemo.sweep_listing"
"""Opens migration 0032's ``sweep_listing`` SELECT policy on the tables a sweep's rule reads, in a read-only
transaction (as ``mnemo.metrics_scrape`` does for the metrics): one statement lists the tenants with work,
instead of one transaction per tenant to find out."""

Due = Callable[[ColumnElement[str]], ColumnElement[bool]]
"""A sweep's rule as a condition on a tenant id column: the tenant has something for the sweep to do."""


@contextmanager
def listing_session(engine: Engine) -> Iterator[Session]:
    """A read-only transaction that may read every tenant's rows of the tables a sweep's rule reads."""
    with global_session(engine) as session:
        session.execute(text("SET TRANSACTION READ ONLY"))
        set_local(session, LISTING_SETTING, "on")
        yield session


def tenant_page(session: Session, after: str | None, limit: int | None, due: Due | None = None) -> list[str]:
    """Up to ``limit`` (None: every) tenant ids after ``after``, sorted (a sweep visits them in the same order each
    time), only those ``due`` holds for when it is given."""
    query = select(Tenant.tenant_id).order_by(Tenant.tenant_id).limit(limit)
    if after is not None:
        query = query.where(Tenant.tenant_id > after)
    if due is not None:
        query = query.where(due(Tenant.tenant_id.expression))
    return list(session.execute(query).scalars())
