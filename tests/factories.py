"""Request bodies the API tests build on."""

from __future__ import annotations

from typing import Any


def candidate(content: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "category": "PROFILE",
        "space": "USER",
        "content": content,
        "source": {"source_id": "conv-1", "source_type": "EXPLICIT_USER_STATEMENT", "captured_at": "2026-06-01T09:00:00Z"},
        "source_level": "E2",
    }
    body.update(overrides)
    return body


def event(key: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "idempotency_key": key,
        "kind": "MESSAGE",
        "payload": {"role": "user", "text": "我搬到杭州了"},
        "occurred_at": "2026-06-01T09:00:00+08:00",
        "session_id": "s-1",
    }
    body.update(overrides)
    return body
