"""What mnemo counts about itself: the figures of seed 003 §16 that the database can answer at any moment.

Each :class:`Figure` is one statement over every tenant, returning label values and a number, read in
one read-only transaction by :func:`read_figures` (the ``mnemo.metrics_scrape`` setting opens the
``metrics_scrape`` SELECT policy of migration 0018 on exactly these tables; an API key never reaches it).
Counting from the database is honest across processes: every API and worker process sees the same
figure. Labels are statuses and levels, never a tenant's data. Meanings are defined in the README
("Observability"); events that happen inside one process (a recall's conflicts) are counted there.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from sqlalchemy import Engine, text

from memory.db import global_session, set_local
from memory.deletion.jobs import JobStatus
from memory.enums import SourceLevel, Status
from memory.sessions.extraction.base import REJECTION_KINDS, RejectionKind
from memory.store.vectors import UNEMBEDDABLE
from memory.tasks.states import TaskStatus

SCRAPE_SETTING = "mnemo.metrics_scrape"
RECENT_BUNDLES = "1 hour"
"""How far back recalls of deleted content are checked (an index on bundle events keeps it bounded)."""
BARRIER_GRACE = "60 seconds"
"""A bundle counts as recalling deleted content only when built this long after the tombstone was written.
Both times are their transactions' starts: a recall that began after a barrier's transaction began but read
before it committed rightly selected the memory (the barrier is the commit), and the suite's concurrent
deletions showed such races as leaks. No barrier transaction outlives a minute (statements time out at 15 s),
so a bundle later than that read after the commit, and a selected ref there is a real leak."""


@dataclass(frozen=True)
class Figure:
    name: str
    help: str
    labels: tuple[str, ...]
    sql: str
    zeros: tuple[tuple[str, ...], ...] = ()
    """Label values reported as 0 when no row has them, so a dashboard shows every status from the start."""


HEAD = "m.status <> 'SUPERSEDED'"
_REJECTION_KIND = "CASE r.value ->> 'reason' " + " ".join(
    f"WHEN '{reason.value}' THEN '{kind.value}'" for reason, kind in REJECTION_KINDS.items()) + " END"
"""A stored refusal's kind (:data:`memory.sessions.extraction.base.REJECTION_KINDS`), in SQL."""
_MEMORY_REF = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}@[0-9]+$"
"""A bundle event's ``memory_id@version`` ref (the others are ``task:…``): cast to uuid, the join uses the key."""
STATEMENT_TIMEOUT_MS = 5_000
"""Each figure's statement is cancelled past this: a scrape's cost on the database stays bounded."""

