"""The documented bundle is the bundle: POST /memory-query returns it unvalidated (for speed), so this checks
that a real one, with every optional part, has exactly the keys and types api.schemas.recall.BundleOut names."""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin

from fastapi.testclient import TestClient
from pydantic import BaseModel

from api.schemas.recall import AuditEventsOut, BundleOut
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
