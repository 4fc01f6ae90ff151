"""The MCP tools: list / search / read over the resource reader (seed 000 §2.1), and the memory tool set of
seed 004 §9.3 (browse categories → search → detail) over mnemo's own memories.

Each tool takes the arguments of its REST body and returns the result model REST returns
(:mod:`memory.resources.results`, :mod:`api.schemas.memories`), so the schemas the SDK derives from these
signatures are the catalog (:mod:`api.mcp.manifest`). Who calls comes from the key, never from an argument.
The memory tools are internal: a ``public_client`` key is not offered them (memories are the user's and the
agents' own, not part of the public catalog).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Optional

from anyio import from_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.datastructures import State

from api.deps import app_temporal
from api.mcp.answers import failure, with_access, with_memories
from api.schemas.memories import MemoryDetailOut
from api.schemas.recall import (
    RESUME_SECTIONS,
    ConstraintOut,
    IntentName,
    KnowledgeEntryOut,
    TaskCandidateOut,
    TaskStateOut,
    bundle_body,
)
from api.services.recall import Recaller, task_found
from memory.db import tenant_session
from memory.enums import Category
from memory.identity.auth import PrincipalContext
from memory.identity.ids import parse_id
from memory.recall.plan import Intent
from memory.recall.service import RecallOptions, plan_for
from memory.resources.declarations import Operation
from memory.resources.results import Directory, ListPage, ReadPage, SearchResult
from memory.store import memories
from memory.store.categories import category_overview

MEMORY_TOOLS = frozenset({"browse_memory_categories", "search_memories", "get_memory_detail"})
"""Offered to internal keys only."""

TopK = Annotated[int, Field(ge=1, le=50, description="How many results at most")]


def either(name: str, *models: type[BaseModel]) -> type[BaseModel]:
    """One output model accepting each of ``models``' JSON as is (their fields, all optional): an MCP output
    schema is one object, and a tool answering two shapes (``list``) must not wrap them in another."""
    fields: dict[str, Any] = {
        field: (Optional[info.annotation], Field(default=None, description=info.description))  # noqa: UP045
        for model in models for field, info in model.model_fields.items()
    }
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


ListOutput = either("ListOutput", Directory, ListPage)
"""``list()`` answers a :class:`Directory`, ``list(resource)`` a :class:`ListPage`, each exactly as REST."""


class CategoryEntry(BaseModel):
    category: str
    count: int = Field(description="Memories of this category recall may use for the caller now")
    abstract: str = Field(description="A one-line abstract of the newest of them; empty when there are none")


class CategoryOverviewOut(BaseModel):
    categories: list[CategoryEntry]


class MemorySummary(BaseModel):
    memory_id: uuid.UUID
    version: int
    category: str
    abstract: str
    score: float
    source_refs: list[str]


class MemorySearchOut(BaseModel):
    """The recall's hits as abstracts, and the bundle's sections an agent acts on, as POST /memory-query has them."""

    trace_id: str = Field(description="The recall's trace id (its MEMORY_BUNDLE_BUILT audit event)")
    items: list[MemorySummary] = Field(description="L1: abstracts, best first; get_memory_detail for the whole")
    intent: IntentName
    request_constraints: list[ConstraintOut] = Field(description="Constraints of this request only, never stored")
    effective_preferences: dict[str, str]
    task_state: TaskStateOut | None = Field(description="RESUME_TASK: the live task")
    task_candidates: list[TaskCandidateOut] = Field(description="RESUME_TASK without task_id: your resumable tasks")
    needs_task_choice: bool = Field(description="Several tasks could be resumed: ask the user which, never guess")
    knowledge: list[KnowledgeEntryOut] = Field(description="Published, reviewed knowledge that applies: facts with "
                                               "their version, unlike the memories in items")
    warnings: list[str]


def register(server: MCPServer[Any], state: State) -> None:
    """Add every non-legacy tool to ``server``; ``state`` is the API's (engine, catalog, reader, lanes)."""

    @server.tool(name="list", description="list(): the resource types you may use now, their operations and "
                 "readable fields. list(resource, filters?, cursor?): one page of that type's records.")
    async def list_resources(
        ctx: Context[Any, Any], resource: str | None = None, filters: dict[str, str] | None = None,
        cursor: str | None = None,
    ) -> Annotated[CallToolResult, ListOutput]:
        if resource is None:
            if filters or cursor is not None:  # they page one type's records: never silently dropped
                return failure("resource_required", "filters and cursor belong to list(resource): name the resource "
                               "type they are for, or leave them out for the directory")
            return await with_access(ctx, state, lambda access: state.reader.directory(access))
        return await with_access(ctx, state, lambda access: state.reader.list(access, resource, filters or {}, cursor))

    @server.tool(name="search", description="Candidates from every resource type you may search (or one), "
                 "each with its ref, title, snippet and time, re-read from the source; read a ref for the whole.")
    async def search_resources(
        ctx: Context[Any, Any], query: str, resource: str | None = None, top_k: TopK | None = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        return await with_access(ctx, state, lambda access: state.reader.search(access, query, resource, top_k))

    @server.tool(name="read", description="One record by its ref: `data` when it fits one page, else `fragments` "
                 "page by page (pass `next_cursor` back); only the last page says complete: true.")
    async def read_resource(
        ctx: Context[Any, Any], ref: str, cursor: str | None = None,
    ) -> Annotated[CallToolResult, ReadPage]:
        return await with_access(ctx, state, lambda access: state.reader.read(access, ref, cursor))

    @server.tool(name="browse_memory_categories", description="Your memories by category: the count and a "
                 "one-line abstract of each (L0). Call it at the start of a conversation.")
    async def browse_memory_categories(ctx: Context[Any, Any]) -> Annotated[CallToolResult, CategoryOverviewOut]:
        return await with_memories(ctx, state, Operation.LIST, lambda principal: _overview(state, principal))

    @server.tool(name="search_memories", description="Memories relevant to a topic (mnemo's recall), as "
                 "abstracts (L1), optionally of one category; get_memory_detail for the whole of one. "
                 "intent RESUME_TASK (a task_id, or none: your resumable tasks) adds the live task state.")
    async def search_memories(
        ctx: Context[Any, Any], query: Annotated[str, Field(min_length=1, max_length=2_000)],
        category: Category | None = None, top_k: TopK = 5,
        intent: IntentName | None = None,
        task_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None,
    ) -> Annotated[CallToolResult, MemorySearchOut]:
        options = RecallOptions(limit=top_k, categories=(category,) if category else (),
                                intent=Intent(intent) if intent else None, task_id=task_id)
        return await with_memories(ctx, state, Operation.SEARCH,
                                   lambda principal: _search(state, principal, query, options))

    @server.tool(name="get_memory_detail", description="One memory whole (L2): content, version, provenance "
                 "and evidence refs, and its version history.")
    async def get_memory_detail(ctx: Context[Any, Any], memory_id: str) -> Annotated[CallToolResult, MemoryDetailOut]:
        return await with_memories(ctx, state, Operation.READ, lambda principal: _detail(state, principal, memory_id))


def _overview(state: State, principal: PrincipalContext) -> CategoryOverviewOut:
    with tenant_session(state.engine, principal.tenant_id) as session:
        overview = category_overview(session, principal)
    return CategoryOverviewOut(categories=[CategoryEntry(category=entry.category.value, count=entry.count,
                                                         abstract=entry.abstract) for entry in overview])


def _search(state: State, principal: PrincipalContext, query: str, options: RecallOptions) -> MemorySearchOut:
    """mnemo's recall, as REST runs it (:class:`api.services.recall.Recaller`, the same task source), its hits as
    abstracts. Runs in a worker thread: the task source's Temporal query goes back to the event loop."""
    task = from_thread.run(task_found, state.engine, lambda: app_temporal(state), principal,
                           plan_for(query, options), options.task_id)
    bundle = Recaller.of(state).as_principal(principal, query, options, task)
    hits = sorted(bundle.items, key=lambda item: -item.score)
    body = bundle_body(bundle)
    return MemorySearchOut.model_validate({"trace_id": bundle.trace_id, "items": [
        MemorySummary(memory_id=uuid.UUID(item.memory_id), version=item.version, category=item.category,
                      abstract=item.abstract, score=item.score, source_refs=list(item.source_refs))
        for item in hits
    ], **{section: body[section] for section in RESUME_SECTIONS}})


def _detail(state: State, principal: PrincipalContext, raw_id: str) -> MemoryDetailOut:
    """As ``GET /memories/{id}``: another user's or tenant's memory is the not_found of a missing one."""
    memory_id = parse_id(raw_id, "memory")
    with tenant_session(state.engine, principal.tenant_id) as session:
        memory = memories.head_of(session, principal, memory_id)
        versions = memories.history(session, principal, memory_id)
    return MemoryDetailOut.of_versions(memory, versions)