FIGURES: tuple[Figure, ...] = (
    Figure("mnemo_tasks", "Tasks by status.", ("status",),
           "SELECT status, count(*) FROM tasks GROUP BY status", tuple((s.value,) for s in TaskStatus)),
    Figure("mnemo_deletion_jobs", "Deletion jobs by status.", ("status",),
           "SELECT status, count(*) FROM deletion_jobs GROUP BY status", tuple((s.value,) for s in JobStatus)),
    Figure("mnemo_embedding_backlog", "Current ACTIVE or CANDIDATE versions waiting for a vector.", (),
           "SELECT count(*) FROM memory_search s JOIN memories m ON m.tenant_id = s.tenant_id "
           "AND m.memory_id = s.memory_id AND m.version = s.version "
           "WHERE s.embedding IS NULL AND m.status IN ('ACTIVE', 'CANDIDATE') "
           f"AND (s.embedding_model IS NULL OR s.embedding_model NOT LIKE '{UNEMBEDDABLE}%')"),
    Figure("mnemo_memories", "Current versions (heads) by status and evidence level.", ("status", "source_level"),
           f"SELECT m.status, m.source_level, count(*) FROM memories m WHERE {HEAD} GROUP BY 1, 2",
           tuple((s.value, level.value) for s, level in product(Status, SourceLevel) if s is not Status.SUPERSEDED)),
    Figure("mnemo_memories_without_evidence",
           "ACTIVE or CANDIDATE heads that link no stored event or memory (evidence_refs empty).", ("status",),
           "SELECT m.status, count(*) FROM memories m WHERE m.status IN ('ACTIVE', 'CANDIDATE') "
           "AND jsonb_array_length(m.evidence_refs) = 0 GROUP BY 1", (("ACTIVE",), ("CANDIDATE",))),
    Figure("mnemo_unconfirmed_inferences_active", "ACTIVE E4 (a model's inference) heads nobody confirmed.", (),
           "SELECT count(*) FROM memories m WHERE m.status = 'ACTIVE' AND m.source_level = 'E4' "
           "AND m.last_confirmed_at IS NULL"),
    Figure("mnemo_session_commits", "Session commits by status.", ("status",),
           "SELECT status, count(*) FROM session_commits GROUP BY status"),
    Figure("mnemo_session_commits_with_rejections",
           "Session commits that refused something, by kind of refusal: rule (a gate rightly refused what must not "
           "be stored), schema (the extractor's answer broke the schema), unavailable, write.", ("kind",),
           f"SELECT k.kind, count(DISTINCT (c.tenant_id, c.user_id, c.session_id, c.commit_id)) FROM session_commits c "
           f"CROSS JOIN LATERAL jsonb_array_elements(c.reasons) AS r(value) "
           f"CROSS JOIN LATERAL (SELECT {_REJECTION_KIND} AS kind) k WHERE k.kind IS NOT NULL GROUP BY 1",
           tuple((kind.value,) for kind in RejectionKind)),
    Figure("mnemo_task_operations", "Side-effect operations (publications) by status.", ("status",),
           "SELECT status, count(*) FROM task_operations GROUP BY status",
           (("PENDING",), ("SUCCEEDED",), ("FAILED",), ("UNKNOWN_OUTCOME",))),
    Figure("mnemo_task_duplicate_side_effects",
           "Artifacts that succeeded more than once at the same destination for the same task (must stay 0).", (),
           "SELECT count(*) FROM (SELECT 1 FROM task_operations WHERE status = 'SUCCEEDED' "
           "GROUP BY tenant_id, task_id, destination, artifact_sha256 HAVING count(*) > 1) d"),
    Figure("mnemo_unknown_outcome_oldest_seconds",
           "Age of the oldest operation still in UNKNOWN_OUTCOME (0 when none): reconcile time so far.", (),
           "SELECT coalesce(max(extract(epoch FROM now() - created_at)), 0) FROM task_operations "
           "WHERE status = 'UNKNOWN_OUTCOME'"),
    Figure("mnemo_deletion_propagation_seconds_max",
           "Longest barrier-to-completed time of the deletion jobs completed in the last 24 hours.", (),
           "SELECT coalesce(max(extract(epoch FROM completed_at - barrier_at)), 0) FROM deletion_jobs "
           "WHERE status = 'completed' AND completed_at > now() - interval '24 hours'"),
    Figure("mnemo_deletion_open_oldest_seconds",
           "Age of the oldest deletion job not completed yet (0 when none).", (),
           "SELECT coalesce(max(extract(epoch FROM now() - barrier_at)), 0) FROM deletion_jobs "
           "WHERE status <> 'completed'"),
    Figure("mnemo_recalls_of_deleted_content",
           f"Memories selected into a bundle of the last {RECENT_BUNDLES} built over {BARRIER_GRACE} after their "
           "memory or subject tombstone was written (must stay 0).", (),
           "SELECT count(*) FROM audit_log a "
           "CROSS JOIN LATERAL jsonb_array_elements_text(a.detail -> 'selected_refs') AS ref(value) "
           "JOIN memories m ON m.tenant_id = a.tenant_id AND m.version = 1 AND m.memory_id = CASE "
           f"WHEN ref.value ~ '{_MEMORY_REF}' THEN CAST(split_part(ref.value, '@', 1) AS uuid) END "
           f"JOIN tombstones t ON t.tenant_id = a.tenant_id AND t.created_at < a.at - interval '{BARRIER_GRACE}' AND ("
           "(t.target_type = 'memory' AND t.target_id = m.memory_id::text) "
           "OR (t.target_type = 'subject' AND t.owner_user_id = m.owner_id)) "
           f"WHERE a.action = 'MEMORY_BUNDLE_BUILT' AND a.at > now() - interval '{RECENT_BUNDLES}'"),
)


def read_figures(engine: Engine) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    """Every figure's rows (label values, number), in one read-only transaction over all tenants."""
    out: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    with global_session(engine) as session:
        session.execute(text("SET TRANSACTION READ ONLY"))
        set_local(session, SCRAPE_SETTING, "on")
        session.execute(text(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}"))
        for figure in FIGURES:
            rows = session.execute(text(figure.sql))
            counted = {tuple(str(v) for v in row[:-1]): float(row[-1] or 0) for row in rows}
            out[figure.name] = [*counted.items(), *((z, 0.0) for z in figure.zeros if z not in counted)]
    return out
