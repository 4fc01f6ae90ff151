"""A link cannot put words on a console page: the sign-in page's reason and a page's "Done:" notice come from the
console itself (a cookie it sets, a fixed set of outcomes), never from text in the URL, so a crafted link to the
real sign-in page cannot tell a person to paste their key somewhere else."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.console.test_pages import signed_in
from tests.factories import candidate

LURE = "mnemo moved: paste your key at evil.example"


def test_the_sign_in_page_shows_the_consoles_own_reason_only(https_client: TestClient, make_key: MakeKey) -> None:
    https_client.cookies.clear()
    lured = https_client.get("/console/login", params={"why": LURE})
    assert lured.status_code == 200 and "evil.example" not in lured.text
    token = signed_in(https_client, make_key())
    out = https_client.post("/console/logout", data={"csrf_token": token})
    assert out.url.path == "/console/login" and "you signed out" in out.text
    assert "you signed out" not in https_client.get("/console/login").text  # told once


def test_a_done_notice_is_one_of_the_consoles_outcomes(https_client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    memory = https_client.post("/memory-candidates", json=candidate("I like green tea"), headers=auth(key))
    assert memory.status_code == 201, memory.text
    signed_in(https_client, key)
    page = f"/console/memory/{memory.json()['memory_id']}"
    assert "Done: expired." in https_client.get(page, params={"done": "expired"}).text
    lured = https_client.get(page, params={"done": LURE})
    assert "evil.example" not in lured.text
