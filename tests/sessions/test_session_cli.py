"""``mnemo session`` against a real API on a real port (uvicorn in a thread) with a real worker behind it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner, Result

from api.cli.app import app
from api.cli.session import session_app
from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey
from tests.workers import ThreadWorker, served


@pytest.fixture(scope="module")
def api_url(settings: Settings, engine: Engine) -> Iterator[str]:
    own = settings.model_copy(update={"task_queue": f"session-cli-{uuid.uuid4().hex[:8]}"})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine)).start()
    try:
        with served(create_app(own)) as port:
            yield f"http://127.0.0.1:{port}"
    finally:
        worker.stop()


@pytest.fixture()
def key_file(tmp_path: Path, make_key: MakeKey) -> Path:
    path = tmp_path / "admin.key"
    path.write_text(make_key() + "\n")
    return path


def _invoke(api_url: str, key_file: Path, *args: str) -> Result:
    return CliRunner().invoke(session_app, [*args, "--api-url", api_url, "--key-file", str(key_file)])


def _run(api_url: str, key_file: Path, *args: str) -> str:
    result = _invoke(api_url, key_file, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_messages_window_commit_and_show_drive_a_session_into_memory(
    api_url: str, key_file: Path, tmp_path: Path
) -> None:
    posted = CliRunner().invoke(session_app, [
        "messages", "s-cli", "--user", "我住在上海。", "--user", "I prefer plain text answers.",
        "--api-url", api_url, "--key-file", str(key_file),
    ])
    assert posted.exit_code == 0, posted.output
    assert "opened session s-cli" in posted.stderr
    lines = posted.stdout.splitlines()
    assert lines[0].split() == ["SEQUENCE_NO", "ROLE", "REPLAYED", "EVENT_ID", "CONTENT"]
    assert lines[1].split()[:3] == ["1", "user", "False"] and lines[1].endswith("我住在上海。")
    assert lines[2].split()[:3] == ["2", "user", "False"]

    batch = [
        {"idempotency_key": "f-1", "role": "assistant", "content": "", "created_at": "2026-07-14T14:01:00+08:00",
         "tool_calls": [{"id": "call-1", "name": "weather", "arguments": '{"city": "上海"}'}]},
        {"idempotency_key": "f-2", "role": "tool", "content": "晴，31°C", "created_at": "2026-07-14T14:01:01+08:00",
         "tool_call_id": "call-1"},
    ]
    (tmp_path / "msgs.json").write_text(json.dumps({"messages": batch}, ensure_ascii=False))
    stored = json.loads(_run(api_url, key_file, "messages", "s-cli", "--file", str(tmp_path / "msgs.json"), "--json"))
    assert stored["sequence_range"] == {"from": 3, "to": 4}
    (tmp_path / "list.json").write_text(json.dumps(batch, ensure_ascii=False))
    replayed = _run(api_url, key_file, "messages", "s-cli", "--file", str(tmp_path / "list.json"))
    assert [line.split()[:3] for line in replayed.splitlines()[1:]] == [["3", "assistant", "True"],
                                                                       ["4", "tool", "True"]]

    roomy = json.loads(_run(api_url, key_file, "window", "s-cli", "--budget", "4000", "--json"))
    assert [m["sequence_no"] for m in roomy["messages"]] == [1, 2, 3, 4] and roomy["dropped"] == []
    shown = _run(api_url, key_file, "window", "s-cli", "--budget", "4000")
    assert shown.startswith(f"{roomy['tokens']} of 4000 tokens: 4 messages")
    assert "SEQUENCE_NO  PRIORITY  ROLE" in shown
    budget = roomy["tokens"] // 2
    tight = json.loads(_run(api_url, key_file, "window", "s-cli", "--budget", str(budget), "--json"))
    kept = {m["sequence_no"] for m in tight["messages"]}
    dropped = {d["sequence_no"] for d in tight["dropped"]}
    assert tight["tokens"] <= budget and kept and dropped and kept | dropped == {1, 2, 3, 4}
    assert (3 in kept) == (4 in kept)  # a tool call and its result are kept or dropped together
    table = _run(api_url, key_file, "window", "s-cli", "--budget", str(budget)).split("dropped:\n")[1].splitlines()
    assert table[0].split() == ["SEQUENCE_NO", "PRIORITY", "REASON"]
    assert {int(line.split()[0]) for line in table[1:]} == dropped

    done = _run(api_url, key_file, "commit", "s-cli", "--commit-id", "c-cli-1", "--wait")
    assert "status             completed" in done and "messages           1–4" in done
    assert any("created" in line and "PROFILE" in line and "profile.city" in line for line in done.splitlines())
    view = json.loads(_run(api_url, key_file, "show", "s-cli", "--commit", "c-cli-1", "--json"))
    assert view["status"] in {"completed", "completed_with_rejections"} and view["summary_id"] is not None
    city = next(m for m in view["memories"]["created"] if m["key"] == "profile.city")
    assert city["source_level"] == "E2" and city["evidence_refs"] == [f"event:{roomy['messages'][0]['event_id']}"]
    again = _run(api_url, key_file, "commit", "s-cli", "--commit-id", "c-cli-1")
    assert again.startswith("commit c-cli-1 ") and "already accepted" in again

    nothing = _invoke(api_url, key_file, "commit", "s-cli")
    assert nothing.exit_code == 1 and "(nothing_to_commit, HTTP 409)" in nothing.stderr

    session = _run(api_url, key_file, "show", "s-cli")
    assert "session_id         s-cli" in session and "committed_through  4" in session
    assert "summary v1 (messages 1–4)" in session and "上海" in session


def test_the_api_address_comes_from_the_settings_and_the_key_from_the_data_dir(
    api_url: str, make_key: MakeKey, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MNEMO_API_URL", raising=False)
    monkeypatch.delenv("MNEMO_API_KEY", raising=False)
    host, port = api_url.removeprefix("http://").split(":")
    monkeypatch.setenv("MNEMO_API_HOST", host)
    monkeypatch.setenv("MNEMO_API_PORT", port)
    (tmp_path / "admin.key").write_text(make_key())
    result = CliRunner().invoke(app, ["session", "messages", "s-defaults", "--user", "hello",
                                      "--data-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sequence_range"] == {"from": 1, "to": 1}

    missing = CliRunner().invoke(app, ["session", "show", "s-defaults", "--data-dir", str(tmp_path / "nowhere")])
    assert missing.exit_code == 1
    assert f"no API key: {tmp_path / 'nowhere' / 'admin.key'} does not exist" in missing.stderr


def test_bad_input_and_unknown_sessions_are_one_line_errors(api_url: str, key_file: Path, tmp_path: Path) -> None:
    both = _invoke(api_url, key_file, "messages", "s-bad", "--user", "hi", "--file", str(tmp_path / "x.json"))
    assert both.exit_code == 1 and "either --file or one or more --user" in both.stderr
    neither = _invoke(api_url, key_file, "messages", "s-bad")
    assert neither.exit_code == 1 and "either --file or one or more --user" in neither.stderr
    (tmp_path / "bad.json").write_text('{"messages": "hello"}')
    shape = _invoke(api_url, key_file, "messages", "s-bad", "--file", str(tmp_path / "bad.json"))
    assert shape.exit_code == 1 and "must hold a list of messages" in shape.stderr
    (tmp_path / "naive.json").write_text(json.dumps(
        [{"idempotency_key": "n-1", "role": "user", "content": "hi", "created_at": "2026-07-14T14:00:00"}]
    ))
    naive = _invoke(api_url, key_file, "messages", "s-bad", "--file", str(tmp_path / "naive.json"))
    assert naive.exit_code == 1 and "HTTP 422" in naive.stderr
    unknown = _invoke(api_url, key_file, "show", "s-never-opened")
    assert unknown.exit_code == 1 and "(not_found, HTTP 404)" in unknown.stderr
    unreachable = CliRunner().invoke(session_app, ["window", "s-bad", "--api-url", "http://127.0.0.1:9",
                                                   "--key-file", str(key_file)])
    assert unreachable.exit_code == 1 and "cannot reach the API at http://127.0.0.1:9" in unreachable.stderr
