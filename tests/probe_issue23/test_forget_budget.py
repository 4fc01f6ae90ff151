"""Re-probe of issue 23, finding 7: "don't remember …" in a message starts a deletion workflow per memory it
names, and the messages route (cost class ``write``) spent nothing of the tenant's deletion start budget: one
batch of messages started as many deletion workflows as it named memories, past the budget that cuts
``POST /deletion-requests`` and ``DELETE /memories/{id}``. Those starts now spend the same budget: a batch
that would start more than the tenant has left is refused at once with the 429, and one that would start more
than the budget's burst with a 422 ``too_many_starts``, writing nothing either way.
"""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.sessions.conftest import say

LIKES = ("我喜欢喝咖啡", "我喜欢吃苹果", "我喜欢看电影")


def test_forgetting_in_messages_spends_the_deletion_start_budget(settings: Settings, make_key: MakeKey) -> None:
    tight = settings.model_copy(update={"tenant_deletion_starts_per_minute": 1, "tenant_deletion_start_burst": 2,
                                        "task_queue": f"probe-{uuid.uuid4().hex[:8]}"})
    alice, other = make_key(), make_key()
    with TestClient(create_app(tight)) as api:
        ids = []
        for like in LIKES:
            made = api.post("/memory-candidates", json=candidate(like, category="PREFERENCE"), headers=auth(alice))
            assert made.status_code == 201, made.text
            ids.append(made.json()["memory_id"])
        assert api.post("/sessions", json={"session_id": "s-f"}, headers=auth(alice)).status_code == 201
        flood = api.post("/sessions/s-f/messages", headers=auth(alice), json={"messages": [
            say(f"f{n}", "user", f"别记住{like}。") for n, like in enumerate(LIKES)]})
        assert flood.status_code == 422, flood.text  # more than the burst: never admitted, so no 429 to wait out
        assert flood.json()["error"]["code"] == "too_many_starts"
        assert flood.json()["error"]["details"] == {"starts": 3, "burst": 2}
        assert all(api.get(f"/memories/{i}", headers=auth(alice)).status_code == 200 for i in ids)  # nothing done
        assert "别记住" not in api.get("/sessions/s-f/window", headers=auth(alice)).text  # nothing written

        two = api.post("/sessions/s-f/messages", headers=auth(alice), json={"messages": [
            say(f"g{n}", "user", f"别记住{like}。") for n, like in enumerate(LIKES[:2])]})
        assert two.status_code == 201, two.text
        assert len(two.json()["forgotten"]) == 2
        assert api.delete(f"/memories/{ids[2]}", headers=auth(alice)).status_code == 429  # one budget
        busy = api.post("/sessions/s-f/messages", headers=auth(alice), json={"messages": [
            say("g2", "user", f"别记住{LIKES[2]}。")]})
        assert busy.status_code == 429 and busy.json()["error"]["code"] == "tenant_busy", busy.text
        assert 50 <= int(busy.headers["Retry-After"]) <= 60
        assert api.get(f"/memories/{ids[2]}", headers=auth(alice)).status_code == 200
        again = api.post("/sessions/s-f/messages", headers=auth(alice), json={"messages": [
            say("g0", "user", f"别记住{LIKES[0]}。")]})  # a replay starts nothing: not refused
        assert again.status_code in (200, 201) and again.json()["forgotten"] == two.json()["forgotten"][:1]
        plain = api.post("/sessions/s-f/messages", headers=auth(alice), json={"messages": [
            say("h0", "user", "今天天气不错。")]})  # a message that forgets nothing is not a deletion start
        assert plain.status_code == 201, plain.text
        assert api.delete(f"/memories/{uuid.uuid4()}", headers=auth(other)).status_code == 404  # others go on
