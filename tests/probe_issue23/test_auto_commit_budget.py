"""Re-probe of issue 23, finding 7: a message batch that reaches the commit policy's threshold starts a commit
workflow by itself, and the messages route (cost class ``write``) spent nothing of the tenant's workflow start
budget: a tenant posting threshold-sized batches to many sessions started a commit per request, past the budget
that cuts ``POST /sessions/{id}/commit``. Such a commit now spends that budget; with none left the messages are
stored and the commit waits (the next batch, or the idle sweep, starts it), never past the budget.
"""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.sessions.conftest import say


def test_policy_commits_from_messages_spend_the_workflow_start_budget(settings: Settings, make_key: MakeKey) -> None:
    tight = settings.model_copy(update={"tenant_workflow_starts_per_minute": 1, "tenant_workflow_start_burst": 2,
                                        "session_commit_after_messages": 2,
                                        "task_queue": f"probe-{uuid.uuid4().hex[:8]}"})
    flooder, other = make_key(), make_key()
    with TestClient(create_app(tight)) as api:
        commits = []
        for n in range(4):
            sid = f"s-{n}"
            assert api.post("/sessions", json={"session_id": sid}, headers=auth(flooder)).status_code == 201
            posted = api.post(f"/sessions/{sid}/messages", headers=auth(flooder), json={"messages": [
                say(f"a{n}", "user", "今天天气不错。"), say(f"b{n}", "assistant", "是的。")]})
            assert posted.status_code == 201, posted.text  # the messages are stored either way
            commits.append(posted.json()["commit"])
        assert [c is not None for c in commits] == [True, True, False, False], commits
        refused = api.post("/sessions/s-3/commit", json={"commit_id": "c-3"}, headers=auth(flooder))
        assert refused.status_code == 429, refused.text  # one budget: the policy's commits spent it
        assert api.post("/sessions", json={"session_id": "o"}, headers=auth(other)).status_code == 201
        served = api.post("/sessions/o/messages", headers=auth(other), json={"messages": [
            say("a", "user", "今天天气不错。"), say("b", "assistant", "是的。")]})
        assert served.status_code == 201 and served.json()["commit"] is not None  # others go on
