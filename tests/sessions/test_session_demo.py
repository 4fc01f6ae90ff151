"""The session part of `mnemo dev`'s demo commits its conversation and prints what it remembered and why."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.cli.demo.session import session_demo
from tests.conftest import MakeKey, auth


def test_the_demo_commits_and_says_what_was_remembered_and_refused(
    sessions_api: TestClient, make_key: MakeKey, capsys: pytest.CaptureFixture[str]
) -> None:
    sessions_api.headers.update(auth(make_key(roles=("admin",))))
    try:
        commit = session_demo(sessions_api)
        again = session_demo(sessions_api)
    finally:
        del sessions_api.headers["Authorization"]
    assert commit["status"] == "completed_with_rejections"
    keys = {m["key"] for m in commit["memories"]["created"]}
    assert {"profile.city", "response.output_format"} <= keys
    assert again["commit_id"] == commit["commit_id"]  # a second run replays the same commit
    out = capsys.readouterr().out
    assert "created  PROFILE" in out and "refused  temporary_constraint" in out and "尚未审批" in out
    assert commit["stats"]["rejected_by_kind"] == {"rule": 1}  # "这次用英文回答": one-time, rightly refused
    assert "refused by rule, as intended: 1" in out and "schema failures" not in out
