"""The extractor interface: a :class:`~memory.sessions.messages.Stage` in, candidates and refusals out.

An extractor only proposes. The gates (:mod:`memory.sessions.extraction.gates`) decide what may be stored
at all and at which source level, de-duplication decides SKIP / CREATE / MERGE against existing memories,
and the store writes. Nothing an extractor returns is trusted as-is: every candidate names the events it
comes from, and a candidate citing an event outside the stage is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from memory.enums import Category, SourceLevel
from memory.sessions.messages import Stage


class RejectionReason(StrEnum):
    """Why a candidate (or a whole extractor answer) was not used; counted in the commit's stats."""

    SECRET = "secret"
    """A password, token, private key or card number: never stored."""
    ROLE_OR_PERMISSION = "role_or_permission"
    """Roles and permissions come from credentials, never from conversation."""
    ONE_OFF_ACTION = "one_off_action"
    """A single click or action is not a stable preference."""
    PERSONALITY_LABEL = "personality_label"
    """A label about the user's character ("you are impatient"): never stored."""
    TEMPORARY_CONSTRAINT = "temporary_constraint"
    """"This time in English": session state, never a stored preference."""
    RECALLED_CONTEXT = "recalled_context"
    """Text that reached the agent from a bundle or profile injection: cited, not re-extracted."""
    NOT_SELF_STATEMENT = "not_self_statement"
    """Someone else's words (quoted, reported, forwarded), text handed over for a task, a hypothetical, an
    example, role-play, a pasted transcript or a line behind another speaker's label: not the user speaking about
    themselves (:mod:`memory.sessions.extraction.attribution`)."""
    FORGET_INSTRUCTION = "forget_instruction"
    """"Don't remember that …" / "别记住…": an instruction, never a fact; what it names is not stored."""
    NOT_A_SKILL_REPORT = "not_a_skill_report"
    """A SKILL_EXECUTION that is not, exactly, what a skill report posted in the stage says: never a model's."""
    INVALID_CATEGORY = "invalid_category"
    EVIDENCE_OUTSIDE_STAGE = "evidence_outside_stage"
    MISSING_FIELD = "missing_field"
    INVALID_ANSWER = "invalid_answer"
    """The extractor's answer as a whole could not be parsed or validated."""
    EXTRACTOR_UNAVAILABLE = "extractor_unavailable"
    """The extractor could not be reached or kept failing after its retries."""
    EVIDENCE_DELETED = "evidence_deleted"
    """An event the candidate cites was deleted between extraction and the write: nothing to rest on."""
    WRITE_REFUSED = "write_refused"
    """A rule of the store refused the write (its error code is in the detail)."""
    NO_CANDIDATES = "no_candidates"
    """Nothing in the stage asked to be remembered: a note, not a refusal."""


class RejectionKind(StrEnum):
    """What a refusal says about the commit, for readers and the governance figures: a ``rule`` refusal is
    the gates doing their job (a one-time constraint, a secret), a ``schema`` failure is an extractor answer
    that broke the answer schema, ``unavailable`` an extractor that could not answer, ``write`` the store's
    own refusal."""

    RULE = "rule"
    SCHEMA = "schema"
    UNAVAILABLE = "unavailable"
    WRITE = "write"


REJECTION_KINDS: dict[RejectionReason, RejectionKind] = {
    **{reason: RejectionKind.RULE for reason in (
        RejectionReason.SECRET, RejectionReason.ROLE_OR_PERMISSION, RejectionReason.ONE_OFF_ACTION,
        RejectionReason.PERSONALITY_LABEL, RejectionReason.TEMPORARY_CONSTRAINT, RejectionReason.RECALLED_CONTEXT,
        RejectionReason.NOT_SELF_STATEMENT, RejectionReason.FORGET_INSTRUCTION, RejectionReason.NOT_A_SKILL_REPORT)},
    **{reason: RejectionKind.SCHEMA for reason in (
        RejectionReason.INVALID_CATEGORY, RejectionReason.EVIDENCE_OUTSIDE_STAGE, RejectionReason.MISSING_FIELD,
        RejectionReason.INVALID_ANSWER)},
    RejectionReason.EXTRACTOR_UNAVAILABLE: RejectionKind.UNAVAILABLE,
    RejectionReason.EVIDENCE_DELETED: RejectionKind.WRITE,
    RejectionReason.WRITE_REFUSED: RejectionKind.WRITE,
}
"""Every refusal's kind; :data:`RejectionReason.NO_CANDIDATES` has none (nothing was refused)."""


def rejection_kind(reason: str) -> RejectionKind | None:
    """The kind of a stored refusal's ``reason`` (None for a note, or a reason this version does not know)."""
    try:
        return REJECTION_KINDS.get(RejectionReason(reason))
    except ValueError:
        return None


@dataclass(frozen=True)
class Candidate:
    """A proposed memory: the three levels (L0 abstract, L1 overview, L2 content), its category and key,
    its source level and the exact events it rests on."""

    category: Category
    abstract: str
    """L0: one line (~100 tokens)."""
    overview: str
    """L1: a structured overview (a few lines)."""
    content: str
    """L2: the full statement, with the source sentences verbatim."""
    source_level: SourceLevel
    evidence_event_ids: tuple[str, ...]
    key: str | None = None
    """A stable slot such as ``profile.city`` or ``response.language``: two memories with one key are
    about the same thing, so a new value supersedes the old (a correction) instead of standing beside it."""
    value: str | None = None
    """The slot's value when the key has one (``en`` for ``response.language``, ``杭州`` for ``profile.city``):
    what recall's effective preferences read, while ``content`` keeps the sentence verbatim."""
    correction: bool = False
    """The speaker corrected an earlier fact ("其实我已经搬到杭州了", "actually ..."): a MERGE that
    supersedes, even when the old value's text looks nothing like the new one."""
    confidence: float | None = None


@dataclass(frozen=True)
class Rejection:
    reason: RejectionReason
    detail: str
    """A human sentence: what was refused and why (never the secret itself)."""
    evidence_event_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Extraction:
    candidates: tuple[Candidate, ...]
    rejections: tuple[Rejection, ...] = ()
    extractor: str = "rules"
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


class Extractor(Protocol):
    """Turn a stage into candidates. Must be deterministic for ``rules``; must never raise on a bad model
    answer (that is a :class:`Rejection` with :attr:`RejectionReason.INVALID_ANSWER`)."""

    name: str

    def extract(self, stage: Stage) -> Extraction: ...
