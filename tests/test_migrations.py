"""The ORM models and the Alembic migrations describe the same tables and columns."""

import importlib
import time
import uuid
from functools import partial

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.exc import IntegrityError

from api.devstack.postgres import PostgresInfo
from memory.db import make_engine, tenant_session
from memory.identity.auth import create_api_key
from memory.knowledge.models import KnowledgeCandidate
from memory.skills.models import SkillBlob, SkillVersion
from memory.tables import metadata
from memory.tasks import leases
from memory.tasks.definition_store import put_definition
from memory.tasks.definitions import from_body
from memory.tasks.models import TaskDefinitionRow, TaskSchedule
from migrations import alembic_config, upgrade
from tests.factories import alices_memory, scratch_database
from tests.tasks.agent_steps import open_step, recorded_task

# Indexes, RLS policies and partial unique constraints live only in the migrations.
STRUCTURAL = {"add_table", "remove_table", "add_column", "remove_column"}
COLUMN_CHANGES = {"modify_type", "modify_nullable"}


def _differences(url: str) -> list[object]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            diffs = compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()
    found: list[object] = []
    for diff in diffs:
        # Column modifications come grouped in a list; everything else is a tuple whose first item is the op.
        ops = diff if isinstance(diff, list) else [diff]
        found += [op for op in ops if op[0] in STRUCTURAL | COLUMN_CHANGES]
    return found


def test_models_match_the_migrated_schema(postgres: PostgresInfo) -> None:
    assert _differences(postgres.url()) == []


def test_database_is_at_the_single_head(postgres: PostgresInfo) -> None:
    config = alembic_config(postgres.url())
    heads = ScriptDirectory.from_config(config).get_heads()
    engine = create_engine(postgres.url())
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_heads()
    engine.dispose()
    assert len(heads) == 1
    assert current == tuple(heads)


def test_0006_0008_and_0009_rederive_projections_written_before_them(postgres: PostgresInfo) -> None:
    """A projection row written before stemming (0006) and before postings (0008, 0009) is re-derived by the upgrade."""
    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        memory = alices_memory(engine, "She was painting landscapes")
        # Back to 0005 (today's write path needs today's schema), with what 0005's projection held: the words as
        # written.
        command.downgrade(alembic_config(url), "0005")
        with tenant_session(engine, "acme") as session:
            session.execute(
                text("UPDATE memory_search SET tokens = to_tsvector('simple', 'she was painting landscapes')")
            )
        upgrade(url)
        with tenant_session(engine, "acme") as session:
            stored = session.execute(
                text("SELECT tokens::text FROM memory_search WHERE memory_id = :id"), {"id": memory}
            ).scalar_one()
            postings = session.execute(
                text(
                    "SELECT lexeme, audience, revision = (SELECT source_revision FROM memory_search)"
                    " FROM memory_lexemes WHERE memory_id = :id ORDER BY lexeme"
                ),
                {"id": memory},
            ).all()
        engine.dispose()
    # Each word stemmed, once (0020: a summary the content already says is not repeated; no observed day here).
    assert stored == "'landscap':4 'paint':3 'she':1 'was':2"
    assert postings == [(lexeme, "USER:alice", True) for lexeme in ("landscap", "paint", "she", "was")]


def test_0009_goes_down_to_0008s_postings_and_back_up(postgres: PostgresInfo) -> None:
    """Both directions of 0009 rebuild the derived postings: 0008's shape without audiences, then with them again."""
    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        memory = alices_memory(engine, "She was painting landscapes")
        command.downgrade(alembic_config(url), "0008")
        with tenant_session(engine, "acme") as session:
            columns = session.execute(
                text(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_name = 'memory_lexemes' ORDER BY ordinal_position"
                )
            ).scalars().all()
            down = session.execute(
                text("SELECT lexeme FROM memory_lexemes WHERE memory_id = :id ORDER BY lexeme"), {"id": memory}
            ).scalars().all()
        upgrade(url)
        with tenant_session(engine, "acme") as session:
            up = session.execute(
                text("SELECT lexeme, audience FROM memory_lexemes WHERE memory_id = :id ORDER BY lexeme"),
                {"id": memory},
            ).all()
        engine.dispose()
    assert columns == ["tenant_id", "lexeme", "revision", "memory_id", "version"]
    assert down == ["landscap", "paint", "she", "was"]
    assert up == [(lexeme, "USER:alice") for lexeme in down]


