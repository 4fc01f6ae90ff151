"""Versioned memories: create (as candidate or active), confirm, read, correct.

A correction never edits a row: it marks the head SUPERSEDED and inserts the
next version, and the search projection follows in the same transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from psycopg.types.json import Jsonb
from sqlalchemy import ARRAY, UUID, ColumnElement, Text, and_, any_, bindparam, select, text, update
from sqlalchemy.orm import Session

from memory.enums import USER_CATEGORIES, Category, Role, SourceLevel, Space, Status
from memory.epochs import guard_write
from memory.errors import Conflict, IdempotencyConflict, InvalidInput, MnemoError, NotFound, VersionConflict
from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry, Memory, MemoryEvent
from memory.store.events import next_revision, next_revisions
from memory.store.permissions import MemoryAction, require
from memory.store.projection import write_projection, write_projections
from memory.store.visibility import not_tombstoned, visible_to

ABSTRACT_CHARS = 200
"""L0 is a one-line abstract (~100 tokens); when the caller sends none we cut the content."""

MAX_CONTENT_CHARS = 100_000
"""The most characters a memory's content may hold, however it was given (as ``content`` or as a message)."""

DEFAULT_CONFIDENCE = {SourceLevel.E1: 1.0, SourceLevel.E2: 0.9, SourceLevel.E3: 0.8, SourceLevel.E4: 0.5}


@dataclass(frozen=True)
class Source:
    source_id: str
    source_type: str
    captured_at: datetime
    evidence_refs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Validity:
    """When a memory holds. Its effective window must end after it starts (the database's CHECK says the
    same): checked here, where every write's validity is built, so a bad window is a 422, never a 500."""

    observed_at: datetime | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        start, end = self.effective_from, self.effective_to
        if start is not None and end is not None and end <= start:
            raise InvalidInput(
                f"validity.effective_to ({end.isoformat()}) must be after validity.effective_from "
                f"({start.isoformat()}): a window that ends before it starts holds at no time",
                code="invalid_validity_window",
            )


@dataclass(frozen=True)
class NewMemory:
    category: Category
    space: Space
    content: str
    source: Source
    source_level: SourceLevel
    abstract: str | None = None
    overview: str | None = None
    key: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    confidence: float | None = None
    validity: Validity = field(default_factory=Validity)
    allowed_purposes: tuple[str, ...] = ()
    idempotency_key: str | None = None
    quote_start: int | None = None
    """Where in ``content`` a quoted message begins (:func:`memory.store.message_text.quote_start`)."""


@dataclass(frozen=True)
class Correction:
    """What a PATCH changes; ``None`` keeps the current version's value."""

    expected_version: int
    content: str | None = None
    abstract: str | None = None
    overview: str | None = None
    key: str | None = None
    source: Source | None = None
    source_level: SourceLevel = SourceLevel.E2
    confidence: float | None = None
    validity: Validity | None = None
    allowed_purposes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WriteResult:
    memory: Memory
    replayed: bool = False


def _owner_for(principal: PrincipalContext, new: NewMemory) -> str:
    """The owner follows from the space and the credential, never from the request."""
    require(principal, MemoryAction.CREATE, new.space)
    if new.space in (Space.USER, Space.SESSION):
        if new.category not in USER_CATEGORIES:
            raise InvalidInput(
                f"category {new.category.value} belongs in AGENT space, not {new.space.value}",
                code="category_space_mismatch",
            )
        if new.space is Space.SESSION and not new.session_id:
            raise InvalidInput("SESSION space memories need a session_id", code="session_id_required")
        return principal.user_id
    if new.space is Space.AGENT:
        if new.category in USER_CATEGORIES:
            raise InvalidInput(
                f"category {new.category.value} belongs in USER space, not AGENT", code="category_space_mismatch"
            )
        if principal.agent_id is None:
            raise InvalidInput(
                "AGENT space memories need a credential bound to an agent (create the key with --agent)",
                code="agent_credential_required",
            )
        return principal.agent_id
    return principal.tenant_id if new.space is Space.TENANT else "system"


def initial_status(principal: PrincipalContext, level: SourceLevel) -> Status:
    """ACTIVE at once for a memory writer with E1-E3 evidence; a model's inference (E4) never is."""
    if principal.has(Role.MEMORY_WRITER) and level is not SourceLevel.E4:
        return Status.ACTIVE
    return Status.CANDIDATE


