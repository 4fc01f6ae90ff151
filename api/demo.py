"""What ``mnemo dev`` shows a newcomer: one memory written and recalled through the real API."""

from __future__ import annotations

import httpx

from api.task_demo import run_task_demo

DEMO_MEMORY = {
    "category": "PREFERENCE",
    "space": "USER",
    "key": "report.format",
    "content": "月度报告用 Markdown 格式，周一上午发送。Monthly reports in Markdown, sent on Monday morning.",
    "source": {
        "source_id": "demo-conversation-1",
        "source_type": "EXPLICIT_USER_STATEMENT",
        "captured_at": "2026-06-01T09:00:00Z",
    },
    "source_level": "E1",
    "idempotency_key": "mnemo-dev-demo-1",
}
DEMO_QUERY = "报告格式"


def run_demo(api_url: str, api_key: str) -> None:
    """Idempotent: a second ``mnemo dev`` replays the same write instead of adding a copy."""
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=api_url, headers=headers, timeout=10) as client:
        written = client.post("/memory-candidates", json=DEMO_MEMORY)
        written.raise_for_status()
        memory = written.json()
        state = "replayed" if memory["replayed"] else "written"
        print(f"demo: {state} memory {memory['memory_id']} v{memory['version']} ({memory['status']}, {memory['stage']})")
        found = client.post("/memory-query", json={"query": DEMO_QUERY})
        found.raise_for_status()
        items = found.json()["items"]
        print(f"demo: recall {DEMO_QUERY!r} → {len(items)} item(s)")
        for item in items[:3]:
            print(f"  - [{item['score']:.3f}] {item['content']}")
    run_task_demo(api_url, api_key)
