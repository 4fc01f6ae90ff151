"""Who may push a skill where: the tenant's skills are an admin's; an overlay is the key's own agent's, or any
agent's for an admin. The agent comes from the credential or, for an admin, from the request's target, never
from the pushed files."""

from __future__ import annotations

from memory.enums import Role
from memory.errors import InvalidInput
from memory.identity.auth import PrincipalContext, require_role
from memory.skills.layers import SkillSpace


def push_target(principal: PrincipalContext, space: SkillSpace, named_agent: str | None) -> str:
    """The agent id a push writes under ('' for TENANT), or the 403 / 422 that says why the caller may not."""
    if space is SkillSpace.TENANT:
        require_role(principal, Role.ADMIN, to="pushing a tenant skill")
        if named_agent is not None:
            raise InvalidInput("a TENANT skill belongs to no agent: leave out `agent`", code="agent_not_expected",
                               details={"field": "agent"})
        return ""
    if named_agent is not None and named_agent != principal.agent_id:
        require_role(principal, Role.ADMIN, to="pushing another agent's overlay")
        return named_agent
    if principal.agent_id is None:
        raise InvalidInput("this key is bound to no agent: use an agent's key, or an admin key with `agent` naming "
                           "the agent", code="agent_required", details={"field": "agent"})
    return principal.agent_id