def _stored_content(content: str) -> str:
    """The content as it will be stored, refused past :data:`MAX_CONTENT_CHARS` whatever form it was built from
    (a ``message`` and the one it answers can together be far longer than either field's own limit)."""
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(
            f"the memory's content would be {len(content)} characters; at most {MAX_CONTENT_CHARS} are stored "
            "(a message's text, what it shared and the message it answers count together): shorten it",
            code="content_too_long",
            details={"chars": len(content), "max_chars": MAX_CONTENT_CHARS},
        )
    return content


def abstract_for(content: str, abstract: str | None) -> str:
    if abstract:
        return abstract
    line = " ".join(content.split())
    return line if len(line) <= ABSTRACT_CHARS else line[: ABSTRACT_CHARS - 1] + "…"


def create_memory(
    session: Session,
    principal: PrincipalContext,
    new: NewMemory,
    request_sha256: str | None = None,
    *,
    held_epoch: int | None = None,
) -> WriteResult:
    """Insert version 1 (idempotent when an idempotency key is given) and its projection.

    ``held_epoch`` is the owner's deletion epoch a long-running writer captured when it
    started; if a deletion happened since, the write is refused (:class:`StaleEpoch`).
    """
    (result,) = create_memories(session, principal, [(new, request_sha256)], held_epoch=held_epoch)
    if isinstance(result, MnemoError):
        raise result
    return result


MemoryItem = tuple[NewMemory, str | None] | MnemoError
"""A memory to create with its request digest, or the error that already refused it (a body that did not parse)."""


def create_memories(
    session: Session, principal: PrincipalContext, items: Sequence[MemoryItem], *, held_epoch: int | None = None,
) -> list[WriteResult | MnemoError]:
    """Create each memory of ``items`` as :func:`create_memory` would alone, in order, in the caller's transaction:
    one look-up of the idempotency keys, one INSERT of the rows, one of their projection. An item the rules refuse
    is that item's error and writes nothing; an item with the key of an earlier valid one is its replay."""
    news = [item[0] for item in items if not isinstance(item, MnemoError)]
    stored = _memories_by_key(session, principal, {new.idempotency_key for new in news if new.idempotency_key})
    heads = _heads(session, principal, {memory.memory_id for memory in stored.values()})
    known = _known_events(session, principal, news)
    results: list[WriteResult | MnemoError | int] = []  # an int: the index of the earlier item this one replays
    planned: list[tuple[int, Memory]] = []
    first: dict[str, tuple[int, str | None]] = {}
    for index, item in enumerate(items):
        if isinstance(item, MnemoError):
            results.append(item)
            continue
        new, digest = item
        key = new.idempotency_key
        if key is not None and key in stored:
            results.append(_replay(stored[key], heads, digest))
        elif key is not None and key in first:
            earlier, earlier_digest = first[key]
            results.append(earlier if earlier_digest == digest else _key_conflict(key))
        else:
            try:
                _cites_a_known_event(new, known)
                planned.append((index, _version_one(principal, new, digest)))
            except MnemoError as refused:
                results.append(refused)
                continue
            results.append(index)
            if key is not None:
                first[key] = (index, digest)
    inserted = _insert_memories(session, principal, [memory for _, memory in planned], held_epoch)
    made = _made(session, principal, planned, inserted)
    return [result if not isinstance(result, int) else
            made[result] if result == index else _again(made[result]) for index, result in enumerate(results)]


def _made(session: Session, principal: PrincipalContext, planned: list[tuple[int, Memory]],
          inserted: set[uuid.UUID]) -> dict[int, WriteResult | MnemoError]:
    """Each planned item's result: its new memory, or, where a concurrent request committed the same key after
    this one looked it up (a retry, an import re-run, another API replica), a replay of that request's memory."""
    raced = {memory.idempotency_key for _, memory in planned
             if memory.memory_id not in inserted and memory.idempotency_key is not None}
    winners = _memories_by_key(session, principal, raced)
    heads = _heads(session, principal, {memory.memory_id for memory in winners.values()})
    made: dict[int, WriteResult | MnemoError] = {}
    for index, memory in planned:
        if memory.memory_id in inserted:
            made[index] = WriteResult(memory)
        else:
            assert memory.idempotency_key is not None  # only a key can conflict
            made[index] = _replay(winners[memory.idempotency_key], heads, memory.request_sha256)
    return made