def test_0033_fills_the_audience_of_rows_projected_before_it_in_batches_and_drops_it_going_down(
    postgres: PostgresInfo,
) -> None:
    """Rows projected before 0033 get their memory's audience from the online fill (batches of two here, so
    it crosses a batch boundary); down drops the column and the scoped view's copy of it."""
    migration = importlib.import_module("migrations.versions.0033_search_audience")

    def audiences(engine: Engine) -> list[str | None]:
        with tenant_session(engine, "acme") as session:
            return list(session.execute(text("SELECT audience FROM memory_search_scoped ORDER BY audience")).scalars())

    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        for n in range(5):
            alices_memory(engine, f"She was painting landscapes, number {n}")
        command.downgrade(alembic_config(url), "0032")
        with tenant_session(engine, "acme") as session:
            columns = session.execute(text("SELECT column_name FROM information_schema.columns"
                                           " WHERE table_name = 'memory_search'")).scalars().all()
        upgrade(url, "0033")  # the column back, filled by the migration with its own batch size
        assert audiences(engine) == ["USER:alice"] * 5
        with tenant_session(engine, "acme") as session:
            session.execute(text("UPDATE memory_search SET audience = NULL"))
        owner = create_engine(url, isolation_level="AUTOCOMMIT")
        try:
            with owner.connect() as connection:
                filled = migration.fill_audiences(connection, batch=2)
                left = connection.execute(text("SELECT current_setting('mnemo.tenant_id', true)")).scalar_one()
        finally:
            owner.dispose()
        assert (filled, audiences(engine), left) == (5, ["USER:alice"] * 5, "")
        engine.dispose()
    assert "audience" not in columns


def test_0020_puts_the_observed_day_into_the_lexical_projection_and_takes_it_out_going_down(
    postgres: PostgresInfo,
) -> None:
    """A row projected before 0020 gets its memory's observed day as words, postings included; down removes them."""

    def lexical(engine: Engine, memory: uuid.UUID) -> tuple[str, list[str]]:
        with tenant_session(engine, "acme") as session:
            tokens = session.execute(
                text("SELECT tokens::text FROM memory_search WHERE memory_id = :id"), {"id": memory}
            ).scalar_one()
            postings = session.execute(
                text("SELECT lexeme FROM memory_lexemes WHERE memory_id = :id ORDER BY lexeme"), {"id": memory}
            ).scalars().all()
        return tokens, list(postings)

    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        memory = alices_memory(engine, "She was painting landscapes")
        with tenant_session(engine, "acme") as session:
            session.execute(text("UPDATE memories SET observed_at = '2023-05-08T23:30:00-05:00' WHERE memory_id = :id"),
                            {"id": memory})
        command.downgrade(alembic_config(url), "0019")
        down = lexical(engine, memory)
        upgrade(url)
        up = lexical(engine, memory)
        engine.dispose()
    assert down == ("'landscap':4 'paint':3 'she':1 'was':2", ["landscap", "paint", "she", "was"])
    # 23:30 at UTC-5 is 9 May in UTC.
    assert up == ("'2023':7 '9':5 'landscap':4 'may':6 'paint':3 'she':1 'was':2",
                  ["2023", "9", "landscap", "may", "paint", "she", "was"])


