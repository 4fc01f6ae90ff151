"""Recall plans (seed 003 §10.1): which sources an intent reads, how much of each, and what is required.

A required source that cannot be read is an error, never a silent partial bundle.
The intent comes from the request, or from :func:`classify_intent`, which is
deterministic (no model call) so the same request always gets the same plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from memory.text import normalize

DEFAULT_CANDIDATES = 20
DEFAULT_INJECT = 5
DEFAULT_TOKEN_BUDGET = 1_500
"""Seed 001 §6.4: starting points for measurement, not universal optima."""
KNOWLEDGE_INJECT = 3
KNOWLEDGE_TOKEN_BUDGET = 600
"""Published knowledge has its own quota: a policy never displaces the caller's memories, nor they it."""
RESUME_CANDIDATES = 10
"""How many of the caller's resumable tasks a RESUME_TASK recall without a task id lists to choose from."""


class Intent(StrEnum):
    RESUME_TASK = "RESUME_TASK"
    ANSWER = "ANSWER"
    CHITCHAT = "CHITCHAT"


class SourceType(StrEnum):
    REQUEST_CONSTRAINTS = "REQUEST_CONSTRAINTS"
    TASK_STATE = "TASK_STATE"
    USER_PROFILE = "USER_PROFILE"
    MEMORY = "MEMORY"
    KNOWLEDGE = "KNOWLEDGE"


@dataclass(frozen=True)
class SourceSpec:
    type: SourceType
    limit: int
    required: bool = False


@dataclass(frozen=True)
class RecallPlan:
    intent: Intent
    sources: tuple[SourceSpec, ...]
    candidate_limit: int
    inject_limit: int
    token_budget: int
    knowledge_token_budget: int = KNOWLEDGE_TOKEN_BUDGET
    """Tokens of published knowledge (separate from ``token_budget``, the memories')."""

    def reads(self, source: SourceType) -> SourceSpec | None:
        return next((spec for spec in self.sources if spec.type is source), None)


_CHITCHAT = re.compile(
    r"^(hi|hello|hey|thanks|thank you|thx|ok|okay|bye|good (morning|night|evening)"
    r"|你好|您好|谢谢|多谢|好的|嗯|再见|早上好|晚安)[\s!.。！~]*$"
)


def classify_intent(query: str, task_id: str | None) -> Intent:
    """A task id means resuming it; a bare greeting or thanks needs no memory; anything else is a question."""
    if task_id is not None:
        return Intent.RESUME_TASK
    if _CHITCHAT.match(" ".join(normalize(query).split())):
        return Intent.CHITCHAT
    return Intent.ANSWER


def make_plan(
    intent: Intent,
    *,
    task_id: str | None = None,
    candidate_limit: int = DEFAULT_CANDIDATES,
    inject_limit: int = DEFAULT_INJECT,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> RecallPlan:
    """The sources per intent. CHITCHAT reads nothing but the request itself. RESUME_TASK reads the named task,
    or, without a task id, lists the caller's resumable tasks (seed 003 §14.2). Both read published knowledge."""
    if intent is Intent.CHITCHAT:
        sources: tuple[SourceSpec, ...] = (SourceSpec(SourceType.REQUEST_CONSTRAINTS, 0, required=True),)
    else:
        sources = (
            SourceSpec(SourceType.REQUEST_CONSTRAINTS, 0, required=True),
            SourceSpec(SourceType.USER_PROFILE, 50),
            SourceSpec(SourceType.MEMORY, inject_limit),
            SourceSpec(SourceType.KNOWLEDGE, KNOWLEDGE_INJECT),
        )
        if intent is Intent.RESUME_TASK:
            limit = 1 if task_id is not None else RESUME_CANDIDATES
            sources = (SourceSpec(SourceType.TASK_STATE, limit, required=True), *sources)
    return RecallPlan(intent, sources, candidate_limit, inject_limit, token_budget)
