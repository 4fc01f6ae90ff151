"""Engines and tenant-scoped sessions.

Every application connection switches to the ``mnemo_app`` role, which row-level
security applies to, and every unit of work sets ``mnemo.tenant_id`` for its
transaction only. The tenant filter in each query is the first wall; RLS is the
second, so a query that forgets its filter still cannot cross tenants.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import CursorResult, Engine, Result, create_engine, event
from sqlalchemy.orm import Session

APP_ROLE = "mnemo_app"


def make_engine(url: str, *, pool_size: int = 10, statement_timeout_seconds: float | None = None) -> Engine:
    """An engine whose every connection acts as the RLS-bound application role.

    ``statement_timeout_seconds``: a statement running longer is cancelled (the API's bound: a slow
    statement must not hold a pooled connection that other tenants' requests wait for).
    """
    # hide_parameters: an error or a log line names the statement, never the values bound to it (memory text)
    engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _act_as_app_role(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET ROLE {APP_ROLE}")
            # psycopg prepares a statement after its fifth run, and PostgreSQL then switches to a generic
            # plan that ignores the values: for recall that meant sorting every distance of the tenant
            # (~180 ms at 100k memories) instead of walking the HNSW index (~1 ms). Plan each execution
            # for its own values; prepared statements still save the parsing.
            cursor.execute("SET plan_cache_mode = force_custom_plan")
            if statement_timeout_seconds is not None:
                cursor.execute(f"SET statement_timeout = {int(statement_timeout_seconds * 1000)}")
        dbapi_connection.commit()

    _TIMEOUTS[engine] = statement_timeout_seconds
    return engine


_TIMEOUTS: weakref.WeakKeyDictionary[Engine, float | None] = weakref.WeakKeyDictionary()
_SHARED: dict[tuple[str, float | None, int], Engine] = {}
_SHARED_LOCK = threading.Lock()


def engine_recipe(engine: Engine) -> tuple[str, float | None]:
    """What makes the same engine in another process (:func:`shared_engine`): its URL and statement timeout."""
    return engine.url.render_as_string(hide_password=False), _TIMEOUTS.get(engine)


def shared_engine(url: str, statement_timeout_seconds: float | None = None, *, pool_size: int = 1) -> Engine:
    """One engine per database URL, statement timeout and pool size for this process, made once: what a CPU pool
    process (:mod:`memory.offload`) connects with across the many calls it serves, bound as its caller's engine is,
    and the PostgreSQL artifact store's pool of its own (:meth:`api.settings.Settings.artifact_root`)."""
    with _SHARED_LOCK:
        key = (url, statement_timeout_seconds, pool_size)
        if key not in _SHARED:
            _SHARED[key] = make_engine(url, pool_size=pool_size, statement_timeout_seconds=statement_timeout_seconds)
        return _SHARED[key]


def affected_rows(result: Result[Any]) -> int:
    """How many rows an INSERT, UPDATE or DELETE touched. ``Session.execute`` is typed as returning a
    ``Result``; for such a statement it is a ``CursorResult``, the only kind that carries ``rowcount``."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"expected the result of an INSERT, UPDATE or DELETE, got a {type(result).__name__}")
    return result.rowcount


@contextmanager
def tenant_session(engine: Engine, tenant_id: str) -> Iterator[Session]:
    """One transaction in ``tenant_id``'s context: committed on success, rolled back on error."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        enter_tenant(session, tenant_id)
        yield session


def enter_tenant(session: Session, tenant_id: str) -> None:
    """Act in ``tenant_id``'s context for the rest of the session's transaction (RLS reads the setting)."""
    set_local(session, "mnemo.tenant_id", tenant_id)


def set_local(session: Session, name: str, value: str) -> None:
    """``SET LOCAL name = value``: a setting for the rest of the transaction, as ``set_config(..., true)`` would, but
    a command: on a Citus cluster (``citus.propagate_set_commands = local``, memory/distribution.py) the coordinator
    passes it on to the workers holding the shards a statement reads, where row-level security reads it; a
    function call it would not. Both are quoted by psycopg for this connection and sent with no parameters (a SET
    takes none)."""
    from psycopg import sql

    connection = session.connection()
    statement = sql.SQL("SET LOCAL {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value))
    connection.exec_driver_sql(statement.as_string(connection.connection.driver_connection),
                               execution_options={"no_parameters": True})


@contextmanager
def global_session(engine: Engine) -> Iterator[Session]:
    """A transaction with no tenant context: sees only the global tables (tenants, API keys)."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session


_CONNECTION_SQLSTATES = ("57P01", "57P02", "57P03")  # admin / crash shutdown, cannot connect now


def is_connection_failure(exc: BaseException) -> bool:
    """A lost or refused database connection, as opposed to an error of the statement itself.

    The API answers it with a 503 and report steps retry it without counting an attempt: an outage
    says nothing about the request or the step.
    """
    import psycopg
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig if exc.orig is not None else exc
    if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _CONNECTION_SQLSTATES