def _again(first: WriteResult | MnemoError) -> WriteResult | MnemoError:
    """An item repeating an earlier item's key in the same batch: that item's memory, replayed (or its error)."""
    return WriteResult(first.memory, replayed=True) if isinstance(first, WriteResult) else first


UUID_TYPE = UUID(as_uuid=True)

EVENT_REF = "event:"
"""How a memory names the event it comes from (``source.source_id``), as deletions follow it back."""


def _cited_event(new: NewMemory) -> uuid.UUID | None:
    """The event ``new`` names as its source (``event:<id>``); a malformed id names none that exists."""
    if not new.source.source_id.startswith(EVENT_REF):
        return None
    try:
        return uuid.UUID(new.source.source_id.removeprefix(EVENT_REF))
    except ValueError:
        return uuid.UUID(int=0)


def _known_events(session: Session, principal: PrincipalContext, news: Sequence[NewMemory]) -> set[uuid.UUID]:
    """Of the events these memories cite, those the caller's tenant holds and has not purged (one query)."""
    cited = {event_id for event_id in map(_cited_event, news) if event_id is not None}
    if not cited:
        return set()
    ids = bindparam("ids", list(cited), type_=ARRAY(UUID_TYPE))
    return set(session.execute(select(MemoryEvent.event_id).where(
        MemoryEvent.tenant_id == principal.tenant_id, MemoryEvent.event_id == any_(ids),
        MemoryEvent.purged_at.is_(None),
    )).scalars())


def _cites_a_known_event(new: NewMemory, known: set[uuid.UUID]) -> None:
    """A memory citing an event as its source needs that event: else deleting it could not follow the link,
    and another tenant's id would be stored as if it were one of ours."""
    cited = _cited_event(new)
    if cited is not None and cited not in known:
        raise InvalidInput(
            f"source.source_id {new.source.source_id!r} names no event of your tenant: record the event first "
            "(POST /memory-events) and cite the event_id it returns",
            code="unknown_source_event", details={"source_id": new.source.source_id},
        )


def _memories_by_key(session: Session, principal: PrincipalContext, keys: set[str]) -> dict[str, Memory]:
    """The memories the caller created with these idempotency keys (keys are the caller's own, 0023: another
    user's equal key is another key)."""
    if not keys:
        return {}
    found = session.execute(
        select(Memory).where(
            Memory.tenant_id == principal.tenant_id, Memory.created_by == principal.user_id,
            Memory.idempotency_key == any_(bindparam("keys", list(keys), type_=ARRAY(Text))),
        )
    ).scalars()
    return {memory.idempotency_key: memory for memory in found if memory.idempotency_key is not None}


