"""The catalog: every declared resource type, loaded and cross-checked once when the process starts.

The nine built-in types of seed 000 §2 live in ``builtin/*.json``; a deployment may add its own from a
directory (``MNEMO_RESOURCE_DECLARATIONS_DIR``). Checks across declarations: a type declared twice, a
ref to an undeclared type, and a ref an audience may read pointing at a type that audience may not see
(the ref would name what the audience is not to know exists).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from memory.enums import Role
from memory.errors import Forbidden, NotFound
from memory.identity.auth import PrincipalContext
from memory.resources import pointers
from memory.resources.declarations import Audience, Declaration, DeclarationError, parse_declaration

BUILTIN = Path(__file__).with_name("builtin")


@dataclass(frozen=True)
class Catalog:
    declarations: dict[str, Declaration]

    def get(self, resource: str) -> Declaration:
        """The declaration of ``resource``; an undeclared type is a 404 naming the declared ones."""
        declaration = self.declarations.get(resource)
        if declaration is None:
            raise NotFound(
                f"no resource type {resource!r}; declared: {', '.join(sorted(self.declarations))}",
                code="unknown_resource",
            )
        return declaration

    def visible_to(self, audience: Audience) -> list[Declaration]:
        """The types ``audience`` may see at all (its ceiling names at least one field), by name."""
        return [d for _, d in sorted(self.declarations.items()) if audience in d.ceilings]


def audience_of(principal: PrincipalContext) -> Audience:
    """A key holding ``public_client`` reads as the public audience (external MCP clients, seed 000 §3).

    Checked by name, not with :func:`memory.identity.auth.holds`: ``admin`` "holds every role", and an admin
    is not narrowed to the public catalog (``mnemo dev``'s admin key is created with every role name).
    """
    if Role.PUBLIC_CLIENT.value in principal.roles and Role.ADMIN.value not in principal.roles:
        return Audience.PUBLIC
    return Audience.INTERNAL


def only_internal(principal: PrincipalContext, action: str) -> None:
    """Refuse ``action`` to the public audience: an external client's key reads the public catalog (list,
    search, read, and the MCP tools over them) and nothing else of the user's — not their memories, sessions,
    tasks or records' write side, whatever other roles the key was given."""
    if audience_of(principal) is Audience.PUBLIC:
        raise Forbidden(
            f"a public_client key reads the public resource catalog only (GET /resources, GET /resources/{{type}},"
            f" POST /resources/search, POST /resources/read, /mcp); {action} needs one of the user's own keys"
        )


def load_catalog(extra: Path | None = None) -> Catalog:
    """The built-in declarations and those of ``extra`` (every ``*.json`` in it), checked; else
    :class:`DeclarationError` naming the file and the problem."""
    files = sorted(BUILTIN.glob("*.json"))
    if extra is not None:
        if not extra.is_dir():
            raise DeclarationError(f"resource declarations directory {extra} does not exist")
        files += sorted(extra.glob("*.json"))
    declarations: dict[str, Declaration] = {}
    for file in files:
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DeclarationError(f"resource declaration {file}: not readable JSON: {exc}") from exc
        declaration = parse_declaration(raw, str(file))
        if declaration.type in declarations:
            raise DeclarationError(
                f"resource type {declaration.type!r} is declared twice: {declarations[declaration.type].source}"
                f" and {file}"
            )
        declarations[declaration.type] = declaration
    for declaration in declarations.values():
        _check_refs(declaration, declarations)
    return Catalog(declarations)


def _check_refs(declaration: Declaration, declarations: dict[str, Declaration]) -> None:
    label = f"resource declaration {declaration.type!r} ({declaration.source})"
    for path, target in declaration.refs.items():
        if target not in declarations:
            raise DeclarationError(f"{label}: ref field {path!r} names the undeclared type {target!r}")
        for audience, fields in declaration.ceilings.items():
            readable = any(pointers.covers(field, path) for field in fields)
            if readable and audience not in declarations[target].ceilings:
                raise DeclarationError(
                    f"{label}: audience {audience.value!r} may read ref field {path!r}, but not the type"
                    f" {target!r} it names"
                )
