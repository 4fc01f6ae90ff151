"""What a knowledge candidate says, checked strictly: the claim, its authority and scope, sources, evidence,
validity, and an incident's structure (seed 003 §9.1).

One validated value, :class:`Proposal`, is what every way in (the API, a session commit, a finished task, a
promotion) hands to :func:`memory.knowledge.candidates.propose`. Its hash (:func:`content_sha256`) is what a
reviewer approves: a review naming another hash is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from memory.errors import InvalidInput
from memory.knowledge.redaction import Redaction, redact
from memory.skills.format import NAME as SKILL_NAME

MAX_CLAIM_CHARS = 2_000
"""A claim is a distilled statement, never a whole ticket or transcript."""
MAX_FIELD_CHARS = 1_000
MAX_SOURCES = 50
MAX_EVIDENCE = 20
MAX_ATTEMPTS = 20
KEY = re.compile(r"^[a-z0-9][a-z0-9._:\-]{0,127}$")
PROJECT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")

SOURCE_REF = re.compile(r"^(memory|event|session|commit|task|artifact|record|knowledge|doc|ticket|url):\S{1,500}$")
"""``kind:id`` — what the claim rests on; deleting the source it names withdraws the candidate (issue 27 §3)."""


class Authority(StrEnum):
    """Seed 003 §9: P0 formal policy, P1 owner-reviewed FAQ/runbook, P2 confirmed ticket or incident, P3 chat, model
    summary or unreviewed inference — a P3 claim stays a candidate in recall whatever happens to it."""

    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"


RECALLED_AUTHORITIES = (Authority.P0, Authority.P1, Authority.P2)
RANK = {authority: n for n, authority in enumerate(Authority)}
"""P0 0 (the strongest) to P3 3."""


def capped(authority: Authority, ceiling: Authority) -> Authority:
    """``authority``, or ``ceiling`` when ``authority`` claims more."""
    return authority if RANK[authority] >= RANK[ceiling] else ceiling


class ScopeType(StrEnum):
    TENANT = "TENANT"
    PROJECT = "PROJECT"


class Origin(StrEnum):
    API = "API"
    SESSION_COMMIT = "SESSION_COMMIT"
    TASK = "TASK"
    PROMOTION = "PROMOTION"
    REREVIEW = "REREVIEW"


class AttemptOutcome(StrEnum):
    """How one attempt at an incident went: kept and marked, never dropped (seed 003 §9.1)."""

    FAILED = "failed"
    TEMPORARY = "temporary"
    FIXED = "fixed"


ORIGIN_CEILING = {Origin.API: Authority.P0, Origin.PROMOTION: Authority.P2, Origin.TASK: Authority.P2,
                  Origin.SESSION_COMMIT: Authority.P3, Origin.REREVIEW: Authority.P3}
"""The most a proposal of each origin may claim: a promoted case or a task's approved artifact is at most a
confirmed case (P2); what a conversation concluded is a model's (P3); formal policy comes from its document."""


def ceiling(origin: Origin, agent_id: str | None) -> Authority:
    """What a proposal may claim at most: P3 from a key bound to an agent (a model's proposal, whatever it says;
    a reviewer may raise it on approval), else its origin's ceiling."""
    return Authority.P3 if agent_id is not None else ORIGIN_CEILING[origin]


INCIDENT_TEXT_FIELDS = ("symptom", "root_cause", "diagnosis", "fix", "verification")
INCIDENT_REQUIRED = ("symptom", "root_cause", "fix", "verification")


@dataclass(frozen=True)
class Proposal:
    """A candidate's content as proposed (before redaction)."""

    claim: str
    authority: Authority
    scope_type: ScopeType
    source_refs: tuple[str, ...]
    project_id: str | None = None
    key: str | None = None
    evidence: tuple[Mapping[str, str], ...] = ()
    structured: Mapping[str, Any] | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    supersedes: uuid.UUID | None = None
    target: str = "knowledge"
    skill_name: str | None = None
    origin: Origin = Origin.API
    origin_ref: str | None = None

    def redacted(self) -> tuple[Proposal, list[Redaction]]:
        """This proposal with personal data and secrets replaced, and what was replaced (kind and path only)."""
        body, found = redact({"key": self.key, "claim": self.claim, "evidence": [dict(e) for e in self.evidence],
                              "structured": self.structured, "source_refs": list(self.source_refs)})
        unique = list(dict.fromkeys(found))
        return replace(self, key=body["key"], claim=body["claim"],
                       evidence=tuple(body["evidence"]), structured=body["structured"],
                       source_refs=tuple(body["source_refs"])), unique


@dataclass(frozen=True)
class Problems:
    """Every problem found, by path, so a caller fixes them all at once."""

    found: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, problem: str) -> None:
        self.found[path] = problem

    def raise_if_any(self) -> None:
        if self.found:
            raise InvalidInput("the knowledge candidate is not valid: " + "; ".join(
                f"{path}: {problem}" for path, problem in self.found.items()),
                code="knowledge_candidate_invalid", details={"problems": self.found})


