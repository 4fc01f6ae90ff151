"""What the extract step hands the persist step: the gated candidates and refusals, and the extractor's usage.

It is stored in the commit row (``session_commits.memories["proposed"]``) so a retried persist never calls the
extractor again; :meth:`Proposal.to_json` and :meth:`Proposal.from_json` are the one place its JSON shape is
written and read. That shape is what rows stored by earlier versions hold, so it does not change: a row
written before ``usage`` existed (or by a test naming only candidates) still loads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from memory.enums import Category, SourceLevel
from memory.sessions.extraction.base import Candidate, Extraction, Rejection, RejectionReason
from memory.sessions.extraction.gates import apply_gates
from memory.sessions.messages import Stage


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    """A candidate as stored (and as its write's request digest is computed)."""
    return {**asdict(candidate), "category": candidate.category.value, "source_level": candidate.source_level.value,
            "evidence_event_ids": list(candidate.evidence_event_ids)}


def candidate_of(data: dict[str, Any]) -> Candidate:
    return Candidate(**{**data, "category": Category(data["category"]),
                        "source_level": SourceLevel(data["source_level"]),
                        "evidence_event_ids": tuple(data["evidence_event_ids"])})


def rejection_json(rejection: Rejection) -> dict[str, Any]:
    """A refusal as a commit's ``reasons`` list it (and as the proposal stores it)."""
    return {"reason": rejection.reason.value, "detail": rejection.detail,
            "evidence_event_ids": list(rejection.evidence_event_ids)}


def rejection_of(data: dict[str, Any]) -> Rejection:
    return Rejection(RejectionReason(data["reason"]), data["detail"], tuple(data["evidence_event_ids"]))


@dataclass(frozen=True)
class Usage:
    """Which extractor answered and what it cost: copied into the commit's stats."""

    extractor: str
    model: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Proposal:
    candidates: tuple[Candidate, ...]
    rejections: tuple[Rejection, ...] = ()
    usage: Usage | None = None
    """None only in a row stored without it: the commit's stats then name no extractor."""

    @classmethod
    def gated(cls, stage: Stage, extraction: Extraction) -> Proposal:
        """What the gates admitted of an extractor's answer, and what they (or the extractor) refused."""
        gates = apply_gates(stage, extraction)
        usage = Usage(extraction.extractor, extraction.model, extraction.prompt_tokens, extraction.completion_tokens)
        return cls(gates.admitted, gates.rejections, usage)

    def to_json(self) -> dict[str, Any]:
        stored: dict[str, Any] = {"candidates": [candidate_json(c) for c in self.candidates],
                                  "rejections": [rejection_json(r) for r in self.rejections]}
        if self.usage is not None:
            stored["usage"] = asdict(self.usage)
        return stored

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Proposal:
        usage = data.get("usage")
        return cls(tuple(candidate_of(c) for c in data.get("candidates", [])),
                   tuple(rejection_of(r) for r in data.get("rejections", [])),
                   Usage(**usage) if usage is not None else None)
