"""Sessions: messages with a per-session sequence, structured summaries, commits and what they produced.

- ``sessions``: one conversation of a user (and agent), optionally in a project and about a task. The
  row is locked to hand out ``sequence_no`` values, so a session's messages are numbered 1, 2, 3 ... in
  the order they were stored, with no gap and no duplicate under concurrent posts. ``profile_snapshot``
  holds *refs* to the profile memories injected at session start (ids, versions, sources), never their
  text: the text is read from the memory at window time, so a deletion or correction reaches it.
  ``writer_roles`` are the roles of the key that last posted messages: a commit started by policy (no
  request) writes with them.
- ``memory_events.sequence_no``: messages stay memory events (one home for source events, one deletion
  path); the sequence is unique per session.
- ``session_summaries``: immutable versions of a structured summary (seed 003 §5). ``evidence_refs`` lists
  ``event:<id>`` of every cited event, indexed like ``memories.evidence_refs`` so a deletion finds the
  summaries to rebuild in one lookup.
- ``session_commits``: one row per ``commit_id``: the stage it covers, its workflow, status, counts, stats.
- ``session_links``: what a session used (bundles, profile) and produced (memories created or merged).
- ``session_choices``: a temporary constraint chosen in a session ("这次用纯文本"): three sessions with the
  same choice make a stable (E3) preference. Keyed by the event that chose it, so deleting the event
  deletes the choice.
- ``memories.occurrences``: TOOL_EXPERIENCE and SKILL_EXECUTION memories accumulate how often they were seen.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TABLES = ("sessions", "session_summaries", "session_commits", "session_links", "session_choices")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE sessions (
            tenant_id text NOT NULL REFERENCES tenants (tenant_id),
            session_id text NOT NULL,
            user_id text NOT NULL,
            agent_id text,
            project_id text,
            task_id text,
            title text,
            status text NOT NULL DEFAULT 'active',
            request_sha256 text NOT NULL,
            profile_snapshot jsonb NOT NULL DEFAULT '[]',
            next_sequence bigint NOT NULL DEFAULT 1,
            committed_through bigint NOT NULL DEFAULT 0,
            writer_roles text[] NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            last_message_at timestamptz,
            revision bigint NOT NULL,
            purged_at timestamptz,
            PRIMARY KEY (tenant_id, session_id)
        );
        CREATE INDEX sessions_by_user ON sessions (tenant_id, user_id, last_message_at);

        ALTER TABLE memory_events ADD COLUMN sequence_no bigint;
        CREATE UNIQUE INDEX memory_events_session_sequence ON memory_events (tenant_id, session_id, sequence_no)
            WHERE sequence_no IS NOT NULL;

        CREATE TABLE session_summaries (
            tenant_id text NOT NULL,
            session_id text NOT NULL,
            version integer NOT NULL,
            summary_id uuid NOT NULL,
            commit_id text,
            reason text NOT NULL,
            from_sequence bigint NOT NULL,
            to_sequence bigint NOT NULL,
            body jsonb NOT NULL,
            abstract text NOT NULL,
            overview text NOT NULL,
            evidence_refs jsonb NOT NULL DEFAULT '[]',
            task_observation jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            superseded_at timestamptz,
            purged_at timestamptz,
            revision bigint NOT NULL,
            PRIMARY KEY (tenant_id, session_id, version),
            UNIQUE (tenant_id, summary_id),
            FOREIGN KEY (tenant_id, session_id) REFERENCES sessions
        );
        CREATE UNIQUE INDEX session_summaries_by_commit ON session_summaries (tenant_id, session_id, commit_id)
            WHERE commit_id IS NOT NULL;
        CREATE INDEX session_summaries_evidence ON session_summaries USING gin (evidence_refs);

        CREATE TABLE session_commits (
            tenant_id text NOT NULL,
            session_id text NOT NULL,
            commit_id text NOT NULL,
            workflow_id text NOT NULL,
            status text NOT NULL,
            trigger text NOT NULL,
            requested_by text NOT NULL,
            requester_roles text[] NOT NULL,
            held_epoch bigint NOT NULL,
            from_sequence bigint NOT NULL,
            to_sequence bigint NOT NULL,
            summary_id uuid,
            memories jsonb NOT NULL DEFAULT '{}',
            stats jsonb NOT NULL DEFAULT '{}',
            reasons jsonb NOT NULL DEFAULT '[]',
            error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            completed_at timestamptz,
            PRIMARY KEY (tenant_id, session_id, commit_id),
            FOREIGN KEY (tenant_id, session_id) REFERENCES sessions
        );

        CREATE TABLE session_links (
            tenant_id text NOT NULL,
            session_id text NOT NULL,
            target text NOT NULL,
            relation text NOT NULL,
            commit_id text,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, session_id, target, relation),
            FOREIGN KEY (tenant_id, session_id) REFERENCES sessions
        );

        CREATE TABLE session_choices (
            tenant_id text NOT NULL,
            event_id uuid NOT NULL,
            choice_key text NOT NULL,
            user_id text NOT NULL,
            session_id text NOT NULL,
            choice_value text NOT NULL,
            PRIMARY KEY (tenant_id, event_id, choice_key),
            FOREIGN KEY (tenant_id, event_id) REFERENCES memory_events (tenant_id, event_id) ON DELETE CASCADE
        );
        CREATE INDEX session_choices_by_choice ON session_choices (tenant_id, user_id, choice_key, choice_value);

        ALTER TABLE memories ADD COLUMN occurrences integer NOT NULL DEFAULT 1;
        """
    )
    for table in TABLES:
        isolate_by_tenant(table)


def downgrade() -> None:
    op.execute("ALTER TABLE memories DROP COLUMN occurrences")
    op.execute("DROP TABLE session_choices, session_links, session_commits, session_summaries, sessions")
    op.execute("DROP INDEX memory_events_session_sequence")
    op.execute("ALTER TABLE memory_events DROP COLUMN sequence_no")
