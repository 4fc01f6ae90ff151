"""Audiences: who may see a memory, as one key, so that an index can be split by it.

:func:`memory.store.visibility.visible_to` decides visibility row by row. The full-text postings
(``memory_lexemes``, migration 0009) are keyed by the audience first, so a caller walks
only the postings of the audiences they belong to (:func:`audiences_of`): a user with a
few memories in a tenant of a million no longer reads the other users' postings of a
common word, one by one, to find their own (~0.5 s a query, seconds for some, measured
before this split). The hard filters still decide every row; an audience only bounds
what is read. A test checks that the two agree for every space.
"""

from __future__ import annotations

from memory.enums import Space
from memory.identity.auth import PrincipalContext

SHARED_SPACES = (Space.SYSTEM.value, Space.TENANT.value)
"""Spaces whose memories every principal of the tenant may see."""

SHARED = ""
"""The audience of a shared memory: everyone in the tenant."""


def audience(space: str, owner_id: str, session_id: str | None) -> str:
    """The audience of a memory: :data:`SHARED`, ``SPACE:owner``, or ``SESSION:owner/session`` for a session memory.

    A session memory is seen only within its session, so each session is an audience of its own:
    an agent's many past sessions are never walked for the current one. Two owners whose ids
    would spell the same key share a posting list; that costs only reading, never visibility.
    """
    if space in SHARED_SPACES:
        return SHARED
    if space == Space.SESSION.value:
        return f"{space}:{owner_id}/{session_id or ''}"
    return f"{space}:{owner_id}"


def audiences_of(principal: PrincipalContext, session_id: str | None) -> list[str]:
    """Every audience whose memories :func:`memory.store.visibility.visible_to` may show ``principal``."""
    found = [SHARED, audience(Space.USER.value, principal.user_id, None)]
    if session_id is not None:
        found.append(audience(Space.SESSION.value, principal.user_id, session_id))
    if principal.agent_id is not None:
        found.append(audience(Space.AGENT.value, principal.agent_id, None))
    return found
