"""What ``mnemo dev`` shows of memory: one memory written and recalled through the real API."""

from __future__ import annotations

import httpx
import httpx2

DEMO_MEMORY = {
    "category": "EVENT",
    "space": "USER",
    "key": "report.delivery",
    "content": (
        "月度销售报告每月第一个周一上午发给财务部。The monthly sales report goes to finance on the first Monday."
    ),
    "source": {
        "source_id": "demo-conversation-1",
        "source_type": "EXPLICIT_USER_STATEMENT",
        "captured_at": "2026-06-01T09:00:00Z",
    },
    "source_level": "E1",
    "idempotency_key": "mnemo-dev-demo-1",
}
DEMO_QUERY = "销售报告发给谁"


def memory_demo(client: httpx.Client | httpx2.Client) -> list[dict[str, object]]:
    """Write the demo memory (idempotent: a second run replays it) and recall it; returns the items."""
    written = client.post("/memory-candidates", json=DEMO_MEMORY)
    written.raise_for_status()
    memory = written.json()
    state = "replayed" if memory["replayed"] else "written"
    vector = memory["indexes"]["vector"]
    when = f"; its vector within ~{memory['vector_expected_within_seconds']} s" if vector == "pending" else ""
    print(f"demo: {state} memory {memory['memory_id']} v{memory['version']} ({memory['status']}, {memory['stage']}: "
          f"lexical index {memory['indexes']['lexical']}, vector {vector}{when})")
    found = client.post("/memory-query", json={"query": DEMO_QUERY})
    found.raise_for_status()
    items: list[dict[str, object]] = found.json()["items"]
    print(f"demo: recall {DEMO_QUERY!r} → {len(items)} item(s)")
    for item in items[:3]:
        print(f"  - [{item['score']:.3f}] {item['content']}")
    return items
