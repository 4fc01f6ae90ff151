"""The embedded default artifact store: bytes in PostgreSQL, in rows of :data:`CHUNK_BYTES` (migration 0024).

Every replica and worker that reaches the database reads them, and ``mnemo backup`` dumps them with the rows that
name them. A put is one transaction (the object row and all its chunks, or nothing); a read fetches one chunk
per statement, so a large artifact is never whole in memory. The tables have no tenant column: namespaces
(``records/<tenant hash>``) keep tenants apart, and only this module reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlalchemy import Engine, text

from memory.artifact_store import CHUNK_BYTES, ArtifactStore, Stored, check_digest, join, missing, sha256_hex, verified
from memory.db import engine_recipe, shared_engine


class PostgresArtifactStore:
    def __init__(self, engine: Engine, namespace: str = "") -> None:
        self.engine = engine
        self.namespace = namespace

    def __reduce__(self) -> tuple[Callable[[str, float | None, str], PostgresArtifactStore],
                                  tuple[str, float | None, str]]:
        """Sent to a CPU pool process (:mod:`memory.offload`) as its engine's recipe: an engine does not travel."""
        return _store_at, (*engine_recipe(self.engine), self.namespace)

    def within(self, namespace: str) -> ArtifactStore:
        return PostgresArtifactStore(self.engine, join(self.namespace, namespace))

    def _where(self) -> str:
        return f"the PostgreSQL artifact store (namespace {self.namespace!r})"

    def put(self, content: bytes) -> str:
        sha = sha256_hex(content)
        chunks = [content[at:at + CHUNK_BYTES] for at in range(0, len(content), CHUNK_BYTES)]
        key = {"ns": self.namespace, "sha": sha}
        with self.engine.begin() as conn:
            # A concurrent put of the same bytes waits here on the key, then finds them and writes nothing.
            created = conn.execute(text(
                "INSERT INTO artifact_objects (namespace, sha256, size_bytes, chunk_count) "
                "VALUES (:ns, :sha, :size, :count) ON CONFLICT DO NOTHING RETURNING 1"),
                {**key, "size": len(content), "count": len(chunks)}).first()
            for seq, chunk in enumerate(chunks if created else []):
                conn.execute(text("INSERT INTO artifact_chunks (namespace, sha256, seq, data) "
                                  "VALUES (:ns, :sha, :seq, :data)"), {**key, "seq": seq, "data": chunk})
        return sha

    def open(self, sha256: str) -> Iterator[bytes]:
        key = {"ns": self.namespace, "sha": check_digest(sha256)}
        with self.engine.connect() as conn:
            count = conn.execute(text("SELECT chunk_count FROM artifact_objects WHERE namespace = :ns AND "
                                      "sha256 = :sha"), key).scalar_one_or_none()
        if count is None:
            raise missing(sha256, self._where())
        return verified(sha256, self._chunks(key, int(count)), self._where())

    def _chunks(self, key: dict[str, str], count: int) -> Iterator[bytes]:
        for seq in range(count):
            with self.engine.connect() as conn:  # one chunk per checkout: a slow reader holds no connection
                data = conn.execute(text("SELECT data FROM artifact_chunks WHERE namespace = :ns AND sha256 = :sha "
                                         "AND seq = :seq"), {**key, "seq": seq}).scalar_one_or_none()
            if data is None:  # deleted while being read
                raise missing(key["sha"], self._where())
            yield bytes(data)

    def exists(self, sha256: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(text("SELECT 1 FROM artifact_objects WHERE namespace = :ns AND sha256 = :sha"),
                                {"ns": self.namespace, "sha": check_digest(sha256)}).first() is not None

    def delete(self, sha256: str) -> bool:
        with self.engine.begin() as conn:  # the chunks go with their object (ON DELETE CASCADE)
            return conn.execute(text("DELETE FROM artifact_objects WHERE namespace = :ns AND sha256 = :sha "
                                     "RETURNING 1"), {"ns": self.namespace, "sha": check_digest(sha256)}
                                ).first() is not None

    def list(self) -> Iterator[Stored]:
        with self.engine.connect() as conn:
            rows = conn.execute(text("SELECT sha256, size_bytes, created_at FROM artifact_objects "
                                     "WHERE namespace = :ns ORDER BY sha256"), {"ns": self.namespace}).all()
        return iter([Stored(str(sha), int(size), written) for sha, size, written in rows])


__all__ = ["PostgresArtifactStore"]


def _store_at(database_url: str, statement_timeout_seconds: float | None, namespace: str) -> PostgresArtifactStore:
    return PostgresArtifactStore(shared_engine(database_url, statement_timeout_seconds), namespace)
