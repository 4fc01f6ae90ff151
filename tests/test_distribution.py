"""The migrated schema can be distributed by tenant with Citus (memory/distribution.py), checked on the real embedded
PostgreSQL (Citus cannot be installed here): every tenant table's primary key and unique indexes start with
``tenant_id``, the global tables are the listed reference tables, the statements ``mnemo migrate`` would run under
Citus distribute every table once, parents first, and without the extension it runs none."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, Engine, create_engine, event, text

from api.devstack.postgres import PostgresInfo
from memory.db import tenant_session
from memory.distribution import (
    COLOCATION_ANCHOR,
    COORDINATOR_TABLES,
    DISTRIBUTION_COLUMN,
    DROPPED_FOREIGN_KEYS,
    REFERENCE_TABLES,
    distribute,
    foreign_keys,
    plan,
    tenant_tables,
)

KEYS = """
SELECT i.indexrelid::regclass::text, i.indisprimary, a.attname
FROM pg_index i
LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = CAST(:t AS regclass) AND (i.indisunique OR i.indisprimary OR i.indisexclusion)
"""


@pytest.fixture
def owner(postgres: PostgresInfo) -> Iterator[Connection]:
    """A connection as the schema's owner, in a transaction rolled back at the end (a test may plant a table)."""
    engine = create_engine(postgres.url())
    with engine.connect() as connection:
        transaction = connection.begin()
        yield connection
        transaction.rollback()
    engine.dispose()


def key_problems(connection: Connection) -> list[str]:
    """Every tenant table: ``tenant_id`` of one type, row-level security forced, a primary key, and every primary,
    unique or exclusion key starting with ``tenant_id`` (Citus enforces a key only when it holds the distribution
    column; starting with it keeps a tenant's look-ups on its own index range)."""
    problems = []
    types = set()
    for table in sorted(tenant_tables(connection)):
        types.add(connection.execute(text(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
            "AND attname = :c"), {"t": table, "c": DISTRIBUTION_COLUMN}).scalar_one())
        forced = connection.execute(text(
            "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE oid = CAST(:t AS regclass)"),
            {"t": table}).scalar_one()
        if not forced:
            problems.append(f"{table}: row-level security is not forced")
        keys = connection.execute(text(KEYS), {"t": table}).all()
        if not any(primary for _, primary, _ in keys):
            problems.append(f"{table}: no primary key")
        problems += [f"{table}: {index} starts with {first or 'an expression'}, not {DISTRIBUTION_COLUMN}"
                     for index, _, first in keys if first != DISTRIBUTION_COLUMN]
    if len(types) > 1:
        problems.append(f"{DISTRIBUTION_COLUMN} has several types ({sorted(types)}): tables cannot be colocated")
    return problems


