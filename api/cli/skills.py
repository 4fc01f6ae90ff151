"""``mnemo skills push|list|show``: skills as directories over the HTTP API.

``push`` sends a directory's files (``SKILL.md`` and extras such as ``examples/*.md``, hidden ones left out) as
text; the API parses, stores and numbers them. ``list`` and ``show`` print the skills as the key's requests
resolve them now, each field with the layer it came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from api.cli.options import Client, api_client
from api.cli.output import fail, table

skills_app = typer.Typer(help="Skills: SKILL.md directories, resolved SYSTEM → TENANT → AGENT.", no_args_is_help=True)


def read_directory(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (none hidden) by its relative POSIX path, as UTF-8 text."""
    if not (directory / "SKILL.md").is_file():
        fail(f"{directory} holds no SKILL.md: a skill is a directory with SKILL.md at its top")
    files: dict[str, str] = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if not path.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        try:
            files[relative.as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            fail(f"{path} is not UTF-8 text: a skill's files are text")
    return files


def _pushed(r: dict[str, Any]) -> str:
    where = r["space"] if r["agent_id"] is None else f"{r['space']} (agent {r['agent_id']})"
    verb = "unchanged: already" if r["replayed"] else "pushed as"
    return f"{r['name']} {verb} version {r['version']} of {where}, declared {r['declared_version']}, " \
           f"tree {r['tree_sha256'][:12]}"


@skills_app.command("push")
@api_client
def push(
    directory: Annotated[Path, typer.Argument(help="The skill's directory (SKILL.md at its top).")],
    space: Annotated[Literal["tenant", "agent"], typer.Option(help="tenant (admin) or agent (an overlay).")],
    agent: Annotated[str | None, typer.Option(help="--space agent, admin only: the agent (default: the key's).")]
    = None,
    *,
    client: Client,
) -> None:
    """Push a skill directory as its next version (the latest version's files again change nothing)."""
    body = {"space": space.upper(), "files": read_directory(directory)}
    client.answer(client.call("POST", "/skills", json=body, params={"agent": agent} if agent else None), _pushed)


def _listed(r: dict[str, Any]) -> str:
    rows = [{"name": s["name"], "layers": "+".join(layer["space"] for layer in s["layers"]),
             "description": (s["description"] or "-")[:60]} for s in r["items"]]
    return table(rows, ["name", "layers", "description"]) if rows else "no skills"


@skills_app.command("list")
@api_client
def list_skills(*, client: Client) -> None:
    """Your skills, resolved now, with the layers each one is made of."""
    client.answer(client.call("GET", "/skills"), _listed)


def _provenance(p: dict[str, Any]) -> str:
    version = "" if p["version"] is None else f" v{p['version']}"
    agent = "" if p["agent_id"] is None else f" {p['agent_id']}"
    return f"{p['space']}{agent}{version}"


def _shown(r: dict[str, Any]) -> str:
    lines = [f"{r['name']}  ({', '.join(_provenance(layer) for layer in r['layers'])})"]
    for field, won in [*r["fields"].items(), *r["files"].items()]:
        value = won["value"] if isinstance(won["value"], str) else "\n".join(f"- {v}" for v in won["value"])
        lines += ["", f"## {field}  [{_provenance(won['provenance'])}]", value]
    return "\n".join(lines)


@skills_app.command("show")
@api_client
def show(name: str, *, client: Client) -> None:
    """A skill as your requests resolve it, each field with the layer (space, version) it came from."""
    client.answer(client.call("GET", f"/skills/{name}"), _shown)
