"""Rules on what a stored memory may hold, whatever path writes it (issue 23, finding 8).

A validity window whose end is not after its start reached the database's CHECK and was a 500 on create and
on PATCH; the ``message`` form wrote 280,140 characters of content past the 100,000 limit ``content`` has.
Both are domain rules now (:mod:`memory.store.memories`): a 422 with its code, nothing written.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from memory.db import tenant_session
from memory.store.memories import MAX_CONTENT_CHARS
from tests.conftest import MakeKey, auth
from tests.factories import candidate, message_candidate

EXAMPLES = settings(max_examples=40, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

zones = st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda minutes: timezone(timedelta(minutes=minutes)))
instants = st.datetimes(min_value=datetime(1901, 1, 1), max_value=datetime(2199, 1, 1)).map(
    lambda naive: naive.replace(tzinfo=UTC)
)


@st.composite
def windows(draw: st.DrawFn) -> tuple[datetime, datetime]:
    """(effective_from, effective_to) in random zones: reversed, equal (the same instant in two zones) or ordered."""
    start = draw(instants)
    shape = draw(st.sampled_from(["reversed", "equal", "ordered"]))
    gap = draw(st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=3650)))
    end = {"reversed": start - gap, "equal": start, "ordered": start + gap}[shape]
    return start.astimezone(draw(zones)), end.astimezone(draw(zones))


def _validity(window: tuple[datetime, datetime]) -> dict[str, str]:
    return {"effective_from": window[0].isoformat(), "effective_to": window[1].isoformat()}


def _judged(response_status: int, body: dict[str, object], window: tuple[datetime, datetime], ok: int) -> None:
    if window[1] > window[0]:
        assert response_status == ok, body
    else:
        assert response_status == 422, body
        error = body["error"]
        assert isinstance(error, dict) and error["code"] == "invalid_validity_window", body


def test_a_reversed_window_is_a_422_on_create_and_on_patch(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    window = {"effective_from": "2026-06-02T00:00:00Z", "effective_to": "2026-06-01T00:00:00Z"}
    created = client.post("/memory-candidates", json=candidate("住在杭州", validity=window), headers=auth(key))
    assert created.status_code == 422, created.text
    assert created.json()["error"]["code"] == "invalid_validity_window"
    assert "effective_to" in created.json()["error"]["message"]
    memory = client.post("/memory-candidates", json=candidate("住在杭州"), headers=auth(key)).json()
    patched = client.patch(f"/memories/{memory['memory_id']}", json={"expected_version": 1, "validity": window},
                           headers=auth(key))
    assert patched.status_code == 422, patched.text
    assert patched.json()["error"]["code"] == "invalid_validity_window"
    assert client.get(f"/memories/{memory['memory_id']}", headers=auth(key)).json()["version"] == 1


def test_the_database_refuses_a_reversed_window_from_any_path(client: TestClient, make_key: MakeKey,
                                                             engine: Engine) -> None:
    """The domain rule's twin in the schema (memories' CHECK since 0001): a path that skipped
    :class:`memory.store.memories.Validity` could still not store such a window."""
    key = make_key(tenant="t-windows")
    memory = client.post("/memory-candidates", json=candidate("住在杭州"), headers=auth(key)).json()
    with pytest.raises(IntegrityError, match="memories_check"), tenant_session(engine, "t-windows") as session:
        updated = session.execute(text(
            "UPDATE memories SET effective_from = now(), effective_to = now() - interval '1 day'"
            " WHERE memory_id = :id"), {"id": memory["memory_id"]})
        assert updated.rowcount == 1  # type: ignore[attr-defined]


@EXAMPLES
@given(window=windows())
def test_any_window_through_create_is_stored_or_a_422(
    client: TestClient, make_key: MakeKey, window: tuple[datetime, datetime]
) -> None:
    response = client.post("/memory-candidates", json=candidate("在上海工作", validity=_validity(window)),
                           headers=auth(make_key(tenant="t-windows")))
    _judged(response.status_code, response.json(), window, 201)


@EXAMPLES
@given(window=windows())
def test_any_window_through_patch_is_stored_or_a_422(
    client: TestClient, make_key: MakeKey, window: tuple[datetime, datetime]
) -> None:
    key = make_key(tenant="t-windows")
    memory = client.post("/memory-candidates", json=candidate("在上海工作"), headers=auth(key)).json()
    response = client.patch(f"/memories/{memory['memory_id']}",
                            json={"expected_version": 1, "validity": _validity(window)}, headers=auth(key))
    _judged(response.status_code, response.json(), window, 200)


# --- the stored content's length, whatever form it was given in -------------------------------------------

texts = st.one_of(st.integers(min_value=0, max_value=100), st.integers(min_value=40_000, max_value=100_000),
                  st.just(100_000))
"""Text lengths: short, long enough that two of them pass the limit, and each field's own maximum."""


@st.composite
def messages(draw: st.DrawFn) -> dict[str, object]:
    """A ``message`` form within every field's own limit: text, what was shared and the message it answers."""
    def said(speaker: str) -> dict[str, object]:
        length = draw(texts)
        shared = draw(st.lists(st.integers(min_value=1, max_value=2_000), max_size=20))
        if length == 0 and not shared:
            length = 1
        return {"speaker": speaker, "text": "x" * length, "shared": ["y" * n for n in shared]}

    message = said("Caroline")
    if draw(st.booleans()):
        message["replying_to"] = said("Melanie")
    return message


forms = st.one_of(
    messages().map(message_candidate),
    st.integers(min_value=MAX_CONTENT_CHARS - 2, max_value=MAX_CONTENT_CHARS + 2).map(lambda n: candidate("x" * n)),
)
"""A memory's body in either form: a ``message`` (alone or replying), or ``content`` around the limit."""


@EXAMPLES
@given(body=forms)
def test_no_form_stores_more_than_the_content_limit(
    client: TestClient, make_key: MakeKey, body: dict[str, object]
) -> None:
    key = make_key(tenant="t-lengths")
    response = client.post("/memory-candidates", json=body, headers=auth(key))
    if response.status_code == 201:
        stored = client.get(f"/memories/{response.json()['memory_id']}", headers=auth(key)).json()
        assert len(stored["content"]) <= MAX_CONTENT_CHARS
        return
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    if "content" in body:  # the field's own limit, named as such
        assert len(str(body["content"])) > MAX_CONTENT_CHARS
        assert error["fields"][0]["field"] == "content", error
    else:
        assert error["code"] == "content_too_long", error
        assert error["details"]["max_chars"] == MAX_CONTENT_CHARS
        assert error["details"]["chars"] > MAX_CONTENT_CHARS


def test_the_probes_message_is_refused_and_a_message_at_the_limit_is_stored(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key(tenant="t-lengths")
    full = {"speaker": "A", "text": "x" * 100_000, "shared": ["y" * 2_000] * 20}
    probe = {**full, "replying_to": {**full, "speaker": "B"}}
    refused = client.post("/memory-candidates", json=message_candidate(probe), headers=auth(key))
    assert refused.status_code == 422, refused.text[:300]
    assert refused.json()["error"]["code"] == "content_too_long"
    wrapping = len('A said, "') + len('"')
    exact = {"speaker": "A", "text": "x" * (MAX_CONTENT_CHARS - wrapping)}
    stored = client.post("/memory-candidates", json=message_candidate(exact), headers=auth(key))
    assert stored.status_code == 201, stored.text[:300]
    read = client.get(f"/memories/{stored.json()['memory_id']}", headers=auth(key)).json()
    assert len(read["content"]) == MAX_CONTENT_CHARS
