"""The residue scan: looks for a deletion's fingerprints everywhere mnemo keeps text, not where the purge looked.

It shares nothing with the purge's selection. The tables and columns come from the catalog: every
text, varchar, json/jsonb and text[]/varchar[] column of every base table with a ``tenant_id``, so a
table added later is scanned without editing this module. Rows are read for one tenant at a time, in
batches from a server-side cursor; each value (each string inside a JSON value or an array) is
matched against the fingerprints (:mod:`.fingerprints`). The search indexes are read too: every
``tsvector`` column (from the catalog) and the posting tables (:data:`POSTING_TABLES`), matched against
the lexeme fingerprints (:mod:`.index_fingerprints`): an index holds no text to match. Files (artifact
stores) and workflow histories are matched the same way by their callers. A hit is reported as (table, column, row id):
the place, never the text.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore, ArtifactUnavailable
from memory.deletion.fingerprints import Matcher, salt_of, strings, units
from memory.deletion.index_fingerprints import IndexMatcher, Kind
from memory.models import DeletionFingerprint

BATCH_ROWS = 500
"""Rows fetched per round trip of the server-side cursor."""
MAX_COPIES = 100
"""Copies listed per job: enough to act on; the scan stops looking once it has this many."""

OWNER_COLUMNS = ("owner_id", "user_id")
"""A row with one of these naming another user is that person's own data: the same words there are theirs,
not a remnant of the subject's (two users may store the same todo). Shared rows (owned by the tenant or
the system, or by nobody) are scanned as the subject's."""

SKIPPED_TABLES = frozenset({"deletion_probes"})
"""The older checks' transient probe texts (:mod:`.verify`), dropped in the very transaction that completes the
job: they are the verification's own copy, not a remnant."""

POSTING_TABLES = {"memory_lexemes": ("lexeme", "memory_id")}
"""Tables holding one lexeme per row (column, and the column naming the row they index): no column of theirs
is a copy alone, only an owning row's lexemes together. Declared, as the catalog cannot tell a posting table
from any table with a one-word column."""

_TEXT_COLUMNS = text(
    """
    SELECT c.table_name, c.column_name, c.data_type = 'tsvector' AS indexed
    FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
      AND c.column_name <> 'tenant_id'
      AND (c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'tsvector')
           OR (c.data_type = 'ARRAY' AND c.udt_name IN ('_text', '_varchar', '_json', '_jsonb')))
      AND EXISTS (SELECT 1 FROM information_schema.columns k
                  WHERE k.table_schema = c.table_schema AND k.table_name = c.table_name
                    AND k.column_name = 'tenant_id')
    ORDER BY c.table_name, c.ordinal_position
    """
)
_PRIMARY_KEY = text(
    """
    SELECT a.attname FROM pg_index i
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
    WHERE i.indrelid = to_regclass(quote_ident(:table)) AND i.indisprimary
    ORDER BY array_position(i.indkey::int2[], a.attnum)
    """
)


@dataclass(frozen=True)
class Copy:
    """Where a copy of deleted content remains."""

    table: str
    column: str
    row_id: str

    @property
    def label(self) -> str:
        return f"{self.table}.{self.column}#{self.row_id}"


def _stored(session: Session, tenant_id: str, job_ids: Iterable[uuid.UUID] | None
            ) -> dict[uuid.UUID, dict[Kind, dict[int, set[int]]]]:
    """The stored fingerprints of these jobs (every job of the tenant when ``None``), by kind and text."""
    statement = select(DeletionFingerprint.job_id, DeletionFingerprint.kind, DeletionFingerprint.text_no,
                       DeletionFingerprint.shingle).where(DeletionFingerprint.tenant_id == tenant_id)
    if job_ids is not None:
        statement = statement.where(DeletionFingerprint.job_id.in_(list(job_ids)))
    texts: dict[uuid.UUID, dict[Kind, dict[int, set[int]]]] = {}
    for job_id, kind, number, shingle in session.execute(statement):
        texts.setdefault(job_id, {}).setdefault(Kind(kind), {}).setdefault(number, set()).add(shingle)
    return texts


def matchers(session: Session, tenant_id: str, job_ids: Iterable[uuid.UUID] | None = None) -> dict[uuid.UUID, Matcher]:
    """The stored text fingerprints of these jobs (every job of the tenant when ``None``), one matcher per job."""
    return {job_id: Matcher(salt_of(job_id), _ordered(kinds.get(Kind.UNITS, {})))
            for job_id, kinds in _stored(session, tenant_id, job_ids).items()}


