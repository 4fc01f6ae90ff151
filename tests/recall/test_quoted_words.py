"""A reply's quoted message counts less in the lexical scores than the reply's own words: the quoted message
has a memory of its own, which a question in its words should find before the replies that quote it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError

from memory.db import tenant_session
from memory.enums import Category, SourceLevel, Space
from memory.errors import InvalidInput
from memory.identity.auth import PrincipalContext
from memory.models import Memory
from memory.recall.scoring import QUOTED_WEIGHT, Evidence, lexical_bag, score_pool
from memory.store.memories import Correction, NewMemory, Source, abstract_for, correct_memory, create_memory
from memory.store.memory_text import lexical_parts, lexical_text
from memory.store.message_text import SaidMessage, message_content, quote_start
from memory.text import lexemes
from tests.conftest import MakeKey, auth
from tests.factories import candidate, message_candidate
from tests.recall.conftest import ids, recall

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _reply(speaker: str, text: str, asked_by: str, asked: str) -> SaidMessage:
    return SaidMessage(speaker, text, replying_to=SaidMessage(asked_by, asked))


def _memory(said: SaidMessage, number: int) -> Memory:
    content = message_content(said)
    return Memory(key=None, abstract=abstract_for(content, None), overview=None, content=content,
                  quote_start=quote_start(said), memory_id=uuid.UUID(int=number), revision=number, version=1,
                  source_level="E2", confidence=1.0, observed_at=datetime(2023, 5, 8, tzinfo=UTC),
                  captured_at=datetime(2023, 5, 8, tzinfo=UTC), last_confirmed_at=None)


def test_the_quote_starts_where_the_reply_names_the_message_it_answers() -> None:
    reply = _reply("Caroline", "At the park!", "Melanie", "Where did you go hiking?")
    content = message_content(reply)
    start = quote_start(reply)
    assert start is not None
    assert content[:start] == 'Caroline said, "At the park!"'
    assert content[start:] == ', replying to Melanie, who said, "Where did you go hiking?"'
    assert quote_start(SaidMessage("Caroline", "At the park!")) is None


def test_the_lexical_parts_are_the_memorys_own_words_with_its_day_and_the_quoted_message() -> None:
    memory = _memory(_reply("Caroline", "At the park!", "Melanie", "Where did you go hiking?"), 1)
    own, quoted = lexical_parts(memory)
    assert own == 'Caroline said, "At the park!"\n8 May 2023'
    assert quoted == ', replying to Melanie, who said, "Where did you go hiking?"'
    memory.key, memory.overview = "trip.place", "Caroline went hiking in the park"
    own, quoted = lexical_parts(memory)
    assert own == 'trip.place\nCaroline went hiking in the park\nCaroline said, "At the park!"\n8 May 2023'
    assert quoted.endswith('"Where did you go hiking?"')
    # Split at the quote, the two parts hold exactly the words the index holds: none lost, none twice.
    assert sorted(lexemes(own) + lexemes(quoted)) == sorted(lexemes(lexical_text(memory)))


def test_a_quoted_word_counts_quoted_weight_in_the_bag_and_an_own_word_counts_one() -> None:
    bag = lexical_bag(_memory(_reply("Caroline", "Hiking was fun", "Melanie", "Did you go hiking?"), 1))
    assert bag["fun"] == 1.0
    assert bag["melani"] == QUOTED_WEIGHT  # the quoted speaker
    assert bag["hike"] == 1.0 + QUOTED_WEIGHT  # once said, once quoted


def test_the_same_words_score_higher_said_than_quoted() -> None:
    said = _memory(_reply("Caroline", "My greyhound Biscuit loves the beach", "Melanie", "How are you?"), 1)
    quoted = _memory(_reply("Caroline", "How are you?", "Melanie", "My greyhound Biscuit loves the beach"), 2)
    assert sorted(lexemes(lexical_text(said))) == sorted(lexemes(lexical_text(quoted)))  # the same words
    pool = [Evidence(m, frozenset({"fulltext"}), 0.1, 0.0, 0.8) for m in (quoted, said)]
    scores = {s.memory.memory_id: s.breakdown for s in score_pool(pool, ["greyhound", "biscuit"], NOW)}
    assert scores[said.memory_id].lexical > scores[quoted.memory_id].lexical
    assert scores[said.memory_id].total > scores[quoted.memory_id].total


def _message(speaker: str, text: str, replying_to: dict[str, str]) -> dict[str, object]:
    return message_candidate({"speaker": speaker, "text": text, "replying_to": replying_to},
                             idempotency_key=uuid.uuid4().hex)


def test_a_reply_written_from_a_message_stores_where_its_quote_begins_and_recall_weighs_it_less(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    beach = "My greyhound Biscuit loves the beach"
    said = client.post("/memory-candidates", headers=auth(key),
                       json=_message("Caroline", beach, {"speaker": "Melanie", "text": "How are you?"}))
    quoted = client.post("/memory-candidates", headers=auth(key),
                         json=_message("Caroline", "How are you?", {"speaker": "Melanie", "text": beach}))
    plain = client.post("/memory-candidates", json=candidate(f"Melanie said, {beach}"), headers=auth(key))
    assert said.status_code == quoted.status_code == plain.status_code == 201, (said.text, quoted.text, plain.text)
    with tenant_session(engine, tenant) as session:
        stored = {str(row.memory_id): row.quote_start for row in session.execute(
            select(Memory.memory_id, Memory.quote_start))}
    assert stored == {said.json()["memory_id"]: len(f'Caroline said, "{beach}"'),
                      quoted.json()["memory_id"]: len('Caroline said, "How are you?"'),
                      plain.json()["memory_id"]: None}

    found = recall(client, key, query="Biscuit the greyhound", retrieval="lexical", explain=True, min_relevance=0)
    lexical = {c["memory_id"]: c["breakdown"]["lexical"] for c in found["explain"]["candidates"]}
    assert lexical[said.json()["memory_id"]] > lexical[quoted.json()["memory_id"]] > 0
    assert ids(found).index(said.json()["memory_id"]) < ids(found).index(quoted.json()["memory_id"])


def _new(said: SaidMessage) -> NewMemory:
    return NewMemory(category=Category.EVENT, space=Space.USER, content=message_content(said),
                     source=Source("conv-1", "EXPLICIT_USER_STATEMENT", NOW), source_level=SourceLevel.E2,
                     quote_start=quote_start(said))


def test_a_correction_that_rewrites_the_content_quotes_nothing_and_the_database_keeps_the_quote_inside(
    make_key: MakeKey, engine: Engine,
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    make_key(tenant=tenant)  # the tenant exists
    alice = PrincipalContext(tenant, "alice", None, frozenset({"memory_writer"}), "test")
    reply = _reply("Alice", "Yes, twice", "Bob", "Have you been to Lisbon?")
    with tenant_session(engine, tenant) as session:
        first = create_memory(session, alice, _new(reply)).memory
        assert first.quote_start == quote_start(reply)
        kept = correct_memory(session, alice, first.memory_id, Correction(expected_version=1, key="trips"))
        assert kept.quote_start == first.quote_start  # the same content still quotes Bob
        resent = correct_memory(session, alice, first.memory_id,  # as the console's form sends it: all fields
                                Correction(expected_version=2, content=first.content, key="trips"))
        assert resent.quote_start == first.quote_start
        rewritten = correct_memory(session, alice, first.memory_id,
                                   Correction(expected_version=3, content="Alice has been to Lisbon twice"))
        assert rewritten.quote_start is None
        with pytest.raises(InvalidInput) as outside:
            create_memory(session, alice, NewMemory(**{**_new(reply).__dict__, "quote_start": 10_000}))
        assert outside.value.code == "quote_outside_content"
    with pytest.raises(IntegrityError), tenant_session(engine, tenant) as session:
        session.execute(update(Memory).where(Memory.memory_id == first.memory_id, Memory.version == 1)
                        .values(quote_start=len(first.content)))
