"""Request and response models. Requests parse strictly: unknown keys, explicit nulls,
identity fields and timestamps without a time zone are refused with a typed 422."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator
from pydantic_core import PydanticCustomError

from memory.enums import Category, EventKind, SourceLevel, Space
from memory.models import Memory

IDENTITY_FIELDS = frozenset({"tenant", "tenant_id", "user", "user_id", "caller", "principal", "roles", "agent_id"})

ShortText = Annotated[str, Field(min_length=1, max_length=256)]
Content = Annotated[str, Field(min_length=1, max_length=100_000)]

EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)
"""Timestamps in requests lie in [EARLIEST, LATEST), compared in UTC. Python's datetime (and so every read of the
row) cannot hold what PostgreSQL stores past year 9999 or before year 1 in UTC: 9999-12-31T23:59:59-14:00 was
accepted and then made every read and recall meeting it a 500. No real memory, event or validity bound lies
outside two centuries around now; a typo does, and is better refused."""

INT32_MAX = 2**31 - 1
"""Largest version or position a PostgreSQL ``integer`` column can hold; a larger number is a 422."""
MAX_SAFE_INTEGER = 2**53 - 1
"""Largest revision, state version or seed a request may name: fits a ``bigint`` and, unlike 2^63-1, every
JSON parser's double exactly (so the schema's maximum means the same to every client)."""

Lax = Strict(False)
"""A request field JSON can only carry as a string (an enum value, a UUID): parsed from its string although
:class:`StrictRequest` is strict (no ``0`` for ``false``, ``"5"`` for ``5`` or ``94.0`` for ``94``)."""

NO_NUL = "^[^\\u0000]*$"
"""The schema's pattern for request strings: the request guard refuses a NUL (a lone surrogate too, which no
JSON Schema pattern can name portably)."""

IN_RANGE_YEARS = "^(19|20|21)\\d\\d-"
"""The schema's pattern for request timestamps: years 1900 to 2199 (the exact bound is in UTC)."""


def _as_text(value: Any) -> Any:
    """A request timestamp is ISO 8601 text: lax datetime parsing would take 0 as 1970-01-01T00:00:00Z."""
    if not isinstance(value, (str, datetime)):
        raise PydanticCustomError("datetime_type", "expected an ISO 8601 timestamp with a time zone")
    return value


def _json_integer(value: Any) -> Any:
    """An integer as JSON Schema means it: 94 and 94.0, never true or "94" (what lax parsing would take)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("int_type", "Input should be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise PydanticCustomError("int_from_float", "Input should be an integer, without a fractional part")
        return int(value)
    return value


def _json_number(value: Any) -> Any:
    """A number: 1 and 0.5, never true or "0.5"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("float_type", "Input should be a number")
    return value


Integer = Annotated[int, BeforeValidator(_json_integer)]
"""Every integer of a request (JSON's integer: 94.0 is one); a bare ``int`` in a strict model would refuse 94.0.
An optional one spells it out with its bounds first, ``Annotated[int, Field(ge=..), BeforeValidator(..)] | None``:
with the bounds after the validator, pydantic writes them into the schema as ``ge``/``le``, not JSON Schema."""
Number = Annotated[float, BeforeValidator(_json_number)]
"""Every non-integer number of a request."""


def _in_range(value: datetime) -> datetime:
    if not EARLIEST <= value < LATEST:
        raise PydanticCustomError(
            "timestamp_out_of_range",
            "timestamps must lie from 1900-01-01T00:00:00Z up to (not including) 2200-01-01T00:00:00Z",
        )
    return value


Timestamp = Annotated[
    AwareDatetime,
    Lax,
    BeforeValidator(_as_text),
    AfterValidator(_in_range),
    Field(
        description="ISO 8601 with a time zone, from 1900-01-01T00:00:00Z up to (not including) 2200-01-01T00:00:00Z",
        json_schema_extra={"pattern": IN_RANGE_YEARS},
    ),
]
"""Every timestamp of every request: ISO 8601 with a time zone, inside [EARLIEST, LATEST)."""


