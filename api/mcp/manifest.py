"""The MCP catalog of one audience, as a manifest with a content hash (seed 000 §7).

The tools' schemas are what the SDK derives from the tool functions' signatures and result models
(:mod:`api.mcp.tools`), so the manifest, ``tools/list`` and the handlers cannot drift apart. The manifest also
lists the resource types the audience may see (their declarations' operations and filters), so a changed
declaration changes the hash too. The hash is the sha256 of the manifest's canonical JSON (sorted keys, no
whitespace, UTF-8) without the hash itself: the same catalog gives the same hash in every process and run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import MCPServer

from api.mcp.legacy import LEGACY_RESOURCES
from api.mcp.task_tools import TASK_TOOLS
from api.mcp.tools import MEMORY_TOOLS
from memory.resources.catalog import Catalog
from memory.resources.declarations import Audience, Operation


@dataclass(frozen=True)
class Manifest:
    audience: Audience
    body: dict[str, Any]
    sha256: str

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(tool["name"] for tool in self.body["tools"])

    def tool(self, name: Any) -> dict[str, Any] | None:
        """The catalog entry of tool ``name`` (None: not offered to this audience, or no such tool)."""
        return next((tool for tool in self.body["tools"] if tool["name"] == name), None)

    def as_json(self) -> dict[str, Any]:
        return {**self.body, "sha256": self.sha256}


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def offered(name: str, audience: Audience, visible: set[str]) -> bool:
    """Whether ``audience`` is offered tool ``name``: the memory and task tools are internal; a legacy tool needs
    its resource type in the audience's catalog."""
    if name in MEMORY_TOOLS | TASK_TOOLS:
        return audience is Audience.INTERNAL
    if name in LEGACY_RESOURCES:
        resource = LEGACY_RESOURCES[name]
        return resource is None or resource in visible
    return True


async def build_manifest(server: MCPServer[Any], catalog: Catalog, audience: Audience, legacy: bool) -> Manifest:
    declarations = catalog.visible_to(audience)
    visible = {declaration.type for declaration in declarations}
    tools = [
        {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema,
         "outputSchema": tool.output_schema}
        for tool in sorted(await server.list_tools(), key=lambda tool: tool.name)
        if offered(tool.name, audience, visible)
    ]
    resources = [
        {"type": d.type, "description": d.description,
         "operations": [operation.value for operation in Operation if operation in d.operations],
         "filters": {name: spec.type.value for name, spec in sorted(d.filters.items())}}
        for d in declarations
    ]
    body = {"audience": audience.value, "legacy_tools": legacy, "tools": tools, "resources": resources}
    return Manifest(audience, body, hashlib.sha256(canonical(body)).hexdigest())
