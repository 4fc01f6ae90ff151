"""The `mnemo` command line, run as a real subprocess against the test database."""

import os
import re
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from api.settings import Settings
from tests.conftest import auth

MNEMO = str(Path(sys.executable).parent / "mnemo")


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MNEMO, *args], capture_output=True, text=True, env=env, timeout=60)


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    return {**base, "MNEMO_DATABASE_URL": settings.require_database_url(), **extra}


def test_keys_create_prints_only_a_working_key(settings: Settings, client: TestClient) -> None:
    result = _run(
        ["keys", "create", "--tenant", "cli-tenant", "--user", "carol", "--roles", "memory_writer"], _env(settings)
    )
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"mnemo_[a-z0-9]{12}_[A-Za-z0-9_-]{43}\n", result.stdout)
    key = result.stdout.strip()
    written = client.post(
        "/memory-candidates",
        json={
            "category": "PROFILE",
            "space": "USER",
            "content": "命令行创建的密钥",
            "source": {"source_id": "cli", "source_type": "TEST", "captured_at": "2026-06-01T00:00:00Z"},
            "source_level": "E2",
        },
        headers=auth(key),
    )
    assert written.status_code == 201
    assert written.json()["status"] == "ACTIVE"  # the key holds memory_writer
    assert client.get(f"/memories/{written.json()['memory_id']}", headers=auth(key)).json()["owner_id"] == "carol"


def test_keys_create_refuses_an_unknown_role(settings: Settings) -> None:
    result = _run(
        ["keys", "create", "--tenant", "cli-tenant", "--user", "dave", "--roles", "superuser"], _env(settings)
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert "unknown role(s) superuser" in result.stderr


def test_keys_create_without_a_database_says_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    result = _run(["keys", "create", "--tenant", "t", "--user", "u", "--data-dir", str(tmp_path)], env)
    assert result.returncode == 1
    assert "no running `mnemo dev`" in result.stderr
    assert "MNEMO_DATABASE_URL" in result.stderr


def test_migrate_is_idempotent(settings: Settings) -> None:
    result = _run(["migrate"], _env(settings))
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_production_commands_need_a_database_url() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    for command in ("migrate", "worker", "api"):
        result = _run([command], env)
        assert result.returncode == 1, command
        assert "MNEMO_DATABASE_URL is not set" in result.stderr
