"""The text of each retrieval channel: a message names its speaker and carries what was shared; the lexical
index holds the day it was observed, the vector leaves it out and fits the model; a vector made under the
previous text rule is re-embedded by the real sweep."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from api.settings import Settings
from memory.db import tenant_session
from memory.embedders.engine import MODEL_NAME, default_embedder
from memory.errors import InvalidInput
from memory.models import Memory, MemorySearch
from memory.store.memories import abstract_for
from memory.store.memory_text import MAX_CHARS, embedding_text, lexical_text, memory_text, observed_words
from memory.store.message_text import SaidMessage, message_content
from memory.store.vectors import pending_batch
from tests.conftest import MakeKey, auth
from tests.factories import candidate, message_candidate
from tests.recall.conftest import embed_tenant, ids, recall

SAID = "I went to a support group yesterday and it was so powerful."
CAPTION = "a photo of a rainbow flag on a table"


def _message_candidate(**message: object) -> dict[str, object]:
    return message_candidate({"speaker": "Caroline", "text": SAID, **message},
                             validity={"observed_at": "2023-05-08T13:56:00Z"})


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def test_a_message_memory_names_its_speaker_carries_the_caption_and_leaves_the_date_out(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    written = client.post("/memory-candidates", json=_message_candidate(shared=[CAPTION]), headers=auth(key))
    assert written.status_code == 201, written.text
    memory = client.get(f"/memories/{written.json()['memory_id']}", headers=auth(key)).json()
    expected = f'Caroline said, "{SAID}" and shared {CAPTION}.'
    assert memory["content"] == expected
    assert memory["validity"]["observed_at"] == "2023-05-08T13:56:00Z"
    with tenant_session(engine, tenant) as session:
        [pending] = pending_batch(session, tenant, MODEL_NAME, 10)
    assert pending.text == expected  # the summary repeats the content: embedded once, and no date in it
    assert "2023" not in pending.text and "May" not in pending.text


def test_the_day_a_memory_was_observed_is_in_its_lexical_index_and_scores_not_in_its_content(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    may = client.post("/memory-candidates", json=_message_candidate(), headers=auth(key))
    june = client.post("/memory-candidates", json={**_message_candidate(text="The support group met again."),
                                                   "idempotency_key": "june",
                                                   "validity": {"observed_at": "2023-06-20T10:00:00Z"}},
                       headers=auth(key))
    assert may.status_code == june.status_code == 201, (may.text, june.text)
    with tenant_session(engine, tenant) as session:
        tokens = session.execute(select(MemorySearch.tokens).where(
            MemorySearch.memory_id == uuid.UUID(may.json()["memory_id"]))).scalar_one()
    assert {"8", "may", "2023"} <= {part.split(":")[0].strip("'") for part in tokens.split()}
    found = recall(client, key, query="what did Caroline say about the support group on 8 May 2023?",
                   retrieval="lexical", explain=True, min_relevance=0)
    assert ids(found) == [may.json()["memory_id"], june.json()["memory_id"]]  # both about the group; one that day
    breakdown = {c["memory_id"]: c["breakdown"] for c in found["explain"]["candidates"]}
    assert breakdown[may.json()["memory_id"]]["lexical"] > breakdown[june.json()["memory_id"]]["lexical"]
    assert all("2023" not in item["content"] for item in found["items"])


def test_the_observed_day_is_written_in_words_in_utc() -> None:
    assert observed_words(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == "8 May 2023"
    assert observed_words(datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-5)))) == "9 May 2023"
    undated = _memory("Caroline likes sunsets")
    assert lexical_text(undated) == memory_text(undated) == "Caroline likes sunsets"
    dated = Memory(key=None, abstract=None, overview=None, content="Hi", observed_at=datetime(2024, 1, 2, tzinfo=UTC))
    assert lexical_text(dated) == "Hi\n2 January 2024" and embedding_text(dated) == "Hi"


def test_what_a_message_says_reads_naturally_in_every_shape() -> None:
    assert message_content(SaidMessage("  Mel ", "Hi!\n")) == 'Mel said, "Hi!"'
    two = message_content(SaidMessage("Mel", "Look", ("a dog.", "a cat")))
    assert two == 'Mel said, "Look" and shared a dog and a cat.'
    three = message_content(SaidMessage("Mel", " ", ("a dog", "a cat", "a bird")))
    assert three == "Mel shared a dog, a cat and a bird."
    with pytest.raises(InvalidInput) as empty:
        message_content(SaidMessage("Mel", "  "))
    assert empty.value.code == "message_empty"
    with pytest.raises(InvalidInput) as nobody:
        message_content(SaidMessage(" ", "Hi"))
    assert nobody.value.code == "message_speaker_required"


def test_a_reply_quotes_the_message_it_answers() -> None:
    question = SaidMessage("Melanie", "Where did you go hiking?")
    assert message_content(SaidMessage("Caroline", "At the park!", replying_to=question)) == (
        'Caroline said, "At the park!", replying to Melanie, who said, "Where did you go hiking?"')
    photo = SaidMessage("Melanie", "", ("a photo of a cat.",))
    assert message_content(SaidMessage("Caroline", "Cute", ("a dog",), replying_to=photo)) == (
        'Caroline said, "Cute" and shared a dog, replying to Melanie, who shared a photo of a cat.')
    with pytest.raises(InvalidInput) as nobody:
        message_content(SaidMessage("Caroline", "Yes", replying_to=SaidMessage("", "Is it?")))
    assert nobody.value.code == "message_speaker_required"


def test_a_candidate_message_can_name_the_message_it_replies_to_one_level_deep(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key(tenant=_tenant())
    asked = {"speaker": "Melanie", "text": "How was the group?"}
    written = client.post("/memory-candidates", json=_message_candidate(replying_to=asked), headers=auth(key))
    assert written.status_code == 201, written.text
    memory = client.get(f"/memories/{written.json()['memory_id']}", headers=auth(key)).json()
    assert memory["content"] == f'Caroline said, "{SAID}", replying to Melanie, who said, "How was the group?"'
    empty = client.post("/memory-candidates", json=_message_candidate(replying_to={"speaker": "Mel", "text": " "}),
                        headers=auth(key))
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "message_empty"
    deeper = client.post("/memory-candidates", headers=auth(key), json=_message_candidate(
        replying_to={**asked, "replying_to": {"speaker": "Caroline", "text": "Hi"}}))
    assert deeper.status_code == 422, deeper.text


def test_a_candidate_gives_its_content_or_its_message_exactly_one(client: TestClient, make_key: MakeKey) -> None:
    key = make_key(tenant=_tenant())
    both = {**_message_candidate(), "content": "Caroline went to a support group"}
    neither = {k: v for k, v in _message_candidate().items() if k != "message"}
    for body in (both, neither):
        response = client.post("/memory-candidates", json=body, headers=auth(key))
        assert response.status_code == 422 and response.json()["error"]["code"] == "content_or_message"
    blank = client.post("/memory-candidates", json=_message_candidate(text=""), headers=auth(key))
    assert blank.status_code == 422 and blank.json()["error"]["code"] == "message_empty"


def _memory(content: str, key: str | None = None) -> Memory:
    return Memory(key=key, abstract=abstract_for(content, None), overview=None, content=content)


def test_the_embedding_text_fits_max_chars_cut_at_a_word_and_keeps_the_speaker_first() -> None:
    content = message_content(SaidMessage("Caroline", "paintings of sunsets " * 200))
    text = embedding_text(_memory(content))
    assert len(content) > MAX_CHARS >= len(text) > MAX_CHARS - len("paintings ")
    assert text.startswith('Caroline said, "paintings') and content.startswith(text)
    assert content[len(text)] == " "  # a whole word last, not the start of one
    short = _memory("Caroline likes sunsets", key="hobby")
    assert embedding_text(short) == "hobby\nCaroline likes sunsets"


def test_a_cut_summary_of_a_text_with_line_breaks_is_not_embedded_twice() -> None:
    content = "First line of a long note.\n" + "More words in the note " * 12
    memory = _memory(content)
    assert memory.abstract.endswith("…") and memory.abstract.rstrip("…") not in content  # the first rule's case
    assert embedding_text(memory) == content


def test_a_vector_from_the_previous_text_rule_is_re_embedded_by_the_sweep(
    client: TestClient, make_key: MakeKey, engine: Engine, recall_worker: None, recall_settings: Settings
) -> None:
    tenant = _tenant()
    key = make_key(tenant=tenant)
    content = "Moved to Hangzhou in spring.\n" + "The new flat is near the West Lake and the office " * 6
    written = client.post("/memory-candidates", json=candidate(content), headers=auth(key))
    assert written.status_code == 201, written.text
    embedder = default_embedder()
    with tenant_session(engine, tenant) as session:
        memory = session.execute(select(Memory).where(Memory.tenant_id == tenant)).scalar_one()
        first_rule_text = f"{memory.abstract}\n{memory.content}"  # what the first rule embedded for it
        assert embedding_text(memory) == memory.content != first_rule_text
        row = session.execute(select(MemorySearch).where(MemorySearch.tenant_id == tenant)).scalar_one()
        [row.embedding] = embedder.embed([first_rule_text])
        row.embedding_model = MODEL_NAME.rsplit("/", 1)[0]  # the model id vectors of the first rule carry
        row.embedding_revision = row.source_revision
    assert embed_tenant(recall_settings, tenant).written == 1
    with tenant_session(engine, tenant) as session:
        row = session.execute(select(MemorySearch).where(MemorySearch.tenant_id == tenant)).scalar_one()
        stored = np.asarray(row.embedding, dtype=np.float32)
        assert row.embedding_model == MODEL_NAME
    [now] = embedder.embed([content])
    [before] = embedder.embed([first_rule_text])
    assert np.allclose(stored, now, atol=1e-5) and not np.allclose(stored, before, atol=1e-3)
