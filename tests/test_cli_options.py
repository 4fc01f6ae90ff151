"""Every API-client command of ``mnemo`` takes the same five connection options, after the subcommand
(:func:`api.cli.options.api_client` declares them once), and they reach the connection it makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.cli.app import app
from api.devstack.processes import free_port

A_JSON_FILE = str(Path(__file__).resolve().parents[1] / "memory" / "resources" / "builtin" / "task.json")
"""Any JSON document will do: ``task definition put`` reads its file before it calls the API."""
IMPORT_FILE = str(Path(__file__).resolve().parents[1] / "examples" / "import.jsonl")
"""The README's example file: ``import`` reads it, then calls the API with its first batch."""
SKILL_DIR = str(Path(__file__).resolve().parents[1] / "memory" / "skills" / "system" / "monthly-report")
"""A skill directory: ``skills push`` reads it before it calls the API."""

COMMANDS: list[tuple[str, ...]] = [
    ("task", "start", "--month", "2026-06"),
    ("task", "list"),
    ("task", "show", "t-1"),
    ("task", "approve", "t-1", "--sha", "abc", "--version", "3"),
    ("task", "reject", "t-1", "--reason", "no", "--sha", "abc", "--version", "3"),
    ("task", "pause", "t-1"),
    ("task", "resume", "t-1"),
    ("task", "cancel", "t-1"),
    ("task", "resolve", "t-1", "op-1", "--outcome", "published", "--note", "checked"),
    ("task", "types"),
    ("task", "definition", "put", "incident-digest", "--file", A_JSON_FILE),
    ("task", "definition", "show", "incident-digest"),
    ("task", "attempt", "claim", "t-1"),
    ("task", "attempt", "heartbeat", "t-1", "a-1"),
    ("task", "attempt", "complete", "t-1", "a-1", "--artifact", f"digest.json={A_JSON_FILE}"),
    ("task", "attempt", "fail", "t-1", "a-1", "--reason", "no"),
    ("task", "schedule", "put", "monthly", "--type", "monthly-report", "--goal", "{}", "--cron", "0 9 1 * *"),
    ("task", "schedule", "list"),
    ("task", "schedule", "show", "monthly"),
    ("task", "schedule", "pause", "monthly"),
    ("task", "schedule", "unpause", "monthly"),
    ("task", "schedule", "delete", "monthly"),
    ("session", "messages", "s-1", "--user", "hello"),
    ("session", "window", "s-1"),
    ("session", "commit", "s-1"),
    ("session", "show", "s-1"),
    ("policy", "set", "agent-1", "crm.contact", "--operations", "read", "--fields", "/name"),
    ("policy", "list", "agent-1"),
    ("policy", "delete", "agent-1", "crm.contact"),
    ("skills", "push", SKILL_DIR, "--space", "tenant"),
    ("skills", "list"),
    ("skills", "show", "monthly-report"),
    ("knowledge", "list"),
    ("knowledge", "show", "c-1"),
    ("knowledge", "review", "c-1", "--decision", "approve", "--sha", "abc", "--version", "3"),
    ("knowledge", "propose", A_JSON_FILE),
    ("import", IMPORT_FILE),
]
"""Each command with the arguments it requires: the words a person types before the connection options."""

CLIENT_OPTIONS = [
    # (parameter, option, envvar, default)
    ("api_url", "--api-url", "MNEMO_API_URL", None),
    ("key", "--key", "MNEMO_API_KEY", None),
    ("key_file", "--key-file", None, None),
    ("data_dir", "--data-dir", "MNEMO_DATA_DIR", Path(".mnemo")),
    ("as_json", "--json", None, False),
]


def _name(words: tuple[str, ...]) -> tuple[str, ...]:
    """The words that name the command (its groups' and its own), without its arguments."""
    node: Any = typer.main.get_command(app)
    named: tuple[str, ...] = ()
    for word in words:
        if not hasattr(node, "commands"):
            break
        node, named = node.commands[word], (*named, word)
    return named


def _command(words: tuple[str, ...]) -> Any:
    node: Any = typer.main.get_command(app)
    for word in _name(words):
        node = node.commands[word]
    return node


def _leaves(node: Any, named: tuple[str, ...]) -> set[tuple[str, ...]]:
    if not hasattr(node, "commands"):
        return {named}
    return {leaf for word, child in node.commands.items() for leaf in _leaves(child, (*named, word))}


def test_the_table_names_every_api_client_command() -> None:
    root: Any = typer.main.get_command(app)
    listed = {_name(words) for words in COMMANDS}
    groups = ("task", "session", "policy", "skills", "knowledge")
    commands = {("import",)}  # the API-client commands outside a group
    assert listed == {leaf for group in groups for leaf in _leaves(root.commands[group], (group,))} | commands


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(_name(words)))
def test_the_five_options_close_every_command(words: tuple[str, ...]) -> None:
    params = _command(words).params
    assert [p.name for p in params if p.name == "client"] == []  # the resolved Client is no option
    found = [(p.name, list(p.opts), p.envvar, p.default) for p in params[-len(CLIENT_OPTIONS):]]
    assert found == [(name, [option], envvar, default) for name, option, envvar, default in CLIENT_OPTIONS]
    assert all(p.name not in {name for name, *_ in CLIENT_OPTIONS} for p in params[: -len(CLIENT_OPTIONS)])


@pytest.fixture(scope="module")
def closed_url() -> str:
    """An address nothing listens on: a call there fails at once, naming the URL the command resolved."""
    return f"http://127.0.0.1:{free_port()}"


def _env() -> dict[str, str | None]:
    return {name: None for name in ("MNEMO_API_URL", "MNEMO_API_KEY", "MNEMO_DATA_DIR", "MNEMO_API_HOST",
                                     "MNEMO_API_PORT")}


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(_name(words)))
def test_the_options_after_the_subcommand_reach_the_connection(
    words: tuple[str, ...], closed_url: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "some.key"
    key_file.write_text("mnemo_fromfile\n")
    args = [*words, "--api-url", closed_url + "/", "--key-file", str(key_file), "--data-dir", str(tmp_path), "--json"]
    result = CliRunner().invoke(app, args, env=_env())
    assert result.exit_code == 1, result.output
    assert f"mnemo: cannot reach the API at {closed_url} (" in result.stderr

    missing = CliRunner().invoke(app, [*words, "--data-dir", str(tmp_path / "nowhere")], env=_env())
    assert missing.exit_code == 1
    assert f"no API key: {tmp_path / 'nowhere' / 'admin.key'} does not exist" in missing.stderr


def test_the_environment_stands_in_for_the_options(closed_url: str, tmp_path: Path) -> None:
    env = {**_env(), "MNEMO_API_URL": closed_url, "MNEMO_API_KEY": "mnemo_fromenv",
           "MNEMO_DATA_DIR": str(tmp_path / "nowhere")}
    result = CliRunner().invoke(app, ["task", "list"], env=env)
    assert result.exit_code == 1
    assert f"cannot reach the API at {closed_url} (" in result.stderr  # the key came from MNEMO_API_KEY


def test_help_lists_the_options_after_the_commands_own() -> None:
    shown = CliRunner().invoke(app, ["policy", "set", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    lines = [line for line in shown.output.splitlines() if line.lstrip("│ *").startswith("--")]
    names = [line.lstrip("│ *").split()[0] for line in lines]
    assert names == ["--operations", "--fields", "--api-url", "--key", "--key-file", "--data-dir", "--json", "--help"]
