"""The artifact store interface, the same tests for both implementations: PostgreSQL (the embedded default, on
the real embedded server) and S3 (against the moto S3 server: a labelled stand-in for MinIO, see conftest)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, text
from typer.testing import CliRunner

import api.cli.app
from activities.stores import Publication, StoredDestination
from api.settings import Settings
from memory.artifact_store import (
    CHUNK_BYTES,
    ArtifactStore,
    ArtifactStoreUnavailable,
    ArtifactUnavailable,
    read,
    sha256_hex,
)
from memory.artifact_store.postgres import PostgresArtifactStore
from memory.artifact_store.s3 import S3ArtifactStore, S3Location
from memory.db import make_engine
from memory.legacy_artifacts import import_data_dir, pending
from memory.resources.bodies import record_store
from memory.tasks.artifacts import task_store
from tests.conftest import s3_settings


@pytest.fixture(params=["postgres", "s3"])
def store(request: pytest.FixtureRequest, engine: Engine, settings: Settings) -> Iterator[ArtifactStore]:
    """A fresh namespace of each implementation, built from settings as the API and the worker build theirs."""
    chosen = settings if request.param == "postgres" else s3_settings(settings, request.getfixturevalue("s3_standin"))
    yield chosen.artifact_root(engine).within(f"test-{uuid.uuid4().hex[:12]}")


def test_put_is_idempotent_and_content_addressed(store: ArtifactStore) -> None:
    content = "月报 draft ✓".encode()
    sha = store.put(content)
    assert sha == sha256_hex(content) and store.put(content) == sha
    assert store.exists(sha) and read(store, sha) == content
    assert [(s.sha256, s.size_bytes) for s in store.list()] == [(sha, len(content))]
    assert store.delete(sha) and not store.exists(sha) and not store.delete(sha)
    assert list(store.list()) == []


def test_namespaces_do_not_mix(store: ArtifactStore) -> None:
    below, other = store.within("a"), store.within("b")
    sha = below.put(b"only in a")
    assert not other.exists(sha) and not store.exists(sha)
    assert [s.sha256 for s in below.list()] == [sha] and list(store.list()) == [] and list(other.list()) == []


def test_a_large_artifact_is_read_chunk_by_chunk(store: ArtifactStore) -> None:
    content = bytes(range(256)) * (5 * CHUNK_BYTES // 256) + b"tail"
    sha = store.put(content)
    chunks = store.open(sha)
    first = next(chunks)  # the first chunk arrives before the rest is read: nothing holds the whole artifact
    assert 0 < len(first) <= CHUNK_BYTES
    rest = list(chunks)
    assert all(len(chunk) <= CHUNK_BYTES for chunk in rest) and len(rest) >= 5
    assert first + b"".join(rest) == content


def test_missing_bytes_are_a_typed_error_before_anything_is_read(store: ArtifactStore) -> None:
    absent = sha256_hex(b"never stored")
    with pytest.raises(ArtifactUnavailable) as missing:
        store.open(absent)
    assert missing.value.code == "artifact_unavailable" and "mnemo import-artifacts" in missing.value.message
    with pytest.raises(ValueError, match="not a sha256"):
        store.exists("../../etc/passwd")


def test_corrupted_bytes_are_never_served_as_whole(engine: Engine) -> None:
    store = PostgresArtifactStore(engine).within(f"test-{uuid.uuid4().hex[:12]}")
    sha = store.put(b"x" * (CHUNK_BYTES + 10))
    with engine.begin() as conn:
        conn.execute(text("UPDATE artifact_chunks SET data = :d WHERE namespace = :ns AND sha256 = :sha AND seq = 1"),
                     {"d": b"y" * 10, "ns": store.namespace, "sha": sha})
    with pytest.raises(ArtifactUnavailable, match="corrupted"):
        read(store, sha)
    passed: list[bytes] = []
    with pytest.raises(ArtifactUnavailable, match="corrupted"):
        passed.extend(store.open(sha))  # as a download streams it: the last chunk is held back, never passed on
    assert len(passed) == 1 and sum(map(len, passed)) < CHUNK_BYTES + 10
    small = store.put(b"one chunk only")
    with engine.begin() as conn:
        conn.execute(text("UPDATE artifact_chunks SET data = :d WHERE namespace = :ns AND sha256 = :sha"),
                     {"d": b"one chunk on1y", "ns": store.namespace, "sha": small})
    passed.clear()
    with pytest.raises(ArtifactUnavailable, match="corrupted"):
        passed.extend(store.open(small))
    assert passed == []  # an artifact of one chunk sends no byte


def test_an_object_store_that_cannot_be_reached_stops_the_process_naming_it(
    settings: Settings, engine: Engine, s3_standin: S3Location
) -> None:
    wrong = s3_settings(settings, s3_standin, artifact_s3_bucket="no-such-bucket")
    with pytest.raises(ArtifactStoreUnavailable, match="no-such-bucket") as unavailable:
        wrong.artifact_root(engine)
    assert (unavailable.value.http_status, unavailable.value.details) == (503, {"retry_after_seconds": 5})
    with pytest.raises(ValidationError, match="MNEMO_ARTIFACT_S3_BUCKET"):
        Settings(artifact_store="s3")
    with pytest.raises(ValidationError, match="must end with '/'"):
        Settings(artifact_store="s3", artifact_s3_bucket="b", artifact_s3_prefix="mnemo")


def test_s3_keys_are_prefixed_and_sharded(s3_standin: S3Location) -> None:
    store = S3ArtifactStore(s3_standin).within("tasks")
    sha = store.put(b"chart")
    keys = [o["Key"] for o in s3_standin.client().list_objects_v2(Bucket=s3_standin.bucket,
                                                                  Prefix="mnemo/tasks/")["Contents"]]
    assert f"mnemo/tasks/{sha[:2]}/{sha}" in keys


def test_an_old_data_dir_is_moved_into_the_store_once(tmp_path: Path, engine: Engine) -> None:
    """Files of the directory stores (before issue 24) move in, checked, and leave the disk; a file whose bytes
    do not match its name stays for the operator."""
    root = PostgresArtifactStore(engine).within(f"test-{uuid.uuid4().hex[:12]}")
    tenant = "acme"
    chart, body = b"PNG chart bytes", b"{\"long\":\"transcript\"}"
    tenant_dir = tmp_path / "record-artifacts" / sha256_hex(tenant.encode())
    for folder, content in ((tmp_path / "artifacts", chart), (tenant_dir, body)):
        sha = sha256_hex(content)
        (folder / sha[:2]).mkdir(parents=True)
        (folder / sha[:2] / sha).write_bytes(content)
    bad = tmp_path / "artifacts" / "ab" / ("ab" + "0" * 62)
    bad.parent.mkdir()
    bad.write_bytes(b"half a write")
    assert pending(tmp_path)

    imported = import_data_dir(tmp_path, root)
    assert (imported.moved, imported.bytes, imported.left) == (2, len(chart) + len(body), [bad])
    assert read(task_store(root), sha256_hex(chart)) == chart
    assert read(record_store(root, tenant), sha256_hex(body)) == body
    assert not (tmp_path / "record-artifacts").exists() and bad.exists()
    assert import_data_dir(tmp_path, root).moved == 0


def test_import_artifacts_moves_an_old_data_dirs_publications_so_reconciliation_still_finds_them(
    tmp_path: Path, engine: Engine, settings: Settings
) -> None:
    """`mnemo import-artifacts`: a publication a directory destination kept (files, publication.json, the
    by-operation index) is found by its operation afterwards, so a task reconciling it never publishes twice."""
    destination = f"reports-{uuid.uuid4().hex[:8]}"
    key, operation = f"publish:t:{uuid.uuid4().hex}:reports", f"op-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "publications" / destination
    key_hash = sha256_hex(key.encode())[:40]
    (folder / "published" / key_hash).mkdir(parents=True)
    (folder / "published" / key_hash / "report.html").write_bytes(b"<h1>June</h1>")
    (folder / "published" / key_hash / "publication.json").write_text(json.dumps(
        {"artifact_sha256": "d" * 64, "idempotency_key": key, "operation_id": operation}))
    (folder / "by-operation").mkdir()
    (folder / "by-operation" / operation).write_text(key_hash)
    (folder / "by-operation" / "op-retried").write_text(key_hash)

    env = {"MNEMO_DATABASE_URL": settings.require_database_url(), "MNEMO_ARTIFACT_STORE": "postgres"}
    done = CliRunner().invoke(api.cli.app.app, ["import-artifacts", str(tmp_path)], env=env)
    assert done.exit_code == 0, done.output
    assert "1 publication(s)" in done.output and not (tmp_path / "publications").exists()
    stored = StoredDestination(destination, engine, settings.artifact_root(engine))
    assert stored.lookup(operation) == stored.lookup("op-retried") == Publication(
        key_hash, f"publications/{destination}/{key_hash}", operation, False)
    [published] = stored.all_publications()
    assert stored.read(published, "report.html") == b"<h1>June</h1>"
    assert published.metadata == {"artifact_sha256": "d" * 64, "idempotency_key": key, "operation_id": operation}


def test_the_postgres_store_has_a_pool_of_its_own(settings: Settings) -> None:
    """Its callers hold a connection of their engine (a request's transaction) while they read or write bytes: on
    the same pool, as many callers as it has connections each waited for a second one until the pool timed out."""
    caller = make_engine(settings.require_database_url(), pool_size=1)  # one connection, and one more at a peak
    store = settings.model_copy(update={"artifact_store": "postgres"}).artifact_root(caller).within(
        f"test-{uuid.uuid4().hex[:12]}")
    try:
        with caller.connect(), caller.connect():  # every connection of the caller's pool in use
            sha = store.put(b"written while the caller's pool is taken")
            assert read(store, sha) == b"written while the caller's pool is taken"
            assert store.exists(sha) and store.delete(sha)
    finally:
        caller.dispose()
