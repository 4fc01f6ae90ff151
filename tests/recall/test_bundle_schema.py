"""The documented bundle is the bundle: POST /memory-query returns it unvalidated (for speed), so this checks
that a real one, with every optional part, has exactly the keys and types api.schemas.recall.BundleOut names."""

from __future__ import annotations

import re
from types import UnionType
from typing import Any, Union, get_args, get_origin

from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import BaseModel

from api.routers.recall import options_of
from api.schemas.recall import AuditEventsOut, BundleOut, RecallIn, bundle_body
from api.services.recall import Recaller
from tests.conftest import MakeKey, auth
from tests.recall.conftest import recall, write

FMT = "response.output_format"


def undocumented(value: Any, kind: Any, at: str = "") -> list[str]:
    """Keys of ``value`` that the type ``kind`` (a model, or lists, dicts and unions of them) does not name."""
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        if not isinstance(value, dict):
            return []
        found = [f"{at}.{key}" for key in value if key not in kind.model_fields]
        for name, field in kind.model_fields.items():
            found += undocumented(value.get(name), field.annotation, f"{at}.{name}")
        return found
    origin, args = get_origin(kind), get_args(kind)
    if origin is list and isinstance(value, list):
        return [key for item in value for key in undocumented(item, args[0], f"{at}[]")]
    if origin is dict and isinstance(value, dict):
        return [key for item in value.values() for key in undocumented(item, args[1], f"{at}{{}}")]
    return [key for option in args for key in undocumented(value, option, at)] if origin in (Union, UnionType) else []


def test_a_full_bundle_and_its_audit_event_match_their_models(client: TestClient, make_key: MakeKey) -> None:
    key = make_key(roles=("memory_writer", "auditor"))
    write(client, key, "我住在上海", key="home_city")
    write(client, key, "我住在杭州", key="home_city", source_level="E3")
    write(client, key, "markdown", category="PREFERENCE", key=FMT)
    bundle = recall(client, key, query="我住在哪里 上海", explain=True, request_constraints={FMT: "plain_text"},
                    trace_id="bundle-schema")
    assert bundle["explain"]["candidates"] and bundle["preference_sources"] and bundle["request_constraints"]
    assert BundleOut.model_validate(bundle) and undocumented(bundle, BundleOut) == []
    events = client.get("/recall/audit", params={"trace_id": "bundle-schema"}, headers=auth(key)).json()
    assert len(events["events"]) == 1 and AuditEventsOut.model_validate(events)


def key_order(value: Any) -> Any:
    """Every object's keys in order, nested (the values left out: the model coerces a breakdown's int to float)."""
    if isinstance(value, dict):
        return [(key, key_order(item)) for key, item in value.items()]
    return [key_order(item) for item in value] if isinstance(value, list) else None


NUMBER = re.compile(rb"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+e[-+]?\d+")


def test_the_rest_body_is_the_typed_bundles_serialization(client: TestClient, make_key: MakeKey) -> None:
    """Byte for byte, floats aside (a second recall's usage counters move the hotness prior): the route sends
    exactly :func:`bundle_body` of the typed bundle the shared recall service returns, every object's keys in
    the order :class:`BundleOut` documents (the wire order before the bundle was typed)."""
    key = make_key(roles=("memory_writer", "auditor"))
    write(client, key, "我住在上海", key="home_city")
    write(client, key, "我住在杭州", key="home_city", source_level="E3")
    write(client, key, "markdown", category="PREFERENCE", key=FMT)
    write(client, key, "我住在哪里：上海浦东，离公司很近")
    body = RecallIn(query="我住在哪里 上海", explain=True, request_constraints={FMT: "plain_text"},
                    trace_id="bundle-json")
    sent = client.post("/memory-query", json=body.model_dump(exclude_unset=True), headers=auth(key))
    assert sent.status_code == 200, sent.text
    typed = Recaller.of(client.app.state).with_key(key, body.query, options_of(body))  # type: ignore[attr-defined]
    assert typed.explain is not None and typed.items and typed.conflicts and typed.preference_sources
    documented = BundleOut.model_validate(sent.json()).model_dump(exclude_unset=True)
    assert key_order(documented) == key_order(sent.json())
    assert NUMBER.sub(b"0.5", sent.content) == NUMBER.sub(b"0.5", JSONResponse(bundle_body(typed)).body)