def index_matchers(session: Session, tenant_id: str, job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, IndexMatcher]:
    """The stored index fingerprints (lexeme runs, posting windows) of these jobs."""
    return {job_id: IndexMatcher(salt_of(job_id), _ordered(kinds.get(Kind.LEXEME_RUNS, {})),
                                 _ordered(kinds.get(Kind.POSTING_WINDOWS, {})))
            for job_id, kinds in _stored(session, tenant_id, job_ids).items()}


def _ordered(by_no: dict[int, set[int]]) -> list[set[int]]:
    return [by_no[n] for n in sorted(by_no)]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def text_columns(session: Session) -> dict[str, list[str]]:
    """Every text-bearing column of every tenant table, from the catalog (tsvectors apart: :func:`index_columns`)."""
    return _columns(session, indexed=False)


def index_columns(session: Session) -> dict[str, list[str]]:
    """Every ``tsvector`` column of every tenant table, from the catalog."""
    return _columns(session, indexed=True)


def _columns(session: Session, indexed: bool) -> dict[str, list[str]]:
    columns: dict[str, list[str]] = {}
    for table, column, is_index in session.execute(_TEXT_COLUMNS):
        if table not in SKIPPED_TABLES and is_index is indexed:
            columns.setdefault(table, []).append(column)
    return columns


_LINEAGE_OWNERS = {
    "memory_id": "(SELECT m.owner_id FROM memories m WHERE m.tenant_id = :tenant AND m.memory_id = t.memory_id "
                 "LIMIT 1)",
    "session_id": "(SELECT s.user_id FROM sessions s WHERE s.tenant_id = :tenant AND s.session_id = t.session_id)",
}
"""A row with no owner column of its own (a search row, a posting, a summary) belongs to whoever owns what it
was derived from: its memory, or its session. The tenant is the statement's value (``t`` is read under the same
one), not ``t.tenant_id``: a correlated key is not one a cluster distributed by tenant can route by."""


