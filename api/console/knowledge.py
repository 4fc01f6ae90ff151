"""The knowledge reviewer's inbox and candidate page, beside the approvals inbox. A decision is the API's
(``POST /knowledge-candidates/{id}/reviews``, through :func:`api.services.knowledge.decide`): the same Temporal
Update and validator, bound to the content_sha256 and state_version the page showed."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse

from api.console.web import CheckedForm, ConsoleRoute, SignedIn, back_to, outcome, page
from api.deps import EngineDep, TemporalSource
from api.schemas.knowledge import ReviewIn
from api.services import knowledge
from memory.errors import Forbidden
from memory.knowledge.candidates import OPEN_STATUSES
from memory.knowledge.review import REVIEWER_NEEDED, reviewer_refusal

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)
DONE = {"approve": "approved", "reject": "rejected", "request_changes": "changes requested"}


@router.get("/knowledge")
def inbox(request: Request, signed: SignedIn, engine: EngineDep) -> HTMLResponse:
    """Candidates waiting for a review or a revision, oldest first."""
    principal = signed.principal
    if not knowledge.is_reviewer(principal):
        raise Forbidden(REVIEWER_NEEDED)
    rows = [c for status in OPEN_STATUSES for c in knowledge.list_candidates(engine, principal, status).items]
    rows.sort(key=lambda c: (c.review_deadline is None, c.review_deadline, c.candidate_id))
    return page(request, "knowledge.html", rows=rows)


@router.get("/knowledge/{candidate_id}")
def candidate_page(candidate_id: str, request: Request, signed: SignedIn, engine: EngineDep,
                   done: str | None = None) -> HTMLResponse:
    """Everything the review decides on, the conflicts side by side with the claim, and the decision forms."""
    principal = signed.principal
    shown = knowledge.show_candidate(engine, principal, candidate_id)
    refusal = reviewer_refusal(principal.user_id, principal.roles, principal.agent_id, shown.author_user_id)
    return page(request, "knowledge_candidate.html", c=shown, why_not_review=refusal.message if refusal else None,
                done=outcome(done))


@router.post("/knowledge/{candidate_id}/review")
async def review(
    candidate_id: str,
    signed: CheckedForm,
    engine: EngineDep,
    temporal: TemporalSource,
    decision: Annotated[Literal["approve", "reject", "request_changes"], Form()],
    content_sha256: Annotated[str, Form(pattern=r"^[0-9a-f]{64}$")],
    state_version: Annotated[int, Form(ge=1)],
    reason: Annotated[str | None, Form(max_length=2_000)] = None,
    authority: Annotated[Literal["", "P0", "P1", "P2", "P3"], Form()] = "",
) -> Response:
    given: dict[str, Any] = {"reason": reason.strip()} if reason and reason.strip() else {}
    if authority:
        given["authority"] = authority
    body = ReviewIn(decision=decision, content_sha256=content_sha256, state_version=state_version, **given)
    await knowledge.decide(temporal, engine, signed.principal, candidate_id, body)
    return back_to(f"/console/knowledge/{candidate_id}?done={DONE[decision].replace(' ', '+')}")