def without_null(schema: dict[str, Any]) -> None:
    """Drop ``null`` (and a ``null`` default) from one JSON schema, in place: for what may be left out but is
    never null (an optional field of a :class:`StrictRequest`, a query parameter)."""
    alternatives = schema.get("anyOf")
    if alternatives and {"type": "null"} in alternatives:
        rest = [alternative for alternative in alternatives if alternative != {"type": "null"}]
        del schema["anyOf"]
        if len(rest) == 1:
            schema.update(rest[0])
        else:
            schema["anyOf"] = rest
    if "default" in schema and schema["default"] is None:
        del schema["default"]


def without_nul(schema: Any) -> None:
    """Give every free string of one JSON schema (nested ones too) the :data:`NO_NUL` pattern, in place."""
    if isinstance(schema, list):
        for item in schema:
            without_nul(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not {"pattern", "format", "enum", "const"} & schema.keys():
        schema["pattern"] = NO_NUL
    names = schema.get("propertyNames")
    if isinstance(names, dict) and "pattern" not in names:
        names["pattern"] = NO_NUL
    for key in ("items", "prefixItems", "additionalProperties", "anyOf", "oneOf", "allOf"):
        without_nul(schema.get(key))


def _as_documented(schema: dict[str, Any], _model: type[Any]) -> None:
    """The OpenAPI of a request model says what it takes: an optional field may be left out, but null is
    refused (see :class:`StrictRequest`), and so is a NUL in any string (see api.errors)."""
    for field in schema.get("properties", {}).values():
        without_null(field)
        without_nul(field)


class StrictRequest(BaseModel):
    """Base of every request body: strict types (``0`` is not ``false``, ``94.0`` not ``94``; enums and
    UUIDs are :data:`Lax`), no unknown keys, no explicit nulls, no identity fields."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_as_documented)
    identity_fields: ClassVar[frozenset[str]] = IDENTITY_FIELDS
    """Fields that would claim the caller's identity; a model naming a *target* user narrows this."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_identity_and_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            claimed = sorted(cls.identity_fields & data.keys())
            if claimed:
                raise PydanticCustomError(
                    "identity_from_credentials",
                    "{field} is not accepted in a request body: tenant, user, agent and roles come from your API key",
                    {"field": claimed[0]},
                )
            for key, value in data.items():
                if value is None:
                    raise PydanticCustomError(
                        "null_not_allowed", "{field} may not be null: leave the field out instead", {"field": key}
                    )
        return data


class SourceIn(StrictRequest):
    source_id: ShortText
    source_type: ShortText
    captured_at: Timestamp
    evidence_refs: list[ShortText] = Field(default_factory=list, max_length=50)


class ValidityIn(StrictRequest):
    observed_at: Timestamp | None = None
    effective_from: Timestamp | None = None
    effective_to: Timestamp | None = None
    expires_at: Timestamp | None = None


class EventIn(StrictRequest):
    idempotency_key: ShortText
    kind: Annotated[EventKind, Lax]
    payload: dict[str, Any]
    occurred_at: Timestamp
    session_id: ShortText | None = None


class EventOut(BaseModel):
    event_id: uuid.UUID
    idempotency_key: str
    kind: str
    session_id: str | None
    occurred_at: AwareDatetime
    stored_at: AwareDatetime
    revision: int
    stage: Literal["committed"] = "committed"
    replayed: bool


class CandidateIn(StrictRequest):
    category: Annotated[Category, Lax]
    space: Annotated[Space, Lax]
    content: Content
    source: SourceIn
    source_level: Annotated[SourceLevel, Lax]
    abstract: Annotated[str, Field(min_length=1, max_length=1_000)] | None = None
    overview: Annotated[str, Field(min_length=1, max_length=20_000)] | None = None
    key: ShortText | None = None
    project_id: ShortText | None = None
    session_id: ShortText | None = None
    confidence: Annotated[float, Field(ge=0, le=1), BeforeValidator(_json_number)] | None = None
    validity: ValidityIn | None = None
    allowed_purposes: list[ShortText] = Field(default_factory=list, max_length=20)
    idempotency_key: ShortText | None = None


class CorrectionIn(StrictRequest):
    expected_version: Integer = Field(ge=1, le=INT32_MAX)
    content: Content | None = None
    abstract: Annotated[str, Field(min_length=1, max_length=1_000)] | None = None
    overview: Annotated[str, Field(min_length=1, max_length=20_000)] | None = None
    key: ShortText | None = None
    source: SourceIn | None = None
    source_level: Literal[SourceLevel.E1, SourceLevel.E2, SourceLevel.E3] = SourceLevel.E2
    confidence: Annotated[float, Field(ge=0, le=1), BeforeValidator(_json_number)] | None = None
    validity: ValidityIn | None = None
    allowed_purposes: list[ShortText] | None = Field(default=None, max_length=20)


class QueryIn(StrictRequest):
    query: Annotated[str, Field(min_length=1, max_length=2_000)]
    limit: Integer = Field(default=5, ge=1, le=50)
    categories: list[Annotated[Category, Lax]] = Field(default_factory=list)
    spaces: list[Annotated[Space, Lax]] = Field(default_factory=list)
    project_id: ShortText | None = None
    session_id: ShortText | None = None
    purpose: ShortText | None = None


class SourceOut(BaseModel):
    source_id: str
    source_type: str
    captured_at: AwareDatetime
    evidence_refs: list[str]


class ValidityOut(BaseModel):
    observed_at: AwareDatetime | None
    effective_from: AwareDatetime | None
    effective_to: AwareDatetime | None
    expires_at: AwareDatetime | None
    last_confirmed_at: AwareDatetime | None


class MemoryOut(BaseModel):
    memory_id: uuid.UUID
    version: int
    status: str
    category: str
    space: str
    owner_id: str
    key: str | None
    project_id: str | None
    session_id: str | None
    abstract: str
    overview: str | None
    content: str
    source: SourceOut
    source_level: str
    confidence: float
    validity: ValidityOut
    allowed_purposes: list[str]
    supersedes_version: int | None
    stored_at: AwareDatetime
    revision: int

    @classmethod
    def of(cls, memory: Memory) -> "MemoryOut":
        return cls(
            memory_id=memory.memory_id,
            version=memory.version,
            status=memory.status,
            category=memory.category,
            space=memory.space,
            owner_id=memory.owner_id,
            key=memory.key,
            project_id=memory.project_id,
            session_id=memory.session_id,
            abstract=memory.abstract,
            overview=memory.overview,
            content=memory.content,
            source=SourceOut(
                source_id=memory.source_id,
                source_type=memory.source_type,
                captured_at=memory.captured_at,
                evidence_refs=list(memory.evidence_refs),
            ),
            source_level=memory.source_level,
            confidence=memory.confidence,
            validity=ValidityOut(
                observed_at=memory.observed_at,
                effective_from=memory.effective_from,
                effective_to=memory.effective_to,
                expires_at=memory.expires_at,
                last_confirmed_at=memory.last_confirmed_at,
            ),
            allowed_purposes=list(memory.allowed_purposes),
            supersedes_version=memory.supersedes_version,
            stored_at=memory.stored_at,
            revision=memory.revision,
        )


class WriteOut(BaseModel):
    memory_id: uuid.UUID
    version: int
    status: str
    stage: Literal["accepted", "committed", "indexed"]
    indexes: dict[str, Literal["indexed", "pending"]]
    replayed: bool
    revision: int


class VersionSummary(BaseModel):
    version: int
    status: str
    stored_at: AwareDatetime


class MemoryDetailOut(MemoryOut):
    history: list[VersionSummary]


class QueryItem(MemoryOut):
    score: float
    score_breakdown: dict[str, float | None]


class QueryOut(BaseModel):
    items: list[QueryItem]
    snapshot_revision: int
    candidates_considered: int
    dropped_on_reread: int


class TargetUser(StrictRequest):
    """Names a *target* user (whose data an admin acts on); authorised by role, never trusted as identity."""

    identity_fields: ClassVar[frozenset[str]] = IDENTITY_FIELDS - {"user_id"}


class MemoryScopeIn(StrictRequest):
    type: Literal["memory"]
    memory_id: Annotated[uuid.UUID, Lax]


class EventScopeIn(StrictRequest):
    type: Literal["event"]
    event_id: Annotated[uuid.UUID, Lax]


class SessionScopeIn(TargetUser):
    type: Literal["session"]
    session_id: ShortText
    user_id: ShortText | None = None


class SubjectScopeIn(TargetUser):
    type: Literal["subject"]
    user_id: ShortText | None = None


ScopeIn = Annotated[MemoryScopeIn | EventScopeIn | SessionScopeIn | SubjectScopeIn, Field(discriminator="type")]


class DeletionRequestIn(StrictRequest):
    deletion_request_id: ShortText
    scope: ScopeIn


class DeletionAcceptedOut(BaseModel):
    job_id: uuid.UUID
    deletion_request_id: str
    status: str
    stage: Literal["accepted"] = "accepted"
    barrier: Literal["committed"] = "committed"
    purge_scheduled: bool
    warnings: list[str]


class LayerOut(BaseModel):
    layer: str
    status: str
    removed: int
    remaining: int | None
    evidence: dict[str, Any]
    updated_at: AwareDatetime


class DeletionJobOut(BaseModel):
    job_id: uuid.UUID
    deletion_request_id: str
    status: str
    scope: dict[str, str]
    epoch: int
    barrier_at: AwareDatetime
    updated_at: AwareDatetime
    completed_at: AwareDatetime | None
    fully_deleted: bool
    remaining_copies: list[str]
    last_error: str | None
    layers: list[LayerOut]


class HoldIn(TargetUser):
    user_id: ShortText
    reason: Annotated[str, Field(min_length=1, max_length=1_000)]


class HoldOut(BaseModel):
    hold_id: uuid.UUID
    user_id: str
    reason: str
    created_at: AwareDatetime
    released_at: AwareDatetime | None


class RecallIn(StrictRequest):
    """POST /memory-query and /recall/render. Identity comes from the key; these fields only narrow or steer."""

    query: Annotated[str, Field(min_length=1, max_length=2_000)]
    limit: Integer = Field(default=5, ge=1, le=50)
    """How many memories may be injected (seed 001 §6.4 default 5)."""
    candidate_limit: Integer = Field(default=20, ge=1, le=200)
    token_budget: Integer = Field(default=1_500, ge=16, le=100_000)
    categories: list[Annotated[Category, Lax]] = Field(default_factory=list)
    spaces: list[Annotated[Space, Lax]] = Field(default_factory=list)
    project_id: ShortText | None = None
    session_id: ShortText | None = None
    purpose: ShortText | None = None
    intent: Literal["RESUME_TASK", "ANSWER", "CHITCHAT"] | None = None
    task_id: ShortText | None = None
    request_constraints: dict[ShortText, ShortText] = Field(default_factory=dict, max_length=20)
    keys: list[ShortText] = Field(default_factory=list, max_length=20)
    min_relevance: Number = Field(default=0.05, ge=0, le=1)
    min_revision: Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER), BeforeValidator(_json_integer)] | None = None
    explain: bool = False
    trace_id: ShortText | None = None
    retrieval: Literal["hybrid", "lexical", "semantic"] = "hybrid"
    """Which candidate sources and relevance signals recall uses: ``hybrid`` (all, the default), ``lexical``
    (exact key, full text and trigram; no query embedding) or ``semantic`` (vector search alone). For ablations
    and diagnosis: every mode runs inside the same hard filters."""


class FieldProblem(BaseModel):
    field: str
    code: str
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(description="machine code, e.g. invalid_character, timestamp_out_of_range, unauthorized")
    message: str = Field(description="what went wrong and what to do")
    details: dict[str, Any] = Field(default_factory=dict, description="facts of a refusal, e.g. current_version")
    fields: list[FieldProblem] = Field(default_factory=list, description="a 422's problems, one per field")
    allowed: list[str] = Field(default_factory=list, description="a 405's methods (also in the Allow header)")
    request_id: str = Field(default="", description="a 500's id, to quote when reporting it")


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: ErrorDetail