def test_0027_task_definitions_are_the_tenants_own_and_go_down_with_their_table(postgres: PostgresInfo) -> None:
    """The application role registers a version (the ordering column needs no grant of its own), another tenant
    sees none of it; down drops the table, up brings it back empty."""
    definition = from_body("digest", {"version": "1", "goal_schema": {"type": "object"},
                                      "steps": [{"step_id": "write", "kind": "agent"}]})

    def registered(engine: Engine, tenant: str) -> list[tuple[str, int]]:
        with tenant_session(engine, tenant) as session:
            return [(row.version, row.seq) for row in session.scalars(select(TaskDefinitionRow))]

    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        alices_memory(engine, "a tenant to register in")  # tenant acme
        with tenant_session(engine, "acme") as session:
            assert put_definition(session, "acme", definition, "ada") is True
        acme, others = registered(engine, "acme"), registered(engine, "globex")
        command.downgrade(alembic_config(url), "0026")
        with engine.connect() as connection:
            gone = connection.execute(text("SELECT to_regclass('task_definitions')")).scalar_one()
        upgrade(url)
        again = registered(engine, "acme")
        engine.dispose()
    assert [version for version, _ in acme] == ["1"] and others == []
    assert gone is None and again == []


def test_0028_goes_down_to_0027s_statuses_and_back_up(postgres: PostgresInfo) -> None:
    """Going down, an agent step's statuses become 0027's (WAITING a RUNNING step, GAVE_UP a FAILED one, a
    LEASE_EXPIRED attempt an ABANDONED one) and the lease columns go; going up brings them back."""
    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        with tenant_session(engine, "acme") as session:
            create_api_key(session, tenant_id="acme", user_id="alice", roles=["memory_writer"])
        gave_up, waiting = (recorded_task(engine, "acme", intent) for intent in ("gave-up", "waiting"))
        for task in (gave_up, waiting):
            open_step(engine, task)
        transaction = partial(tenant_session, engine, "acme")
        claim = partial(leases.claim, transaction, step_id=None, actor="alice", worker="key:k")
        failing = claim(gave_up.ref, lease_seconds=60)
        leases.fail(transaction, gave_up.ref, failing.attempt.attempt_id, reason="no", retryable=False, body_digest="d")
        claim(waiting.ref, lease_seconds=5)
        time.sleep(5.2)
        claim(waiting.ref, lease_seconds=60)  # the first one's lease ran out
        command.downgrade(alembic_config(url), "0027")
        with tenant_session(engine, "acme") as session:
            steps = session.execute(text("SELECT task_id, status FROM task_steps")).all()
            attempts = session.execute(text("SELECT task_id, attempt_number, status FROM task_attempts")).all()
        upgrade(url)
        with tenant_session(engine, "acme") as session:
            leased = session.execute(text("SELECT count(lease_expires_at) FROM task_attempts")).scalar_one()
        engine.dispose()
    assert sorted(steps) == sorted([(gave_up.ref.task_id, "FAILED"), (waiting.ref.task_id, "RUNNING")])
    assert sorted(attempts) == sorted([(gave_up.ref.task_id, 1, "FAILED"), (waiting.ref.task_id, 1, "ABANDONED"),
                                       (waiting.ref.task_id, 2, "RUNNING")])
    assert leased == 0  # the columns are back, empty: what 0027 did not keep


def test_0029_task_schedules_are_the_tenants_own_and_go_down_with_their_table(postgres: PostgresInfo) -> None:
    """The application role writes a schedule, another tenant sees none of it; down drops the table, up brings it
    back empty."""

    def names(engine: Engine, tenant: str) -> list[str]:
        with tenant_session(engine, tenant) as session:
            return list(session.scalars(select(TaskSchedule.name)))

    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        alices_memory(engine, "a tenant to schedule in")  # tenant acme
        with tenant_session(engine, "acme") as session:
            session.add(TaskSchedule(tenant_id="acme", name="monthly", owner_user_id="alice",
                                     task_type="monthly-report", goal={"month": "{{fire.previous_month}}"},
                                     cron="0 9 1 * *", timezone="Asia/Shanghai"))
        acme, others = names(engine, "acme"), names(engine, "globex")
        command.downgrade(alembic_config(url), "0028")
        with engine.connect() as connection:
            gone = connection.execute(text("SELECT to_regclass('task_schedules')")).scalar_one()
        upgrade(url)
        again = names(engine, "acme")
        engine.dispose()
    assert acme == ["monthly"] and others == []
    assert gone is None and again == []


