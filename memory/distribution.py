"""mnemo's tables over a Citus cluster: every tenant table distributed by ``tenant_id``, all of them colocated, so a
tenant's rows of every table live on one node and each statement (which filters by tenant) runs there alone; the
global tables, a copy on every node (reference tables). The lists below are the one place that says which table is
which; ``tests/test_distribution.py`` holds the migrated schema to them.

``mnemo migrate`` runs :func:`distribute` after the migrations: on a server with the ``citus`` extension it
distributes what is not distributed yet (so a table a later migration adds is distributed by the next migrate);
without the extension it does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from graphlib import TopologicalSorter

from sqlalchemy import Connection, create_engine, text

log = logging.getLogger(__name__)

DISTRIBUTION_COLUMN = "tenant_id"
COLOCATION_ANCHOR = "memories"
"""The tenant table distributed first (it references no other tenant table); every other is colocated with it."""

REFERENCE_TABLES: dict[str, str] = {
    "tenants": "every tenant table's foreign key names it",
    "api_keys": "a request's key is looked up by its id before the tenant is known",
    "console_sessions": "a console cookie is looked up by its hash before the tenant is known",
    "artifact_objects": "the PostgreSQL artifact store is content-addressed by namespace and sha256, for every "
                        "tenant (a Citus deployment keeps artifacts in S3: MNEMO_ARTIFACT_STORE=s3)",
    "artifact_chunks": "the chunks of artifact_objects, keyed as they are",
    "publications": "a destination's ledger of what it published, keyed by destination and content",
    "publication_operations": "the operations of that ledger, keyed by destination",
}
"""Global tables (no tenant's rows), each with why it has no ``tenant_id`` to be distributed by."""

COORDINATOR_TABLES: dict[str, str] = {
    "alembic_version": "Alembic's own bookkeeping: only `mnemo migrate` reads it, on the coordinator",
}
"""Tables left as they are, on the coordinator alone."""

DROPPED_FOREIGN_KEYS: dict[tuple[str, str], str] = {
    ("api_keys", "principals"): "Citus refuses a foreign key from a reference table to a distributed one; "
                                "keys are created only for a principal (memory.identity.auth.create_api_key) and "
                                "principals are never deleted",
}
"""Foreign keys from a reference table to a tenant table (referencing, referenced): dropped under Citus, with why
the application keeps what they enforced."""


class DistributionError(RuntimeError):
    """The schema has a table the lists above do not account for."""


def foreign_keys(connection: Connection) -> list[tuple[str, str]]:
    """(referencing table, referenced table) of every foreign key of the schema."""
    return [(child, parent) for child, parent in connection.execute(text(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
        "WHERE contype = 'f' AND connamespace = 'public'::regnamespace ORDER BY 1, 2"))]


def _parents_first(connection: Connection, tables: Collection[str]) -> list[str]:
    """``tables`` ordered so that a table comes after every one of them its foreign keys reference."""
    edges: dict[str, set[str]] = {table: set() for table in sorted(tables)}
    for child, parent in foreign_keys(connection):
        if child in edges and parent in edges and child != parent:
            edges[child].add(parent)
    return list(TopologicalSorter(edges).static_order())


def tenant_tables(connection: Connection) -> set[str]:
    """The schema's tables that are neither reference nor coordinator tables: each must carry ``tenant_id``."""
    tables = set(connection.execute(text(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
    )).scalars())
    tenant = tables - REFERENCE_TABLES.keys() - COORDINATOR_TABLES.keys()
    without = sorted(table for table in tenant if not connection.execute(text(
        "SELECT 1 FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attname = :c AND NOT attisdropped"),
        {"t": table, "c": DISTRIBUTION_COLUMN}).first())
    if without:
        raise DistributionError(f"tables without {DISTRIBUTION_COLUMN} that memory/distribution.py does not list "
                                f"as reference or coordinator tables: {', '.join(without)}")
    return tenant


def plan(connection: Connection, distributed: Collection[str] = ()) -> list[str]:
    """The statements that distribute the schema, skipping the tables in ``distributed`` (already done): the
    listed foreign keys dropped, the reference tables (referenced first), then the tenant tables by ``tenant_id``,
    parents before the tables referencing them, all colocated with :data:`COLOCATION_ANCHOR`."""
    tenant = tenant_tables(connection)
    statements = []
    for (child, parent), _why in sorted(DROPPED_FOREIGN_KEYS.items()):
        if child in distributed:
            continue
        for (name,) in connection.execute(text(
                "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = CAST(:c AS regclass) "
                "AND confrelid = CAST(:p AS regclass) ORDER BY conname"), {"c": child, "p": parent}):
            statements.append(f"ALTER TABLE {child} DROP CONSTRAINT {name}")
    statements += [f"SELECT create_reference_table('{table}')"
                   for table in _parents_first(connection, REFERENCE_TABLES) if table not in distributed]
    order = [COLOCATION_ANCHOR, *(table for table in _parents_first(connection, tenant) if table != COLOCATION_ANCHOR)]
    for table in order:
        if table in distributed:
            continue
        colocation = "'none'" if table == COLOCATION_ANCHOR else f"'{COLOCATION_ANCHOR}'"
        statements.append(f"SELECT create_distributed_table('{table}', '{DISTRIBUTION_COLUMN}', "
                          f"colocate_with => {colocation})")
    return statements


def has_citus(connection: Connection) -> bool:
    return connection.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'")).first() is not None


def distribute(url: str) -> list[str]:
    """On a server with the ``citus`` extension, distribute what is not yet (as the schema's owner); the statements
    run. Without the extension: nothing, and ``[]``."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            if not has_citus(connection):
                return []
            done = set(connection.execute(text(
                "SELECT logicalrelid::regclass::text FROM pg_dist_partition")).scalars())
            statements = plan(connection, done)
            for statement in statements:
                log.info("citus: %s", statement)
                connection.execute(text(statement))
            return statements
    finally:
        engine.dispose()
