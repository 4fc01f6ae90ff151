"""0023 moves existing sessions, keys and deletion requests into their users' namespaces, keeping every row."""

from __future__ import annotations

from alembic import command
from sqlalchemy import text

from api.devstack.postgres import PostgresInfo
from memory.db import make_engine, tenant_session
from migrations import alembic_config, upgrade
from tests.factories import key_in, scratch_database

_AT_0021 = [
    "INSERT INTO sessions (tenant_id, session_id, user_id, request_sha256, revision)"
    " VALUES ('acme', 's1', 'alice', 'x', 1)",
    "INSERT INTO session_summaries (tenant_id, session_id, version, summary_id, reason, from_sequence, to_sequence,"
    " body, abstract, overview, revision)"
    " VALUES ('acme', 's1', 1, gen_random_uuid(), 'commit', 1, 1, '{}', 'a', 'o', 2)",
    "INSERT INTO session_commits (tenant_id, session_id, commit_id, workflow_id, status, trigger, requested_by,"
    " requester_roles, held_epoch, from_sequence, to_sequence)"
    " VALUES ('acme', 's1', 'c1', 'w', 'completed', 'explicit', 'alice', '{}', 0, 1, 1)",
    "INSERT INTO session_links (tenant_id, session_id, target, relation) VALUES ('acme', 's1', 'memory:x', 'used')",
]


def test_0023_gives_sessions_their_users_and_lets_another_user_have_the_same_ids(postgres: PostgresInfo) -> None:
    with scratch_database(postgres, "mnemo_ids") as url:
        engine = make_engine(url, pool_size=1)
        key_in(engine, "acme", "alice")
        key_in(engine, "other", "carol")
        command.downgrade(alembic_config(url), "0021")
        with tenant_session(engine, "acme") as session:
            for statement in _AT_0021:
                session.execute(text(statement))
        upgrade(url)
        with tenant_session(engine, "acme") as session:
            owners = {table: session.execute(text(f"SELECT user_id FROM {table}")).scalars().all()
                      for table in ("session_summaries", "session_commits", "session_links")}
            # Bob may now open his own s1, with its own commit c1.
            session.execute(text("INSERT INTO sessions (tenant_id, session_id, user_id, request_sha256, revision)"
                                 " VALUES ('acme', 's1', 'bob', 'y', 3)"))
            session.execute(text(
                "INSERT INTO session_commits (tenant_id, user_id, session_id, commit_id, workflow_id, status, trigger,"
                " requested_by, requester_roles, held_epoch, from_sequence, to_sequence)"
                " VALUES ('acme', 'bob', 's1', 'c1', 'w2', 'accepted', 'explicit', 'bob', '{}', 0, 1, 1)"
            ))
        with tenant_session(engine, "acme") as session:
            secrets = session.execute(text("SELECT id_secret FROM tenants ORDER BY tenant_id")).scalars().all()
        engine.dispose()
    assert owners == {"session_summaries": ["alice"], "session_commits": ["alice"], "session_links": ["alice"]}
    assert len(secrets) == 2 and len(set(secrets)) == 2 and all(len(s) == 64 for s in secrets)
