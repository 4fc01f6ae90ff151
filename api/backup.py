"""``mnemo backup`` and ``mnemo restore``: pg_dump / pg_restore, with deletions re-applied and verified.

A restore never exposes un-reapplied data: the archive is restored into a side
database, the live database's deletions (jobs, tombstones, fingerprints) are copied
in and every job is purged again there by the workflow's own purge code
(:mod:`memory.deletion.reapply`); the residue scan must then find no copy of any
deleted text, and only then are the two swapped (renamed) in one step. A copy
found stops the restore before the swap: the live database is untouched. The
revision sequence is moved past both, so tombstones keep covering exactly what
they covered.

The artifact store goes with the database it describes. The PostgreSQL store (the default) is in the dump:
a restore brings back the bytes its rows name, and the re-applied purge and the scan work on the side
database's own store. An object store (``MNEMO_ARTIFACT_STORE=s3``) is not in the dump: its bucket is the
operator's to back up (versioning, or a replica bucket) and to roll back to the dump's time; the re-applied
purge deletes the restored deletions' bodies from the live bucket, and the scan reads it (README, "Backup").
"""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from api.devstack.postgres import POSTGRES_BIN_PATH
from api.settings import Settings
from memory.artifact_store import ArtifactStore
from memory.artifact_store.postgres import PostgresArtifactStore
from memory.db import make_engine, tenant_session
from memory.deletion.reapply import Carried, export_deletions, reapply, residue, verified_in_backup
from migrations import upgrade


class BackupError(RuntimeError):
    pass


def _libpq(url: str, database: str | None = None) -> str:
    """A libpq URL (what pg_dump and psycopg take) from a SQLAlchemy one."""
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def _run(args: list[str]) -> None:
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise BackupError(f"{Path(args[0]).name} failed: {result.stderr.strip() or result.stdout.strip()}")


def backup(url: str, archive: Path) -> None:
    """A custom-format dump of the whole mnemo database (restorable with ``mnemo restore``)."""
    _run([str(POSTGRES_BIN_PATH / "pg_dump"), "--format=custom", "--no-owner", f"--file={archive}", _libpq(url)])


@dataclass(frozen=True)
class RestoreReport:
    tenants: int
    tombstones: int
    rows_scrubbed: int


def _live_deletions(url: str) -> tuple[dict[str, Carried], int]:
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            tenants = connection.execute(text("SELECT tenant_id FROM tenants")).scalars().all()
            revision = int(connection.execute(text("SELECT last_value FROM mnemo_revision_seq")).scalar_one())
        records: dict[str, Carried] = {}
        for tenant in tenants:
            with tenant_session(engine, tenant) as session:
                records[tenant] = export_deletions(session, tenant)
        return records, revision
    finally:
        engine.dispose()


def _rename_when_idle(conn: psycopg.Connection[tuple[object, ...]], old: str, new: str, timeout: float = 10) -> None:
    """Terminated sessions take a moment to go; retry the rename (bounded) until they have."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(new)))
            return
        except psycopg.errors.ObjectInUse as exc:
            if time.monotonic() > deadline:
                raise BackupError(
                    f"database {old} is still in use after {timeout:.0f}s; stop the API and retry"
                ) from exc
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (old,),
            )
            time.sleep(0.1)


def _store(settings: Settings, side: Engine) -> ArtifactStore:
    """The artifact store of the restored database: its own (PostgreSQL), or the live bucket."""
    return PostgresArtifactStore(side) if settings.artifact_store == "postgres" else settings.artifact_root(side)


def restore(url: str, archive: Path, settings: Settings | None = None) -> RestoreReport:
    """Restore ``archive``; ``settings`` name the artifact store the re-applied purge and the scan reach."""
    settings = settings if settings is not None else Settings()
    if not archive.is_file():
        raise BackupError(f"no backup archive at {archive}")
    live = make_url(url).database
    assert live, "the database URL names no database"
    side = f"{live}_restoring"
    admin = _libpq(url, "postgres")
    tombstones, live_revision = _live_deletions(url)

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(side)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(side)))
    _run([str(POSTGRES_BIN_PATH / "pg_restore"), "--no-owner", f"--dbname={_libpq(url, side)}", str(archive)])

    side_url = make_url(url).set(database=side).render_as_string(hide_password=False)
    upgrade(side_url)  # an archive from an older version: today's schema before today's code touches it
    engine = make_engine(side_url, pool_size=1)
    store = _store(settings, engine)
    scrubbed = 0
    verified: dict[str, set[uuid.UUID]] = {}
    try:
        for tenant, records in tombstones.items():
            with tenant_session(engine, tenant) as session:
                verified[tenant] = verified_in_backup(session, tenant)
                scrubbed += reapply(session, tenant, records, store)
        for tenant in tombstones:  # after the purges committed: the scan reads what the restored database holds
            with tenant_session(engine, tenant) as session:
                copies = residue(session, tenant, store, verified[tenant])
            if copies:
                raise BackupError(
                    f"the restored database still holds {len(copies)} copy(ies) of deleted data in tenant {tenant!r} "
                    f"({', '.join(c.label for c in copies[:10])}); it was not put live (side database {side})"
                )
    finally:
        engine.dispose()
    with psycopg.connect(_libpq(url, side), autocommit=True) as conn:  # as the owner: setval needs UPDATE
        conn.execute(
            "SELECT setval('mnemo_revision_seq', greatest(%s, (SELECT last_value FROM mnemo_revision_seq)))",
            (live_revision,),
        )

    replaced = f"{live}_replaced_{int(time.time())}"
    with psycopg.connect(admin, autocommit=True) as conn:
        # No new sessions on the old database, end the current ones, then swap names.
        conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(live)))
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (live,),
        )
        _rename_when_idle(conn, live, replaced)
        conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(side), sql.Identifier(live)))
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(replaced)))
    return RestoreReport(
        tenants=len(tombstones), tombstones=sum(len(r.tombstones) for r in tombstones.values()),
        rows_scrubbed=scrubbed
    )
