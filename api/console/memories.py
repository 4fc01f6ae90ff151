"""My memory: what mnemo remembers about the signed-in person, by category, with versions and provenance;
correct, expire or delete it (the API's handlers and the role table of :mod:`memory.store.permissions`), and
why a memory went into a recalled bundle (its MEMORY_BUNDLE_BUILT audit)."""

from __future__ import annotations

from itertools import groupby
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import HTMLResponse

from api.console.reads import my_bundles, my_memories
from api.console.web import CheckedForm, ConsoleRoute, SignedIn, back_to, outcome, page
from api.deps import EngineDep, SettingsDep, TemporalSource
from api.schemas.memories import CorrectionIn
from api.services import deletions
from api.services import memories as service
from memory.errors import Forbidden
from memory.identity.auth import PrincipalContext
from memory.identity.ids import parse_id
from memory.store.permissions import MemoryAction, require

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


def allowed(principal: PrincipalContext, space: str) -> set[str]:
    """The actions the role table lets this person take on a memory of ``space`` (buttons to show)."""
    mine: set[str] = set()
    for action in (MemoryAction.CORRECT, MemoryAction.EXPIRE, MemoryAction.DELETE):
        try:
            require(principal, action, space)
        except Forbidden:
            continue
        mine.add(action.value)
    return mine


@router.get("/memory")
def my_memory(request: Request, signed: SignedIn, engine: EngineDep) -> HTMLResponse:
    rows = my_memories(engine, signed.principal)
    categories = [(category, list(items)) for category, items in groupby(rows, key=lambda m: m.category)]
    return page(request, "memory.html", categories=categories, bundles=my_bundles(engine, signed.principal))


@router.get("/memory/{memory_id}")
def memory_page(
    memory_id: str, request: Request, signed: SignedIn, engine: EngineDep,
    version: Annotated[int | None, Query(ge=1, le=2_147_483_647)] = None,
    done: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    principal = signed.principal
    parsed = parse_id(memory_id, "memory")
    shown = service.read_memory(engine, principal, parsed, version)
    current = service.read_memory(engine, principal, parsed) if version is not None else shown
    ref_prefix = f"{current.memory_id}@"
    uses = [
        (event, [ref for ref in event.detail.get("selected_refs", []) if ref.startswith(ref_prefix)])
        for event in my_bundles(engine, principal, limit=200)
    ]
    return page(
        request, "memory_detail.html", memory=shown, current=current, done=outcome(done),
        uses=[(event, refs) for event, refs in uses if refs], allowed=allowed(principal, current.space),
    )


@router.post("/memory/{memory_id}/correct")
def correct(
    memory_id: str, signed: CheckedForm, engine: EngineDep,
    expected_version: Annotated[int, Form(ge=1)], content: Annotated[str, Form(min_length=1, max_length=20_000)],
) -> Response:
    correction = CorrectionIn(expected_version=expected_version, content=content)
    corrected = service.correct_memory(engine, signed.principal, parse_id(memory_id, "memory"), correction)
    return back_to(f"/console/memory/{corrected.memory_id}?done=corrected+to+version+{corrected.version}")


@router.post("/memory/{memory_id}/expire")
def expire(memory_id: str, signed: CheckedForm, engine: EngineDep) -> Response:
    expired = service.expire_memory(engine, signed.principal, parse_id(memory_id, "memory"))
    return back_to(f"/console/memory/{expired.memory_id}?done=expired")


@router.post("/memory/{memory_id}/delete")
async def delete(
    memory_id: str, signed: CheckedForm, engine: EngineDep, settings: SettingsDep, temporal: TemporalSource
) -> Response:
    """The API's ``DELETE /memories/{id}``: a job whose page shows each layer until it is proven gone."""
    parsed = parse_id(memory_id, "memory")
    accepted = await deletions.delete_memory(temporal, engine, settings, signed.principal, parsed)
    return back_to(f"/console/deletions/{accepted.out.job_id}")
