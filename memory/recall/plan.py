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
DEFAULT_SKILL_BUDGET = 800
"""OPERATE's skills quota (seed 004 §9.1: a token quota per section), apart from the memories' budget."""
SKILL_LIMIT = 3
"""How many skills an OPERATE bundle may carry."""


class Intent(StrEnum):
    RESUME_TASK = "RESUME_TASK"
    ANSWER = "ANSWER"
    CHITCHAT = "CHITCHAT"
    OPERATE = "OPERATE"
    """Do something (run, draft, publish ...): skills + memory (seed 004 §9.1's operational intent)."""


class SourceType(StrEnum):
    REQUEST_CONSTRAINTS = "REQUEST_CONSTRAINTS"
    TASK_STATE = "TASK_STATE"
    USER_PROFILE = "USER_PROFILE"
    MEMORY = "MEMORY"
    SKILLS = "SKILLS"
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
    skill_budget: int = DEFAULT_SKILL_BUDGET
    knowledge_token_budget: int = KNOWLEDGE_TOKEN_BUDGET
    """Tokens of published knowledge (separate from ``token_budget``, the memories')."""

    def reads(self, source: SourceType) -> SourceSpec | None:
        return next((spec for spec in self.sources if spec.type is source), None)


_CHITCHAT = re.compile(
    r"^(hi|hello|hey|thanks|thank you|thx|ok|okay|bye|good (morning|night|evening)"
    r"|你好|您好|谢谢|多谢|好的|嗯|再见|早上好|晚安)[\s!.。！~]*$"
)
_OPERATE = re.compile(
    r"^(please |pls |can you |could you )?(run|draft|generate|publish|produce|prepare|execute|start|compile)\b"
    r"|^(请|请你|帮我|麻烦|麻烦你|给我)?(运行|执行|起草|生成|发布|启动|撰写|编写|出一份|做一份)"
)
"""An imperative to do a task's work, at the very start of the request: "generate the June report", "帮我生成
六月的月报". A question about doing it ("how do I publish?", "怎么发布") stays an ANSWER."""
_QUESTION = re.compile(
    r"[?？]|(是什么|是谁|什么|为什么|为何|怎么|怎样|如何|多少|几点|几号|哪|吗|呢)"
    r"|\b(what|who|why|when|where|which|how)\b"
)
"""A question, wherever its imperative-looking first word ("生成式AI是什么", "start date of my contract?",
"run rate for Q2?"): it asks, it does not order."""


def classify_intent(query: str, task_id: str | None) -> Intent:
    """A task id means resuming it; a bare greeting or thanks needs no memory; an imperative to run, draft, generate
    or publish is an operation; anything else is a question."""
    if task_id is not None:
        return Intent.RESUME_TASK
    text = " ".join(normalize(query).split())
    if _CHITCHAT.match(text):
        return Intent.CHITCHAT
    if _OPERATE.match(text) and not _QUESTION.search(text):
        return Intent.OPERATE
    return Intent.ANSWER


def make_plan(
    intent: Intent,
    *,
    task_id: str | None = None,
    candidate_limit: int = DEFAULT_CANDIDATES,
    inject_limit: int = DEFAULT_INJECT,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    skill_budget: int = DEFAULT_SKILL_BUDGET,
) -> RecallPlan:
    """The sources per intent. CHITCHAT reads nothing but the request itself. RESUME_TASK reads the named task,
    or, without a task id, lists the caller's resumable tasks (seed 003 §14.2). Every intent but CHITCHAT reads
    published knowledge; OPERATE reads the caller's skills too, each in a quota of its own."""
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
        if intent is Intent.OPERATE:
            sources = (*sources, SourceSpec(SourceType.SKILLS, SKILL_LIMIT))
    return RecallPlan(intent, sources, candidate_limit, inject_limit, token_budget, skill_budget)