def _owner_columns(session: Session, table: str) -> list[str]:
    """SQL expressions (over the table as ``t``) naming the row's owners: its own owner columns, else its lineage."""
    names = [str(c) for c in session.execute(text(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = :table ORDER BY column_name"), {"table": table}).scalars()]
    own = [f"t.{_quote(n)}::text" for n in names if n in OWNER_COLUMNS]
    if own or table in ("memories", "sessions"):
        return own
    return [expr for column, expr in _LINEAGE_OWNERS.items() if column in names][:1]


def _rows(session: Session, tenant_id: str, table: str, columns: list[str], as_text: bool = False
          ) -> Iterator[tuple[str, set[str], dict[str, object]]]:
    """Each row's id, its owners (:data:`OWNER_COLUMNS` values) and its text-bearing values (a tsvector's in its
    text form)."""
    key = [str(name) for name in session.execute(_PRIMARY_KEY, {"table": table}).scalars() if name != "tenant_id"]
    ident = [f"t.{_quote(k)}::text" for k in key] or ["t.ctid::text"]
    owners = _owner_columns(session, table)
    selected = ", ".join([*(f"{expr} AS k{n}" for n, expr in enumerate(ident)),
                          *(f"{o} AS o{n}" for n, o in enumerate(owners)),
                          *(f"t.{_quote(c)}{'::text' if as_text else ''} AS c{n}" for n, c in enumerate(columns))])
    statement = text(f"SELECT {selected} FROM {_quote(table)} t WHERE t.tenant_id = :tenant").execution_options(
        stream_results=True, yield_per=BATCH_ROWS)  # on the statement: on the connection it would outlive the scan
    result = session.connection().execute(statement, {"tenant": tenant_id})
    for row in result:
        values = row._mapping
        row_id = "/".join(str(values[f"k{n}"]) for n in range(len(ident)))
        owned = {str(values[f"o{n}"]) for n in range(len(owners)) if values[f"o{n}"] is not None}
        yield row_id, owned, {column: values[f"c{n}"] for n, column in enumerate(columns)}


def holding(value: object, found: Mapping[uuid.UUID, Matcher]) -> set[uuid.UUID]:
    """The jobs whose texts ``value`` (each string inside it) holds a copy of: each string is cut into units once,
    whatever the number of jobs a round verifies together."""
    left, held = dict(found), set()
    for string in strings(value):
        parts = units(string)
        for job_id, matcher in list(left.items()):
            if matcher.holds(parts):
                held.add(job_id)
                del left[job_id]
        if not left:
            break
    return held


def anothers(owned: set[str], subject: str, tenant_id: str) -> bool:
    """The row belongs to a user other than the subject (not to the tenant or the system as a whole)."""
    return bool(owned - {subject, tenant_id, "system"})


def scan_database(session: Session, tenant_id: str, found: dict[uuid.UUID, Matcher], subjects: dict[uuid.UUID, str]
                  ) -> dict[uuid.UUID, list[Copy]]:
    """Every copy of each job's texts in the tenant's rows but another user's, per job (at most
    :data:`MAX_COPIES` each)."""
    copies: dict[uuid.UUID, list[Copy]] = {job_id: [] for job_id in found}
    live = {job_id: matcher for job_id, matcher in found.items() if matcher.texts}
    if not live:
        return copies
    for table, columns in text_columns(session).items():
        for row_id, owned, values in _rows(session, tenant_id, table, columns):
            looking = {job_id: matcher for job_id, matcher in live.items()
                       if not anothers(owned, subjects.get(job_id, ""), tenant_id) and len(copies[job_id]) < MAX_COPIES}
            for column, value in values.items():
                if value is not None and looking:
                    for job_id in holding(value, looking):
                        copies[job_id].append(Copy(table, column, row_id))
                        if len(copies[job_id]) >= MAX_COPIES:
                            del looking[job_id]
    return copies


def scan_indexes(session: Session, tenant_id: str, found: dict[uuid.UUID, IndexMatcher], subjects: dict[uuid.UUID, str]
                 ) -> dict[uuid.UUID, list[Copy]]:
    """Every copy of each job's texts in the tenant's search indexes but another user's: tsvector columns, and
    each owning row's postings in :data:`POSTING_TABLES` (reported under the owning row's id)."""
    copies: dict[uuid.UUID, list[Copy]] = {job_id: [] for job_id in found}
    live = {job_id: matcher for job_id, matcher in found.items() if not matcher.empty}

    def report(place: Copy, owned: set[str], value: str | list[str]) -> None:
        """A tsvector's text form is matched by runs and windows, an owning row's postings by windows."""
        for job_id, matcher in live.items():
            if anothers(owned, subjects.get(job_id, ""), tenant_id) or len(copies[job_id]) >= MAX_COPIES:
                continue
            if matcher.tsvector_copies(value) if isinstance(value, str) else matcher.holds_all_of_a_window(value):
                copies[job_id].append(place)

    if not live:
        return copies
    for table, columns in index_columns(session).items():
        for row_id, owned, values in _rows(session, tenant_id, table, columns, as_text=True):
            for column, value in values.items():
                if isinstance(value, str):
                    report(Copy(table, column, row_id), owned, value)
    for table, (lexeme, owner_row) in POSTING_TABLES.items():
        owners = _owner_columns(session, table)
        selected = ", ".join([f"t.{_quote(owner_row)}::text", *owners, f"array_agg(t.{_quote(lexeme)})"])
        statement = text(f"SELECT {selected} FROM {_quote(table)} t WHERE t.tenant_id = :tenant "
                         f"GROUP BY t.tenant_id, t.{_quote(owner_row)}").execution_options(
            stream_results=True, yield_per=BATCH_ROWS)
        for row in session.connection().execute(statement, {"tenant": tenant_id}):
            owned = {str(v) for v in row[1:-1] if v is not None}
            report(Copy(table, lexeme, str(row[0])), owned, [str(posting) for posting in row[-1]])
    return copies


@dataclass(frozen=True)
class StoredFile:
    """An artifact the scan reads: which store it is in (``record_store``, ``task_artifacts``), and its sha256."""

    label: str
    store: ArtifactStore
    sha256: str


def scan_files(files: Iterable[StoredFile], found: dict[uuid.UUID, Matcher]) -> dict[uuid.UUID, list[Copy]]:
    """Copies in artifacts, read through the artifact store in its chunks (never whole), overlapping by a tail,
    decoded as UTF-8 leniently. One deleted meanwhile holds nothing; a corrupted one is still read to its end."""
    copies: dict[uuid.UUID, list[Copy]] = {job_id: [] for job_id in found}
    for file in files:
        tail = ""
        try:
            for chunk in file.store.open(file.sha256):
                value = tail + chunk.decode("utf-8", errors="ignore")
                hit = Copy(file.label, "file", file.sha256)
                for job_id in holding(value, {j: m for j, m in found.items() if hit not in copies[j]}):
                    copies[job_id].append(hit)
                tail = value[-4_096:]
        except ArtifactUnavailable:  # gone (deleted meanwhile), or its digest did not match: what was read counts
            continue
    return copies


def tenant_files(session: Session, root: ArtifactStore, tenant_id: str) -> list[StoredFile]:
    """The artifacts that hold the tenant's bytes, read through the artifact store: its whole record store, and
    the task artifacts its rows name (that namespace is shared, content-addressed)."""
    from memory.resources.bodies import record_store  # the resource package imports the deletion package
    from memory.tasks.artifacts import task_store
    from memory.tasks.models import TaskArtifact

    records = record_store(root, tenant_id)
    files = [StoredFile("record_store", records, stored.sha256) for stored in records.list()]
    tasks = task_store(root)
    for sha in session.execute(select(TaskArtifact.sha256).where(TaskArtifact.tenant_id == tenant_id).distinct()
                               .order_by(TaskArtifact.sha256)).scalars():
        if tasks.exists(sha):
            files.append(StoredFile("task_artifacts", tasks, sha))
    return files


def workflow_ids(session: Session, tenant_id: str) -> list[str]:
    """The tenant's workflow ids, from every ``workflow_id`` column of every tenant table (the catalog's list)."""
    tables = session.execute(text(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND column_name = 'workflow_id' AND table_name IN (SELECT table_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND column_name = 'tenant_id') ORDER BY table_name")).scalars().all()
    ids: dict[str, None] = {}
    for table in tables:
        for value in session.execute(text(f"SELECT DISTINCT workflow_id FROM {_quote(table)} WHERE tenant_id = :t "
                                          "AND workflow_id IS NOT NULL"), {"t": tenant_id}).scalars():
            ids[str(value)] = None
    return list(ids)


def _others_files(session: Session, tenant_id: str) -> dict[str, set[str]]:
    """Each file (sha256) the tenant's rows name, with the owners of the rows naming it (the catalog's
    ``sha256`` columns)."""
    named: dict[str, set[str]] = {}
    tables = session.execute(text(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND column_name = 'sha256' AND table_name IN (SELECT table_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND column_name = 'tenant_id') ORDER BY table_name")).scalars().all()
    for table in tables:
        owners = _owner_columns(session, table)
        if not owners:
            continue
        for row in session.execute(text(f"SELECT t.sha256, {', '.join(owners)} "
                                        f"FROM {_quote(table)} t WHERE t.tenant_id = :t"), {"t": tenant_id}):
            named.setdefault(str(row[0]), set()).update(str(v) for v in row[1:] if v is not None)
    return named


def scan(session: Session, tenant_id: str, artifacts: ArtifactStore,
         subjects: dict[uuid.UUID, str]) -> dict[uuid.UUID, list[Copy]]:
    """The residue scan of the tenant's rows and artifact files for these jobs' fingerprints (``subjects``: each
    job's subject). A file another user's row names is theirs, as such a row is."""
    found = matchers(session, tenant_id, list(subjects))
    copies = scan_database(session, tenant_id, found, subjects)
    for job_id, more in scan_indexes(session, tenant_id, index_matchers(session, tenant_id, list(subjects)),
                                     subjects).items():
        copies[job_id] = [*copies.get(job_id, []), *more][:MAX_COPIES]
    named = _others_files(session, tenant_id)
    files = tenant_files(session, artifacts, tenant_id)
    for subject in sorted({subjects[job_id] for job_id in found}):  # each file read once per subject, not per job
        mine = [file for file in files if not anothers(named.get(file.sha256, set()), subject, tenant_id)]
        theirs = {job_id: matcher for job_id, matcher in found.items() if subjects[job_id] == subject}
        for job_id, more in scan_files(mine, theirs).items():
            copies[job_id] = [*copies[job_id], *more][:MAX_COPIES]
    return copies


def claim_scan(session: Session, tenant_id: str) -> bool:
    """Whether this transaction may run the tenant's residue scan now: one at a time per tenant, across every
    worker (a transaction-level advisory lock), so a flood of one tenant's deletions scans in turn rather than
    taking every worker slot and core at once."""
    return bool(session.execute(text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"),
                                {"key": f"residue-scan:{tenant_id}"}).scalar_one())


def scan_values(place: Copy, values: Iterable[object], found: dict[uuid.UUID, Matcher]) -> dict[uuid.UUID, list[Copy]]:
    """Copies among decoded values (a workflow history's payloads), all reported at ``place``."""
    copies: dict[uuid.UUID, list[Copy]] = {job_id: [] for job_id in found}
    for value in values:
        for job_id in holding(value, {j: m for j, m in found.items() if not copies[j]}):
            copies[job_id].append(place)
    return copies


__all__ = ["POSTING_TABLES", "Copy", "StoredFile", "claim_scan", "index_columns", "index_matchers", "matchers", "scan",
           "scan_database", "scan_files", "scan_indexes", "scan_values", "tenant_files", "text_columns",
           "workflow_ids"]
