"""What one request may read (seed 000 §3.1): per resource type, the operations and the field paths left
after intersecting the run's frozen snapshot, the current policy and the audience's ceiling.

This module is the contract between who decides access (:mod:`memory.resources.runs`, which builds an
:class:`Access` per request) and who reads (the reader, the REST routes, the MCP tools), which only ever
consult an :class:`Access` and never re-derive it. A type with no readable field or no operation is not
in :attr:`Access.grants` at all, so it is absent from ``list()`` and unreachable by search and read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from memory.errors import NotFound
from memory.identity.auth import PrincipalContext
from memory.resources import pointers
from memory.resources.declarations import Audience, Declaration, Operation


@dataclass(frozen=True)
class Grant:
    """One resource type's share of an access: what may be done with it and which fields may be read."""

    resource: str
    operations: frozenset[Operation]
    fields: tuple[str, ...]
    """Field paths (JSON Pointers, ``*`` for array items), sorted; never empty in a grant that exists."""

    def reads(self, path: str) -> bool:
        """Whether the concrete or declared ``path`` lies under a granted field (its parent checked too)."""
        return any(pointers.covers(field, path) for field in self.fields)

    def fingerprint(self) -> str:
        """A short digest of the readable field set: a cursor issued under one set is refused under another."""
        return hashlib.sha256(json.dumps(sorted(self.fields)).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Access:
    """Who reads (identity from the key, the run from the trusted runtime) and what they may read now."""

    principal: PrincipalContext
    audience: Audience
    agent_id: str | None
    """The agent whose policy applies: the run's agent, else the key's own agent, else none (a user's own key)."""
    run_id: str | None
    grants: dict[str, Grant]

    def grant(self, resource: str, operation: Operation) -> Grant:
        """The grant to do ``operation`` on ``resource``; a type the caller may not use is a 404, the same one
        an undeclared type gets, so a refusal does not tell that the type exists."""
        grant = self.grants.get(resource)
        if grant is None or operation not in grant.operations:
            raise NotFound(f"no resource type {resource!r} you may {operation.value}", code="unknown_resource")
        return grant

    def may(self, operation: Operation) -> list[Grant]:
        """The grants that allow ``operation``, by type name (the order a cross-resource search visits them)."""
        return [grant for _, grant in sorted(self.grants.items()) if operation in grant.operations]


def intersect_fields(*field_sets: Iterable[str]) -> tuple[str, ...]:
    """The paths every set allows: a path of one set covered by a path of each other set survives, so
    ``{/participants}`` ∩ ``{/participants/*/display_name}`` is ``{/participants/*/display_name}``."""
    sets = [tuple(fields) for fields in field_sets]
    if not sets:
        return ()
    survivors: set[str] = set()
    for candidate in {path for fields in sets for path in fields}:
        if all(any(pointers.covers(path, candidate) for path in fields) for fields in sets):
            survivors.add(candidate)
    # A survivor under another survivor adds nothing: keep the widest paths that every set allows.
    survivors = {path for path in survivors
                 if not any(other != path and pointers.covers(other, path) for other in survivors)}
    return tuple(sorted(survivors))


def ceiling_grant(declaration: Declaration, audience: Audience) -> Grant | None:
    """The widest grant ``audience`` may ever have on a type: its declared operations and ceiling fields."""
    fields = declaration.ceilings.get(audience)
    if not fields:
        return None
    return Grant(declaration.type, declaration.operations, tuple(sorted(fields)))


def narrow(ceiling: Grant, *limits: Grant | None) -> Grant | None:
    """``ceiling`` ∩ each of ``limits`` (a snapshot's grant, a policy's); none when nothing is left."""
    operations, field_sets = ceiling.operations, [ceiling.fields]
    for limit in limits:
        if limit is None:
            return None
        operations &= limit.operations
        field_sets.append(limit.fields)
    fields = intersect_fields(*field_sets)
    if not operations or not fields:
        return None
    return Grant(ceiling.resource, operations, fields)