def _heads(session: Session, principal: PrincipalContext, memory_ids: set[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    """The current versions of these memories the principal may read (:func:`head_of` of each, in one query)."""
    if not memory_ids:
        return {}
    ids = bindparam("ids", list(memory_ids), type_=ARRAY(UUID_TYPE))
    found = session.execute(select(Memory).where(readable_heads(principal), Memory.memory_id == any_(ids)))
    return {memory.memory_id: memory for memory in found.scalars()}


def _key_conflict(key: str) -> IdempotencyConflict:
    return IdempotencyConflict(f"idempotency key {key!r} was already used with a different request body")


def _replay(existing: Memory, heads: dict[uuid.UUID, Memory], digest: str | None) -> WriteResult | MnemoError:
    """A key stored before: the same body replays the memory's current version, another is a conflict."""
    if existing.request_sha256 != digest:
        assert existing.idempotency_key is not None
        return _key_conflict(existing.idempotency_key)
    head = heads.get(existing.memory_id)
    if head is None:
        return NotFound(f"memory {existing.memory_id} does not exist")
    return WriteResult(head, replayed=True)


def _version_one(principal: PrincipalContext, new: NewMemory, request_sha256: str | None) -> Memory:
    """Version 1 of ``new`` as the rules allow it (its content's length, its quote, its owner by space and
    credential); its revision is drawn when it is inserted. Raises the rule's :class:`MnemoError`."""
    _stored_content(new.content)
    if new.quote_start is not None and not 0 < new.quote_start < len(new.content):
        raise InvalidInput("a quoted message begins inside the content", code="quote_outside_content")
    level = new.source_level
    return Memory.of_statement(
        tenant_id=principal.tenant_id,
        memory_id=uuid.uuid4(),
        version=1,
        status=initial_status(principal, level).value,
        category=new.category.value,
        space=new.space.value,
        owner_id=_owner_for(principal, new),
        key=new.key,
        project_id=new.project_id,
        session_id=new.session_id,
        abstract=abstract_for(new.content, new.abstract),
        overview=new.overview,
        content=new.content,
        quote_start=new.quote_start,
        source_id=new.source.source_id,
        source_type=new.source.source_type,
        captured_at=new.source.captured_at,
        evidence_refs=list(new.source.evidence_refs),
        source_level=level.value,
        confidence=new.confidence if new.confidence is not None else DEFAULT_CONFIDENCE[level],
        observed_at=new.validity.observed_at,
        effective_from=new.validity.effective_from,
        effective_to=new.validity.effective_to,
        expires_at=new.validity.expires_at,
        last_confirmed_at=None,
        allowed_purposes=list(new.allowed_purposes),
        supersedes_version=None,
        created_by=principal.user_id,
        idempotency_key=new.idempotency_key,
        request_sha256=request_sha256,
    )


def _insert_memories(session: Session, principal: PrincipalContext, memories: list[Memory],
                     held_epoch: int | None) -> set[uuid.UUID]:
    """Insert the rows and their projection once each owner's deletion epoch is checked (and share-locked); the
    ids inserted. A row whose idempotency key a concurrent request committed meanwhile is not inserted."""
    if not memories:
        return set()
    for owner_id in sorted({memory.owner_id for memory in memories}):
        guard_write(session, principal.tenant_id, owner_id, held_epoch)
    for memory, revision in zip(memories, next_revisions(session, len(memories)), strict=True):
        memory.revision = revision
    inserted = set(session.execute(INSERT_MEMORIES, {
        "tenant_id": principal.tenant_id, "created_by": principal.user_id,
        **{name: [getattr(memory, name) for memory in memories] for name in MEMORY_COLUMNS},
        "evidence_refs": [Jsonb(memory.evidence_refs) for memory in memories],
        "allowed_purposes": [Jsonb(memory.allowed_purposes) for memory in memories],
    }).scalars())
    write_projections(session, [memory for memory in memories if memory.memory_id in inserted])
    return inserted


MEMORY_COLUMNS = {
    "memory_id": "uuid", "status": "text", "category": "text", "space": "text", "owner_id": "text", "key": "text",
    "project_id": "text", "session_id": "text", "abstract": "text", "overview": "text", "content": "text",
    "quote_start": "integer", "source_id": "text", "source_type": "text", "captured_at": "timestamptz",
    "source_level": "text", "confidence": "double precision", "observed_at": "timestamptz",
    "effective_from": "timestamptz", "effective_to": "timestamptz", "expires_at": "timestamptz",
    "idempotency_key": "text", "request_sha256": "text", "revision": "bigint", "evidence_refs": "jsonb",
    "allowed_purposes": "jsonb",
}
"""The columns of a version 1 that differ by memory, with their types (the lists' elements are cast to them)."""

INSERT_MEMORIES = text(
    f"INSERT INTO memories (tenant_id, version, created_by, last_confirmed_at, supersedes_version, "
    f"{', '.join(MEMORY_COLUMNS)}) "
    f"SELECT :tenant_id, 1, :created_by, NULL, NULL, "
    f"{', '.join(f'm.{name}' for name in MEMORY_COLUMNS if name != 'allowed_purposes')}, "
    f"ARRAY(SELECT jsonb_array_elements_text(m.allowed_purposes)) "
    f"FROM unnest({', '.join(f'CAST(:{name} AS {kind}[])' for name, kind in MEMORY_COLUMNS.items())}) "
    f"AS m({', '.join(MEMORY_COLUMNS)}) "
    f"ON CONFLICT (tenant_id, created_by, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING "
    f"RETURNING memory_id"
)
"""Version 1 of a batch's memories in one statement whose text never changes with the batch's size (a list per
column, unnested); ``allowed_purposes`` (a ``text[]`` per row) travels as JSON, as arrays of arrays cannot."""


def readable_heads(principal: PrincipalContext) -> ColumnElement[bool]:
    """The memories' current versions the principal may read (candidates and expired ones included, as
    ``GET /memories/{id}`` shows them): the scope wall, no superseded or deleted version, no deletion barrier."""
    return and_(
        visible_to(principal),
        Memory.status.notin_([Status.SUPERSEDED.value, Status.DELETED.value]),
        not_tombstoned(),
    )


def head_of(session: Session, principal: PrincipalContext, memory_id: uuid.UUID, *, lock: bool = False) -> Memory:
    """The current (not superseded) version the principal may see, else :class:`NotFound`."""
    statement = select(Memory).where(readable_heads(principal), Memory.memory_id == memory_id)
    if lock:
        statement = statement.with_for_update()
    memory = session.execute(statement).scalar_one_or_none()
    if memory is None:
        raise NotFound(f"memory {memory_id} does not exist")
    return memory


def memories_about(session: Session, principal: PrincipalContext, limit: int) -> list[Memory]:
    """The current versions of the principal's own USER and SESSION memories (what mnemo remembers about
    them), by category, newest first."""
    return list(
        session.execute(
            select(Memory)
            .where(
                readable_heads(principal),
                Memory.space.in_([Space.USER.value, Space.SESSION.value]),
                Memory.owner_id == principal.user_id,
            )
            .order_by(Memory.category, Memory.stored_at.desc(), Memory.memory_id)
            .limit(limit)
        ).scalars()
    )


def version_of(session: Session, principal: PrincipalContext, memory_id: uuid.UUID, version: int) -> Memory:
    """One historical version, under the same visibility wall as the head."""
    head_of(session, principal, memory_id)
    memory = session.execute(
        select(Memory).where(visible_to(principal), Memory.memory_id == memory_id, Memory.version == version)
    ).scalar_one_or_none()
    if memory is None:
        raise NotFound(f"memory {memory_id} has no version {version}")
    return memory


def history(session: Session, principal: PrincipalContext, memory_id: uuid.UUID) -> list[Memory]:
    """Every version, oldest first (the caller has already been shown the head)."""
    return list(
        session.execute(
            select(Memory)
            .where(visible_to(principal), Memory.memory_id == memory_id, Memory.status != Status.DELETED.value)
            .order_by(Memory.version)
        ).scalars()
    )


def confirm_candidate(session: Session, principal: PrincipalContext, memory_id: uuid.UUID) -> Memory:
    """A memory writer turns a CANDIDATE into ACTIVE; a model's inference about a person never is."""
    memory = head_of(session, principal, memory_id, lock=True)
    require(principal, MemoryAction.CONFIRM, memory.space)
    if memory.status != Status.CANDIDATE.value:
        raise Conflict(f"memory {memory_id} is {memory.status}, not CANDIDATE", code="not_a_candidate")
    if memory.source_level == SourceLevel.E4.value and memory.category in {Category.PROFILE, Category.PREFERENCE}:
        raise Conflict(
            "a model's inference (E4) cannot become a profile or preference; "
            "record what the user said instead (E1/E2) with POST /memory-candidates",
            code="inference_not_confirmable",
        )
    memory.status = Status.ACTIVE.value
    memory.last_confirmed_at = _db_now(session)
    memory.revision = next_revision(session)
    session.flush()
    write_projection(session, memory)
    return memory


def correct_memory(
    session: Session, principal: PrincipalContext, memory_id: uuid.UUID, correction: Correction
) -> Memory:
    """Supersede the head with a new version in one transaction; a stale expected_version is a 409."""
    head = head_of(session, principal, memory_id, lock=True)
    require(principal, MemoryAction.CORRECT, head.space)
    guard_write(session, head.tenant_id, head.owner_id, None)
    if head.version != correction.expected_version:
        raise VersionConflict(
            f"memory {memory_id} is at version {head.version}, not {correction.expected_version}; "
            "re-read it and retry with the current version",
            details={"current_version": head.version},
        )
    if head.status not in (Status.ACTIVE.value, Status.CANDIDATE.value):
        raise Conflict(f"memory {memory_id} is {head.status} and cannot be corrected", code="not_correctable")
    if correction.source_level is SourceLevel.E4:
        raise InvalidInput("a model's inference (E4) cannot correct a memory", code="inference_cannot_correct")
    now = _db_now(session)
    source = correction.source or Source(
        source_id=f"api-key:{principal.key_id}", source_type="USER_CORRECTION", captured_at=now
    )
    validity = correction.validity or Validity(
        observed_at=head.observed_at,
        effective_from=head.effective_from,
        effective_to=head.effective_to,
        expires_at=head.expires_at,
    )
    content = _stored_content(correction.content if correction.content is not None else head.content)
    if correction.content is None:  # same content: keep its summaries unless replaced
        abstract = correction.abstract or head.abstract
        overview = correction.overview if correction.overview is not None else head.overview
    else:  # new content: summaries of the old content no longer describe it
        abstract = abstract_for(content, correction.abstract)
        overview = correction.overview
    session.execute(
        update(Memory)
        .where(Memory.tenant_id == head.tenant_id, Memory.memory_id == memory_id, Memory.version == head.version)
        .values(status=Status.SUPERSEDED.value)
    )
    new = Memory(
        tenant_id=head.tenant_id,
        memory_id=memory_id,
        version=head.version + 1,
        status=Status.ACTIVE.value,
        category=head.category,
        space=head.space,
        owner_id=head.owner_id,
        key=correction.key if correction.key is not None else head.key,
        project_id=head.project_id,
        session_id=head.session_id,
        abstract=abstract,
        overview=overview,
        content=content,
        quote_start=head.quote_start if content == head.content else None,  # a new text quotes nothing known
        source_id=source.source_id,
        source_type=source.source_type,
        captured_at=source.captured_at,
        evidence_refs=list(source.evidence_refs),
        source_level=correction.source_level.value,
        confidence=correction.confidence
        if correction.confidence is not None
        else DEFAULT_CONFIDENCE[correction.source_level],
        observed_at=validity.observed_at,
        effective_from=validity.effective_from,
        effective_to=validity.effective_to,
        expires_at=validity.expires_at,
        last_confirmed_at=now,
        allowed_purposes=list(correction.allowed_purposes)
        if correction.allowed_purposes is not None
        else list(head.allowed_purposes),
        supersedes_version=head.version,
        created_by=principal.user_id,
        idempotency_key=None,
        request_sha256=None,
        revision=next_revision(session),
    )
    session.expunge(head)
    session.add(new)
    session.add(
        AuditEntry(
            tenant_id=new.tenant_id, actor=principal.user_id, action="MEMORY_REVISED",
            memory_id=memory_id, version=new.version, detail={"supersedes_version": head.version},
        )
    )
    session.flush()
    write_projection(session, new)
    return new


def expire_memory(session: Session, principal: PrincipalContext, memory_id: uuid.UUID) -> Memory:
    """Expire: no longer a basis for answers, but kept (unlike delete) and not a new fact (unlike revise)."""
    memory = head_of(session, principal, memory_id, lock=True)
    require(principal, MemoryAction.EXPIRE, memory.space)
    if memory.status not in (Status.ACTIVE.value, Status.CANDIDATE.value):
        raise Conflict(f"memory {memory_id} is {memory.status} and cannot expire", code="not_expirable")
    memory.status = Status.EXPIRED.value
    memory.expires_at = _db_now(session)
    memory.revision = next_revision(session)
    session.add(
        AuditEntry(
            tenant_id=memory.tenant_id, actor=principal.user_id, action="MEMORY_EXPIRED",
            memory_id=memory.memory_id, version=memory.version,
        )
    )
    session.flush()
    return memory


def _db_now(session: Session) -> datetime:
    """Transaction time from the database, so every row of one write carries the same instant."""
    value = session.execute(text("SELECT now()")).scalar_one()
    assert isinstance(value, datetime)
    return value.astimezone(UTC)


__all__ = [
    "Correction",
    "NewMemory",
    "Source",
    "Validity",
    "WriteResult",
    "confirm_candidate",
    "correct_memory",
    "create_memories",
    "create_memory",
    "expire_memory",
    "head_of",
    "history",
    "initial_status",
    "readable_heads",
    "version_of",
]
