"""Allowed scope: what the principal may read at all, from the credential plus the request's narrowing.

The request can only narrow (project, session, purpose, categories, spaces);
tenant, user and agent come from the API key and are applied by ``visible_to``.
"""

from __future__ import annotations

from memory.auth import PrincipalContext
from memory.enums import Category, Space
from memory.visibility import QueryFilters


def allowed_scope(
    principal: PrincipalContext,
    *,
    categories: tuple[Category, ...] = (),
    spaces: tuple[Space, ...] = (),
    project_id: str | None = None,
    session_id: str | None = None,
    purpose: str | None = None,
) -> QueryFilters:
    """The principal is the wall (``visible_to`` in :func:`memory.visibility.hard_filters`); these only narrow it."""
    del principal  # identity is applied by the hard filters themselves, never taken from the request
    return QueryFilters(categories, spaces, project_id, session_id, purpose)
