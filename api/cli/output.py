"""What every ``mnemo`` command prints: a one-line error on stderr, tables for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer


def fail(message: str) -> NoReturn:
    """End the command with ``mnemo: message`` on stderr and exit status 1 (never a traceback)."""
    typer.echo(f"mnemo: {message}", err=True)
    raise typer.Exit(1)


def json_file(file: Path, what: str) -> Any:
    """The JSON document in ``file``, or the command ends saying it is not one (``what`` it should hold)."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"{file} is not a JSON document ({exc}): {what} is a JSON object")


def json_option(value: str, option: str, example: str) -> Any:
    """The JSON an option was given, or the command ends saying so with an example of the option."""
    try:
        return json.loads(value)
    except ValueError as exc:
        fail(f"{option} is not JSON ({exc}); e.g. {option} '{example}'")


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Left-aligned columns sized to their content; None prints as '-'."""
    cells = [[("-" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def print_answer(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """The API's answer as it came (``--json``) or as ``render`` shows it to a person."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False) if as_json else render(data))
