"""Console sessions in PostgreSQL: opened with an API key, ended by logout, by idleness or by the key.

The cookie holds a random session id; the table holds its sha256, so a read of the table gives no one a
session. The key's secret is never kept: every request judges the key again by its id
(:func:`memory.identity.auth.reauthenticate`), so a revoked or expired key ends its sessions at the next click.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine, delete, select

from memory.db import global_session
from memory.errors import Unauthorized
from memory.identity.auth import PrincipalContext, authenticate, now, reauthenticate
from memory.identity.console_sessions import ConsoleSession
from memory.resources.catalog import only_internal

COOKIE = "mnemo_console"
"""The session cookie's name (``__Host-`` prefixed over HTTPS: :func:`api.console.csrf.cookie`)."""


class SignedOut(Unauthorized):
    """No live console session: the person signs in (again)."""

    code = "signed_out"


@dataclass(frozen=True)
class Signed:
    """A live console session: who it acts as, and the token its forms must carry."""

    session_id: str
    principal: PrincipalContext
    csrf_token: str


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(engine: Engine, api_key: str) -> Signed:
    """Check ``api_key`` as the API does and open a session for it (401 for a bad key; 403 for a public client's
    key, which reads the public resource catalog only)."""
    with global_session(engine) as session:
        principal = authenticate(session, api_key.strip())
        only_internal(principal, "the console")
        session_id, csrf_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        session.add(ConsoleSession(session_sha256=_digest(session_id), key_id=principal.key_id, csrf_token=csrf_token))
    return Signed(session_id, principal, csrf_token)


def resume_session(engine: Engine, session_id: str | None, idle: timedelta) -> Signed:
    """The live session of the cookie ``session_id``, its key judged again and its idle clock restarted.

    A session found idle or with a dead key is deleted (committed) before :class:`SignedOut` is raised."""
    if not session_id:
        raise SignedOut("you are not signed in")
    ended: str | None = None
    with global_session(engine) as session:
        row = session.execute(
            select(ConsoleSession).where(ConsoleSession.session_sha256 == _digest(session_id)).with_for_update()
        ).scalar_one_or_none()
        if row is None:
            raise SignedOut("your session has ended (you signed out, or it was closed)")
        at = now()
        if row.last_seen_at + idle <= at:
            ended = f"your session ended after {idle.total_seconds() / 60:g} minutes without use"
        else:
            try:
                principal = reauthenticate(session, row.key_id)
            except Unauthorized as exc:
                ended = f"your session ended: {exc.message}"
        if ended is not None:
            session.delete(row)
        else:
            row.last_seen_at = at
    if ended is not None:
        raise SignedOut(ended)
    return Signed(session_id, principal, row.csrf_token)


def tenant_of_session(engine: Engine, session_id: str) -> str | None:
    """The tenant a live console session acts for, or None; reads only (admission asks before the route, which
    then resumes the session, restarts its idle clock or ends it)."""
    with global_session(engine) as session:
        key_id = session.execute(
            select(ConsoleSession.key_id).where(ConsoleSession.session_sha256 == _digest(session_id))
        ).scalar_one_or_none()
        if key_id is None:
            return None
        try:
            return reauthenticate(session, key_id).tenant_id
        except Unauthorized:
            return None


def close_session(engine: Engine, session_id: str) -> None:
    """Logout: the session row goes, so the cookie opens nothing any more."""
    with global_session(engine) as session:
        session.execute(delete(ConsoleSession).where(ConsoleSession.session_sha256 == _digest(session_id)))
