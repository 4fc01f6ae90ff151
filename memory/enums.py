"""The closed vocabularies of the memory model (seed 004 §5.3 and §6, seed 003 §6.2)."""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    """The eight memory categories: four about a user, four about an agent."""

    PROFILE = "PROFILE"
    PREFERENCE = "PREFERENCE"
    ENTITY = "ENTITY"
    EVENT = "EVENT"
    CASE = "CASE"
    PATTERN = "PATTERN"
    TOOL_EXPERIENCE = "TOOL_EXPERIENCE"
    SKILL_EXECUTION = "SKILL_EXECUTION"


class Space(StrEnum):
    """Who a memory belongs to; decides its owner and who may see it."""

    SYSTEM = "SYSTEM"
    TENANT = "TENANT"
    AGENT = "AGENT"
    USER = "USER"
    SESSION = "SESSION"


class Status(StrEnum):
    CANDIDATE = "CANDIDATE"
    ACTIVE = "ACTIVE"
    SUPERSEDED = "SUPERSEDED"
    EXPIRED = "EXPIRED"
    REVOKED = "REVOKED"
    DELETED = "DELETED"


class SourceLevel(StrEnum):
    """How the fact reached us: E1 asked to remember, E2 stated, E3 stable choice, E4 model inference."""

    E1 = "E1"
    E2 = "E2"
    E3 = "E3"
    E4 = "E4"


class EventKind(StrEnum):
    MESSAGE = "MESSAGE"
    TOOL_RESULT = "TOOL_RESULT"
    TASK_EVENT = "TASK_EVENT"


class Role(StrEnum):
    """Roles a credential may hold. The admin key ``mnemo dev`` writes holds :data:`DEV_ADMIN_ROLES`."""

    ADMIN = "admin"
    MEMORY_WRITER = "memory_writer"
    APPROVER = "approver"
    OPERATOR = "operator"
    AUDITOR = "auditor"
    PUBLIC_CLIENT = "public_client"
    """An external (MCP) client's key: it reads the public resource catalog only (memory.resources.catalog)."""
    AGENT_RUNTIME = "agent_runtime"
    """The trusted runtime that registers an agent's runs (memory.resources.runs); its reads must name a run."""
    KNOWLEDGE_REVIEWER = "knowledge_reviewer"
    """A person who approves, rejects or sends back knowledge candidates (memory.knowledge.review)."""


DEV_ADMIN_ROLES = tuple(role for role in Role if role is not Role.PUBLIC_CLIENT)
"""The roles of the admin key ``mnemo dev`` writes: every role but ``public_client``, an external client's role
that an admin never holds (its listing would say the key is one)."""


USER_CATEGORIES = frozenset({Category.PROFILE, Category.PREFERENCE, Category.ENTITY, Category.EVENT})
"""Categories seed 004 places in the USER space; the agent ones live in AGENT space."""
