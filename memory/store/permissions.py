"""Who may do what to a memory: one table, consulted by every write path.

Visibility (:func:`memory.store.memories.visible_to`) decides whether a caller may know a memory
exists (if not: a 404); this table decides, for a memory they can see, whether their roles allow
the action (if not: a 403). Issue 12 found the write paths deciding this each on their own: a key
with no roles deleted a tenant-wide memory, and a ``memory_writer`` corrected, expired and
confirmed memories only admins may write.

- Personal memories (``USER``, ``SESSION``) belong to the person: anyone may submit one (it stays a
  CANDIDATE without ``memory_writer``, :func:`memory.store.memories.initial_status`) and anyone may delete
  their own, whatever their roles; changing one's status or content needs ``memory_writer``.
- ``AGENT`` memories are the agent's working knowledge: submitting needs a credential bound to the
  agent; everything else needs ``memory_writer``.
- Shared memories (``TENANT``, ``SYSTEM``) speak for the whole tenant: every action needs ``admin``.

``admin`` holds every role (:meth:`memory.identity.auth.PrincipalContext.has`).
"""

from __future__ import annotations

from enum import StrEnum

from memory.enums import Role, Space
from memory.errors import Forbidden
from memory.identity.auth import PrincipalContext


class MemoryAction(StrEnum):
    CREATE = "create"
    CONFIRM = "confirm"
    CORRECT = "correct"
    EXPIRE = "expire"
    DELETE = "delete"


_PERSONAL: dict[MemoryAction, Role | None] = {
    MemoryAction.CREATE: None,
    MemoryAction.CONFIRM: Role.MEMORY_WRITER,
    MemoryAction.CORRECT: Role.MEMORY_WRITER,
    MemoryAction.EXPIRE: Role.MEMORY_WRITER,
    MemoryAction.DELETE: None,
}
_AGENT: dict[MemoryAction, Role | None] = {
    **{action: Role.MEMORY_WRITER for action in MemoryAction},
    MemoryAction.CREATE: None,
}
_SHARED: dict[MemoryAction, Role | None] = {action: Role.ADMIN for action in MemoryAction}

REQUIRED_ROLE: dict[Space, dict[MemoryAction, Role | None]] = {
    Space.USER: _PERSONAL,
    Space.SESSION: _PERSONAL,
    Space.AGENT: _AGENT,
    Space.TENANT: _SHARED,
    Space.SYSTEM: _SHARED,
}
"""The role an action on a memory of a space needs (None: none beyond seeing it)."""

_VERBS = {
    MemoryAction.CREATE: "writing",
    MemoryAction.CONFIRM: "confirming",
    MemoryAction.CORRECT: "correcting",
    MemoryAction.EXPIRE: "expiring",
    MemoryAction.DELETE: "deleting",
}


def require(principal: PrincipalContext, action: MemoryAction, space: Space | str) -> None:
    """Raise :class:`Forbidden` unless ``principal``'s roles allow ``action`` on a memory of ``space``."""
    space = Space(space)
    role = REQUIRED_ROLE[space][action]
    if role is not None and not principal.has(role):
        raise Forbidden(
            f"{_VERBS[action]} a {space.value} space memory needs the {role.value} role",
            details={"action": action.value, "space": space.value, "required_role": role.value},
        )
