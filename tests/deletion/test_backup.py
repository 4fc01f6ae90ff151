"""Backup → delete → restore: the deleted memory stays gone (tombstones are re-applied)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.backup import backup, restore
from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from memory.db import make_engine, tenant_session
from memory.deletion.reapply import residue
from memory.identity.auth import create_api_key
from migrations import alembic_config, upgrade
from tests.conftest import auth, poll
from tests.deletion.conftest import completed, wait_for
from tests.factories import alices_memory, candidate, message_candidate, scratch_database
from tests.workers import worker_env

MNEMO = str(Path(sys.executable).parent / "mnemo")


@pytest.fixture
def own_database(postgres: PostgresInfo, deletion_settings: Settings) -> Iterator[Settings]:
    """A database of its own: a restore swaps the whole database, which other tests must not feel."""
    with scratch_database(postgres, "mnemo_backup") as url:
        yield deletion_settings.model_copy(update={"database_url": url, "task_queue": f"backup-{uuid.uuid4().hex[:8]}"})


@pytest.fixture
def own_worker(own_database: Settings) -> Iterator[None]:
    """A ``mnemo worker`` process on that database, for the deletion a test runs there."""
    worker = subprocess.Popen([MNEMO, "worker"], env=worker_env(own_database), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        worker.terminate()
        worker.wait(30)


def _mnemo(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_DATABASE_URL"] = settings.require_database_url()
    return subprocess.run([MNEMO, *args], capture_output=True, text=True, env=env, timeout=120)


def test_a_restored_backup_does_not_resurrect_deleted_data(
    own_database: Settings, own_worker: None, tmp_path: Path
) -> None:
    engine = make_engine(own_database.require_database_url(), pool_size=1)
    with tenant_session(engine, "acme") as session:
        key = create_api_key(session, tenant_id="acme", user_id="alice", roles=["memory_writer"])
    engine.dispose()
    archive = tmp_path / "mnemo.dump"
    with TestClient(create_app(own_database)) as api:
        doomed = api.post(
            "/memory-candidates", json=candidate("要被遗忘的秘密：保险柜密码提示"), headers=auth(key)
        ).json()
        kept = api.post("/memory-candidates", json=candidate("可以保留的偏好：喜欢绿茶"), headers=auth(key)).json()
        # A reply records where its quote begins; re-applying its tombstone must scrub that with the content.
        reply = {"speaker": "Alice", "text": "Yes, twice", "replying_to": {"speaker": "Bob", "text": "Lisbon?"}}
        quoting = api.post("/memory-candidates", json=message_candidate(reply), headers=auth(key)).json()
        backed_up = _mnemo(own_database, "backup", "--out", str(archive))
        assert backed_up.returncode == 0, backed_up.stderr
        for memory in (doomed, quoting):
            job = api.delete(f"/memories/{memory['memory_id']}", headers=auth(key)).json()["job_id"]
            wait_for(api, key, job, completed, timeout=90)  # its worker is a fresh process: slow to start under load
        after_delete = api.post("/memory-candidates", json=candidate("删除之后写入的新记忆"), headers=auth(key)).json()

    restored = _mnemo(own_database, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr
    assert "re-applied 2 tombstone(s)" in restored.stdout

    with TestClient(create_app(own_database)) as api:
        assert api.get(f"/memories/{doomed['memory_id']}", headers=auth(key)).status_code == 404
        # Only the deleted memory shares a word with the query; once the worker has embedded the restored
        # rows, the kept one may still come back as a distant vector neighbour, never the deleted one.
        lexical = api.post("/memory-query", json={"query": "保险柜密码", "retrieval": "lexical"}, headers=auth(key))
        assert lexical.json()["items"] == []
        hybrid = api.post("/memory-query", json={"query": "保险柜密码"}, headers=auth(key)).json()["items"]
        assert doomed["memory_id"] not in [item["memory_id"] for item in hybrid]
        assert not any("保险柜" in item["content"] for item in hybrid)
        assert api.get(f"/memories/{kept['memory_id']}", headers=auth(key)).status_code == 200
        # The backup predates this write: restoring loses it, as restoring means.
        assert api.get(f"/memories/{after_delete['memory_id']}", headers=auth(key)).status_code == 404
        fresh = api.post("/memory-candidates", json=candidate("恢复之后的新记忆"), headers=auth(key)).json()
        assert api.get(f"/memories/{fresh['memory_id']}", headers=auth(key)).status_code == 200
        assert fresh["revision"] > after_delete["revision"]  # the sequence moved past the tombstones
    engine = make_engine(own_database.require_database_url(), pool_size=1)
    with tenant_session(engine, "acme") as session:
        content = session.execute(
            text("SELECT content FROM memories WHERE memory_id = :id"), {"id": doomed["memory_id"]}
        ).scalar_one()
        scrubbed_reply = session.execute(
            text("SELECT content, quote_start FROM memories WHERE memory_id = :id"), {"id": quoting["memory_id"]}
        ).one()
    engine.dispose()
    assert content == ""
    assert tuple(scrubbed_reply) == ("", None)


def test_restore_of_a_missing_archive_is_a_clear_error(own_database: Settings, tmp_path: Path) -> None:
    result = _mnemo(own_database, "restore", str(tmp_path / "nope.dump"))
    assert result.returncode == 1
    assert "no backup archive at" in result.stderr


def test_an_archive_from_an_older_schema_is_upgraded_before_it_goes_live(
    postgres: PostgresInfo, tmp_path: Path
) -> None:
    """An archive taken before migration 0008 comes back with the postings the current code reads."""
    with scratch_database(postgres, "mnemo_oldarchive") as url:
        engine = make_engine(url, pool_size=1)
        alices_memory(engine, "Alice keeps bees on the roof")
        engine.dispose()
        command.downgrade(alembic_config(url), "0007")
        archive = tmp_path / "old.dump"
        backup(url, archive)
        upgrade(url)
        restore(url, archive)
        engine = make_engine(url, pool_size=1)
        with tenant_session(engine, "acme") as session:
            postings = session.execute(text("SELECT lexeme FROM memory_lexemes ORDER BY lexeme")).scalars().all()
        engine.dispose()
    assert postings == ["alic", "bee", "keep", "on", "roof", "the"]


def test_a_restored_backup_forgets_every_layer_again_and_passes_the_residue_scan(
    own_database: Settings, own_worker: None, tmp_path: Path
) -> None:
    """Issue 23, finding 2: summaries, commits and their abstracts, records and their search rows came back."""
    engine = make_engine(own_database.require_database_url(), pool_size=1)
    with tenant_session(engine, "acme") as session:
        key = create_api_key(session, tenant_id="acme", user_id="alice", roles=["memory_writer"])
    engine.dispose()
    secret = "I live in Reykjavik near the old harbour"
    todo = {"title": "Renew the harbour parking permit", "status": "open"}
    archive = tmp_path / "mnemo.dump"
    with TestClient(create_app(own_database)) as api:
        api.post("/sessions", json={"session_id": "s-old"}, headers=auth(key))
        posted = api.post("/sessions/s-old/messages", json={"messages": [
            {"idempotency_key": "b1", "role": "user", "content": secret, "created_at": "2026-07-14T14:00:00+08:00"},
            {"idempotency_key": "b2", "role": "user", "content": "I prefer answers in Icelandic.",
             "created_at": "2026-07-14T14:01:00+08:00"}]}, headers=auth(key))
        assert posted.status_code in (200, 201), posted.text
        assert api.post("/sessions/s-old/commit", json={"commit_id": "c-old"}, headers=auth(key)).status_code == 202
        done = poll(api, key, "/sessions/s-old/commits/c-old", lambda b: b["status"].startswith("completed"), 120)
        assert "Reykjavik" in str(done["memories"])
        assert api.put("/records/todo/t-old", json={"data": todo}, headers=auth(key)).status_code in (200, 201)
        backed_up = _mnemo(own_database, "backup", "--out", str(archive))
        assert backed_up.returncode == 0, backed_up.stderr
        for scope in ({"type": "session", "session_id": "s-old"},
                      {"type": "record", "resource": "todo", "record_id": "t-old"}):
            accepted = api.post("/deletion-requests", json={"deletion_request_id": f"d-{uuid.uuid4().hex[:8]}",
                                                            "scope": scope}, headers=auth(key))
            assert accepted.status_code == 202, accepted.text
            job = wait_for(api, key, accepted.json()["job_id"], completed, timeout=120)
            assert job["fully_deleted"] is True, job

    restored = _mnemo(own_database, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr

    with TestClient(create_app(own_database)) as api:
        commit = api.get("/sessions/s-old/commits/c-old", headers=auth(key))
        assert commit.status_code == 404 or "Reykjavik" not in commit.text, commit.text
        assert api.get("/records/todo/t-old", headers=auth(key)).status_code == 404
    engine = make_engine(own_database.require_database_url(), pool_size=1)
    with tenant_session(engine, "acme") as session:
        for table in ("session_summaries", "session_commits", "memory_events", "memories", "memory_search",
                      "resource_records", "resource_search", "sessions"):
            rows = session.execute(text(f"SELECT * FROM {table}")).all()
            held = [row for row in rows if "reykjavik" in str(row).lower() or "parking permit" in str(row).lower()]
            assert held == [], (table, held)
        assert residue(session, "acme", own_database.artifact_root(engine)) == []
    engine.dispose()


def test_words_said_again_after_a_completed_deletion_do_not_stop_a_restore(
    own_database: Settings, own_worker: None, tmp_path: Path
) -> None:
    """Found by the wall: a deletion completes (its scan clean), then the subject says the same words again, then a
    backup is taken. Restoring it re-scanned that job's fingerprints over the later words, took them for a remnant
    and refused to go live. A job the archive holds as completed was verified before the archive: the later words
    are new. A job the archive predates is still scanned (the tests above)."""
    engine = make_engine(own_database.require_database_url(), pool_size=1)
    with tenant_session(engine, "acme") as session:
        key = create_api_key(session, tenant_id="acme", user_id="alice", roles=["memory_writer"])
    engine.dispose()
    words = "我家的备用钥匙藏在门口第三个花盆下面"
    archive = tmp_path / "mnemo.dump"
    with TestClient(create_app(own_database)) as api:
        first = api.post("/memory-candidates", json=candidate(words), headers=auth(key)).json()
        job = api.delete(f"/memories/{first['memory_id']}", headers=auth(key)).json()["job_id"]
        assert wait_for(api, key, job, completed, timeout=90)["fully_deleted"] is True
        again = api.post("/memory-candidates", json=candidate(f"再说一次：{words}"), headers=auth(key)).json()
        backed_up = _mnemo(own_database, "backup", "--out", str(archive))
        assert backed_up.returncode == 0, backed_up.stderr

    restored = _mnemo(own_database, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr + restored.stdout

    with TestClient(create_app(own_database)) as api:
        assert api.get(f"/memories/{first['memory_id']}", headers=auth(key)).status_code == 404
        assert api.get(f"/memories/{again['memory_id']}", headers=auth(key)).status_code == 200