def global_problems(connection: Connection) -> list[str]:
    """The global tables are exactly the listed ones: present, without row-level security (they are read before a
    tenant is known), and referencing a tenant table only by a foreign key listed to be dropped under Citus."""
    tables = set(connection.execute(text(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
    )).scalars())
    listed = REFERENCE_TABLES.keys() | COORDINATOR_TABLES.keys()
    problems = [f"{table}: listed in memory/distribution.py but not in the schema" for table in sorted(listed - tables)]
    problems += [f"{table}: listed both as a reference and a coordinator table"
                 for table in sorted(REFERENCE_TABLES.keys() & COORDINATOR_TABLES.keys())]
    isolated = set(connection.execute(text(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relrowsecurity")).scalars())
    problems += [f"{table}: a global table under row-level security" for table in sorted(isolated & listed)]
    tenant = tenant_tables(connection)
    crossing = {(child, parent) for child, parent in foreign_keys(connection)
                if child in REFERENCE_TABLES and parent in tenant}
    problems += [f"{child} -> {parent}: a reference table's foreign key to a tenant table (Citus refuses it)"
                 for child, parent in sorted(crossing - DROPPED_FOREIGN_KEYS.keys())]
    problems += [f"{child} -> {parent}: listed to be dropped but no such foreign key"
                 for child, parent in sorted(DROPPED_FOREIGN_KEYS.keys() - crossing)]
    return problems


def test_every_tenant_key_starts_with_tenant_id(owner: Connection) -> None:
    assert key_problems(owner) == []
    assert {"memories", "memory_search", "memory_lexemes", "tasks", "sessions"} <= tenant_tables(owner)


def test_the_global_tables_are_the_listed_reference_tables(owner: Connection) -> None:
    assert global_problems(owner) == []


@pytest.mark.parametrize(("ddl", "expected"), [
    ("CREATE TABLE planted (tenant_id text, item text, PRIMARY KEY (item, tenant_id))",
     "planted: planted_pkey starts with item"),
    ("CREATE TABLE planted (tenant_id text PRIMARY KEY, item text); CREATE UNIQUE INDEX planted_item ON planted (item)",
     "planted: planted_item starts with item"),
    ("CREATE TABLE planted (tenant_id text PRIMARY KEY, item text); "
     "CREATE UNIQUE INDEX planted_lower ON planted (lower(item), tenant_id)",
     "planted_lower starts with an expression"),
    ("CREATE TABLE planted (tenant_id text, item text)", "planted: no primary key"),
    ("CREATE TABLE planted (tenant_id text PRIMARY KEY)", "planted: row-level security is not forced"),
    ("CREATE TABLE planted (tenant_id uuid PRIMARY KEY)", "several types"),
])
def test_the_key_check_finds_a_planted_table(owner: Connection, ddl: str, expected: str) -> None:
    """Each kind of problem, planted in the real schema (rolled back), is found."""
    owner.execute(text(ddl))
    assert any(expected in problem for problem in key_problems(owner)), key_problems(owner)


def test_the_global_check_finds_an_unlisted_table_and_a_crossing_key(owner: Connection) -> None:
    owner.execute(text("CREATE TABLE planted (item text PRIMARY KEY)"))
    with pytest.raises(RuntimeError, match="planted"):
        tenant_tables(owner)
    owner.execute(text("DROP TABLE planted"))
    owner.execute(text("ALTER TABLE console_sessions ADD COLUMN tenant_id text, ADD COLUMN job_id uuid, "
                       "ADD FOREIGN KEY (tenant_id, job_id) REFERENCES deletion_jobs (tenant_id, job_id)"))
    assert "console_sessions -> deletion_jobs: a reference table's foreign key to a tenant table (Citus refuses it)" \
        in global_problems(owner)


def test_the_citus_plan_distributes_every_table_once_parents_first(owner: Connection) -> None:
    statements = plan(owner)
    drops = [s for s in statements if s.startswith("ALTER TABLE")]
    references = [s.split("'")[1] for s in statements if "create_reference_table" in s]
    distributed = [s.split("'")[1] for s in statements if "create_distributed_table" in s]
    assert drops == ["ALTER TABLE api_keys DROP CONSTRAINT api_keys_tenant_id_user_id_fkey"]
    colocation = {t: "none" if t == COLOCATION_ANCHOR else COLOCATION_ANCHOR for t in distributed}
    assert statements == drops + [f"SELECT create_reference_table('{t}')" for t in references] + [
        f"SELECT create_distributed_table('{t}', 'tenant_id', colocate_with => '{colocation[t]}')" for t in distributed]
    assert sorted(references) == sorted(REFERENCE_TABLES)
    assert sorted(distributed) == sorted(tenant_tables(owner)) and distributed[0] == COLOCATION_ANCHOR
    order = {table: i for i, table in enumerate(references + distributed)}
    late = [(child, parent) for child, parent in foreign_keys(owner)
            if child in order and parent in order and child != parent and order[parent] > order[child]
            and (child, parent) not in DROPPED_FOREIGN_KEYS]
    assert late == []
    assert plan(owner, set(order)) == []


def test_migrate_distributes_nothing_without_citus(postgres: PostgresInfo, owner: Connection) -> None:
    assert distribute(postgres.url()) == []
    assert ("api_keys", "principals") in foreign_keys(owner)


@pytest.mark.parametrize("tenant", ["t-1", "it's", "a:b %s %(x)s \\ end", "中文"])
def test_the_tenant_is_set_by_a_command_a_cluster_passes_on(engine: Engine, tenant: str) -> None:
    """``SET LOCAL`` (Citus passes it on to the workers; a ``set_config()`` call it would not), with any tenant id
    quoted: row-level security reads exactly the tenant given."""
    sent: list[str] = []

    def capture(*args: object) -> None:
        sent.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with tenant_session(engine, tenant) as session:
            assert session.execute(text("SELECT current_setting('mnemo.tenant_id')")).scalar_one() == tenant
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert sent[0].startswith('SET LOCAL "mnemo"."tenant_id" = ')