def test_0030_knowledge_is_the_tenants_own_and_goes_down_with_its_tables(postgres: PostgresInfo) -> None:
    """A candidate the application role writes is invisible to another tenant; down drops both tables."""

    def claims(engine: Engine, tenant: str) -> list[str]:
        with tenant_session(engine, tenant) as session:
            return list(session.scalars(select(KnowledgeCandidate.claim)))

    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        alices_memory(engine, "a tenant to know things in")  # tenant acme
        with tenant_session(engine, "acme") as session:
            session.add(KnowledgeCandidate(
                tenant_id="acme", candidate_id=uuid.uuid4(), status="PENDING_REVIEW", claim="reports need approval",
                authority="P1", scope_type="TENANT", source_refs=["doc:handbook"], origin="API",
                author_user_id="alice", content_sha256="0" * 64))
        acme, others = claims(engine, "acme"), claims(engine, "globex")
        command.downgrade(alembic_config(url), "0029")
        with engine.connect() as connection:
            gone = connection.execute(text(
                "SELECT to_regclass('knowledge_candidates'), to_regclass('knowledge_items')")).one()
        upgrade(url)
        again = claims(engine, "acme")
        engine.dispose()
    assert acme == ["reports need approval"] and others == []
    assert tuple(gone) == (None, None) and again == []
def test_0031_skills_are_the_tenants_own_and_go_down_with_their_tables(postgres: PostgresInfo) -> None:
    """The application role stores a skill's blob and version, another tenant sees neither; a TENANT row naming an
    agent is refused by the table; down drops both tables, up brings them back empty."""

    def names(engine: Engine, tenant: str) -> list[tuple[str, int]]:
        with tenant_session(engine, tenant) as session:
            versions = [(row.name, row.version) for row in session.scalars(select(SkillVersion))]
            return [*versions, ("blob", len(list(session.scalars(select(SkillBlob.sha256)))))]

    with scratch_database(postgres, "mnemo_mig") as url:
        engine = make_engine(url, pool_size=1)
        alices_memory(engine, "a tenant with skills")  # tenant acme
        with tenant_session(engine, "acme") as session:
            session.add(SkillBlob(tenant_id="acme", sha256="0" * 64, content="---\n"))
            session.add(SkillVersion(tenant_id="acme", space="TENANT", agent_id="", name="digest", version=1,
                                     manifest={"SKILL.md": "0" * 64}, tree_sha256="1" * 64, declared_version="1",
                                     pushed_by="root"))
        acme, others = names(engine, "acme"), names(engine, "globex")
        with pytest.raises(IntegrityError, match="skill_versions_check"), tenant_session(engine, "acme") as session:
            session.add(SkillVersion(tenant_id="acme", space="TENANT", agent_id="planner", name="digest", version=2,
                                     manifest={}, tree_sha256="2" * 64, declared_version="2", pushed_by="root"))
        command.downgrade(alembic_config(url), "0030")
        with engine.connect() as connection:
            gone = connection.execute(text("SELECT to_regclass('skill_versions'), to_regclass('skill_blobs')")).one()
        upgrade(url)
        again = names(engine, "acme")
        engine.dispose()
    assert acme == [("digest", 1), ("blob", 1)] and others == [("blob", 0)]
    assert tuple(gone) == (None, None) and again == [("blob", 0)]