def _text(problems: Problems, path: str, value: object, limit: int, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.add(path, "must be a non-empty string")
        return None
    if len(value) > limit:
        problems.add(path, f"is {len(value)} characters; at most {limit} (distil it: never a whole ticket)")
        return None
    return value.strip()


def check_incident(structured: Mapping[str, Any], problems: Problems, path: str = "structured") -> dict[str, Any]:
    """An incident as knowledge: symptom, confirmed root cause, diagnosis, final fix, verification evidence,
    applicable versions, and every attempt marked with how it went (failed ones kept, seed 003 §9.1)."""
    allowed = {"kind", *INCIDENT_TEXT_FIELDS, "applicable_versions", "attempts"}
    for extra in sorted(set(structured) - allowed):
        problems.add(f"{path}/{extra}", f"is not an incident field (allowed: {', '.join(sorted(allowed))})")
    out: dict[str, Any] = {"kind": "incident"}
    for name in INCIDENT_TEXT_FIELDS:
        value = _text(problems, f"{path}/{name}", structured.get(name), MAX_FIELD_CHARS,
                      required=name in INCIDENT_REQUIRED)
        if value is not None:
            out[name] = value
    versions = structured.get("applicable_versions", [])
    if not isinstance(versions, list) or not all(isinstance(v, str) and 0 < len(v) <= 64 for v in versions):
        problems.add(f"{path}/applicable_versions", "must be a list of version strings")
    else:
        out["applicable_versions"] = versions
    attempts = structured.get("attempts", [])
    if not isinstance(attempts, list) or len(attempts) > MAX_ATTEMPTS:
        problems.add(f"{path}/attempts", f"must be a list of at most {MAX_ATTEMPTS} attempts")
        return out
    out["attempts"] = []
    for n, attempt in enumerate(attempts):
        where = f"{path}/attempts/{n}"
        if not isinstance(attempt, Mapping) or set(attempt) - {"action", "outcome", "note"}:
            problems.add(where, "must be {action, outcome: failed|temporary|fixed, note?}")
            continue
        action = _text(problems, f"{where}/action", attempt.get("action"), MAX_FIELD_CHARS)
        outcome = attempt.get("outcome")
        if outcome not in {o.value for o in AttemptOutcome}:
            problems.add(f"{where}/outcome", "must be failed, temporary or fixed")
            continue
        note = _text(problems, f"{where}/note", attempt.get("note"), MAX_FIELD_CHARS, required=False)
        if action is not None:
            out["attempts"].append({"action": action, "outcome": outcome, **({"note": note} if note else {})})
    return out


def incident_claim(structured: Mapping[str, Any]) -> str:
    """The one-line claim of an incident: the symptom, its confirmed root cause and the fix."""
    return f"{structured['symptom']} — root cause: {structured['root_cause']}; fix: {structured['fix']}"


def check_sources(problems: Problems, refs: object) -> tuple[str, ...]:
    if not isinstance(refs, list | tuple) or not refs:
        problems.add("source_refs", "name at least one source (kind:id, e.g. memory:<id>, doc:<url>, ticket:<id>)")
        return ()
    if len(refs) > MAX_SOURCES:
        problems.add("source_refs", f"at most {MAX_SOURCES} sources")
    out: list[str] = []
    for n, ref in enumerate(refs):
        if not isinstance(ref, str) or not SOURCE_REF.fullmatch(ref):
            problems.add(f"source_refs/{n}", "must be kind:id where kind is one of memory, event, session, commit, "
                                             "task, artifact, record, knowledge, doc, ticket, url")
        else:
            out.append(ref)
    return tuple(dict.fromkeys(out))


def check_evidence(problems: Problems, evidence: object) -> tuple[Mapping[str, str], ...]:
    if not isinstance(evidence, list | tuple) or len(evidence) > MAX_EVIDENCE:
        problems.add("evidence", f"must be a list of at most {MAX_EVIDENCE} items")
        return ()
    out: list[Mapping[str, str]] = []
    for n, item in enumerate(evidence):
        if not isinstance(item, Mapping) or "quote" not in item or set(item) - {"quote", "ref"}:
            problems.add(f"evidence/{n}", "must be {quote, ref?}")
            continue
        quote = _text(problems, f"evidence/{n}/quote", item["quote"], MAX_FIELD_CHARS)
        ref = item.get("ref")
        if ref is not None and (not isinstance(ref, str) or not SOURCE_REF.fullmatch(ref)):
            problems.add(f"evidence/{n}/ref", "must be a source ref (kind:id)")
            continue
        if quote is not None:
            out.append({"quote": quote, **({"ref": ref} if ref else {})})
    return tuple(out)


def content_sha256(p: Proposal) -> str:
    """The hash of what a reviewer reads and approves (canonical JSON of the redacted content)."""
    body = {
        "key": p.key, "claim": p.claim, "authority": p.authority.value, "scope_type": p.scope_type.value,
        "project_id": p.project_id, "source_refs": list(p.source_refs), "evidence": [dict(e) for e in p.evidence],
        "structured": p.structured, "valid_from": p.valid_from.isoformat() if p.valid_from else None,
        "valid_to": p.valid_to.isoformat() if p.valid_to else None,
        "supersedes": str(p.supersedes) if p.supersedes else None, "target": p.target, "skill_name": p.skill_name,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def parse_proposal(body: Mapping[str, Any], *, origin: Origin = Origin.API, origin_ref: str | None = None) -> Proposal:
    """A proposal from a JSON body, every problem named by path (one :class:`InvalidInput`)."""
    problems = Problems()
    allowed = {"key", "claim", "authority", "scope", "source_refs", "evidence", "validity", "structured",
               "supersedes", "target", "skill_name"}
    for extra in sorted(set(body) - allowed):
        problems.add(extra, "is not a field of a knowledge candidate")
    structured = body.get("structured")
    incident: dict[str, Any] | None = None
    if structured is not None:
        if not isinstance(structured, Mapping) or structured.get("kind") != "incident":
            problems.add("structured", 'must be an incident: {"kind": "incident", "symptom", "root_cause", ...}')
        else:
            incident = check_incident(structured, problems)
    claim_value = body.get("claim")
    if claim_value is None and incident is not None and all(k in incident for k in INCIDENT_REQUIRED):
        claim_value = incident_claim(incident)
    claim = _text(problems, "claim", claim_value, MAX_CLAIM_CHARS)
    key = body.get("key")
    if key is not None and (not isinstance(key, str) or not KEY.fullmatch(key)):
        problems.add("key", "must be lower-case letters, digits and . _ : - (at most 128), e.g. report.publish_policy")
    authority = body.get("authority")
    if authority not in {a.value for a in Authority}:
        problems.add("authority", "must be P0, P1, P2 or P3")
    scope = body.get("scope", {"type": "TENANT"})
    scope_type, project_id = ScopeType.TENANT, None
    if not isinstance(scope, Mapping) or scope.get("type") not in {s.value for s in ScopeType} \
            or set(scope) - {"type", "project_id"}:
        problems.add("scope", 'must be {"type": "TENANT"} or {"type": "PROJECT", "project_id": "..."}')
    else:
        scope_type = ScopeType(scope["type"])
        project_id = scope.get("project_id")
        if (scope_type is ScopeType.PROJECT) != (isinstance(project_id, str) and bool(project_id.strip())):
            problems.add("scope/project_id", "a PROJECT scope names its project_id; a TENANT scope none")
            project_id = None
        elif project_id is not None and not PROJECT_ID.fullmatch(project_id):
            problems.add("scope/project_id", "must be a project id: letters, digits and . _ : - (at most 128)")
            project_id = None
    sources = check_sources(problems, body.get("source_refs"))
    evidence = check_evidence(problems, body.get("evidence", []))
    valid_from, valid_to = _validity(problems, body.get("validity"))
    supersedes = _uuid(problems, "supersedes", body.get("supersedes"))
    target = body.get("target", "knowledge")
    skill_name = body.get("skill_name")
    if target not in ("knowledge", "skill"):
        problems.add("target", "must be knowledge or skill")
    elif (target == "skill") != isinstance(skill_name, str):
        problems.add("skill_name", "a skill change names its skill; knowledge names none")
    elif isinstance(skill_name, str) and not SKILL_NAME.fullmatch(skill_name):
        problems.add("skill_name", "must be a skill's name: lower-case letters, digits and - (at most 64)")
    problems.raise_if_any()
    assert claim is not None and isinstance(authority, str)
    return Proposal(claim=claim, authority=Authority(authority), scope_type=scope_type, project_id=project_id,
                    source_refs=sources, key=key, evidence=evidence, structured=incident, valid_from=valid_from,
                    valid_to=valid_to, supersedes=supersedes, target=str(target),
                    skill_name=skill_name if target == "skill" else None, origin=origin, origin_ref=origin_ref)


def _uuid(problems: Problems, path: str, value: object) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        problems.add(path, "must be a knowledge id (a UUID)")
        return None


def _validity(problems: Problems, validity: object) -> tuple[datetime | None, datetime | None]:
    if validity is None:
        return None, None
    if not isinstance(validity, Mapping) or set(validity) - {"from", "to"}:
        problems.add("validity", 'must be {"from"?: ISO time, "to"?: ISO time}')
        return None, None
    found: list[datetime | None] = []
    for end in ("from", "to"):
        value = validity.get(end)
        if value is None:
            found.append(None)
            continue
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            problems.add(f"validity/{end}", "must be an ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z")
            found.append(None)
            continue
        if moment.tzinfo is None:
            problems.add(f"validity/{end}", "needs a time zone (e.g. Z or +08:00)")
        found.append(moment if moment.tzinfo else None)
    start, stop = found
    if start and stop and stop <= start:
        problems.add("validity", "to must be after from")
    return start, stop
