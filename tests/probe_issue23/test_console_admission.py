"""Re-probe of issue 23, finding 7: the admission table covered the API's routes, keyed by the bearer key, but
the console's forms start the same work with a session cookie and no bearer key: a signed-in user could start
deletion workflows through ``POST /console/memory/{id}/delete`` past the tenant's start budget. The console's
workflow-starting forms now spend the same budget as the API routes they wrap.
"""

from __future__ import annotations

import re
import uuid

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth
from tests.factories import candidate


def _form_token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)


def _signed_in(client: TestClient, key: str) -> str:
    form = client.get("/console/login")
    response = client.post("/console/login", data={"api_key": key, "csrf_token": _form_token(form.text)})
    assert response.status_code == 200 and response.url.path == "/console/", response.text
    return _form_token(response.text)


def test_console_deletions_spend_the_tenants_deletion_start_budget(settings: Settings, make_key: MakeKey) -> None:
    tight = settings.model_copy(update={"tenant_deletion_starts_per_minute": 1, "tenant_deletion_start_burst": 2,
                                        "console_secure_cookie": False,
                                        "task_queue": f"probe-{uuid.uuid4().hex[:8]}"})
    flooder, other = make_key(roles=("admin",)), make_key(roles=("admin",))
    with TestClient(create_app(tight)) as api:
        memory_ids = [api.post("/memory-candidates", json=candidate(f"note {n}"), headers=auth(flooder)).json()[
            "memory_id"] for n in range(4)]
        token = _signed_in(api, flooder)
        answers = [api.post(f"/console/memory/{memory_id}/delete", data={"csrf_token": token},
                            follow_redirects=False) for memory_id in memory_ids[:3]]
        assert [a.status_code for a in answers][:2] == [303, 303], [a.text for a in answers]
        refused = answers[2]
        assert refused.status_code == 429, refused.text
        assert 50 <= int(refused.headers["Retry-After"]) <= 60
        assert api.get(f"/memories/{memory_ids[2]}", headers=auth(flooder)).status_code == 200  # nothing deleted
        # The API and the console spend one budget.
        assert api.delete(f"/memories/{memory_ids[3]}", headers=auth(flooder)).status_code == 429
        api.cookies.clear()
        assert api.delete(f"/memories/{uuid.uuid4()}", headers=auth(other)).status_code == 404  # others go on
