"""``mnemo policy …``: set, list and delete what an agent may do with each resource type (admin keys).

Over the HTTP API with an API key, exactly as ``mnemo session`` connects (``--api-url`` / MNEMO_API_URL,
``--key`` / MNEMO_API_KEY, else ``--key-file``, default ``<data-dir>/admin.key``). An agent with no policy for a
type may not use it. Tables for people, ``--json`` for scripts.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from api.cli.options import Client, api_client
from api.cli.output import table

policy_app = typer.Typer(help="Per-agent resource policies: operations and fields per resource type.",
                         no_args_is_help=True)


def _path(agent_id: str, resource: str | None = None) -> str:
    parts = [agent_id] if resource is None else [agent_id, resource]
    return "/policies/" + "/".join(quote(part, safe="") for part in parts)


def _names(raw: str) -> list[str]:
    return [name.strip() for name in raw.split(",") if name.strip()]


def _rows(policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**policy, "operations": ",".join(policy["operations"]), "fields": ",".join(policy["fields"])}
            for policy in policies]


@policy_app.command("set")
@api_client
def set_policy(
    agent_id: str,
    resource: str,
    operations: Annotated[str, typer.Option("--operations", help="Comma-separated: list,search,read.")],
    fields: Annotated[str, typer.Option("--fields", help="Comma-separated field paths: /title,/status.")],
    *,
    client: Client,
) -> None:
    """Set what the agent may do with the type (replacing what it could); its next read sees it."""
    stored = client.call("PUT", _path(agent_id, resource),
                         json={"operations": _names(operations), "fields": _names(fields)})
    client.answer(stored, lambda policy: table(_rows([policy]), ["agent_id", "resource", "operations", "fields"]))


@policy_app.command("list")
@api_client
def list_policies(agent_id: str, *, client: Client) -> None:
    """The agent's policies by type; a type not listed is one the agent may not use."""
    found = client.call("GET", _path(agent_id))

    def render(answer: dict[str, Any]) -> str:
        if not answer["policies"]:
            return f"agent {answer['agent_id']} has no policy: it may use no resource type"
        return table(_rows(answer["policies"]), ["resource", "operations", "fields", "updated_at", "updated_by"])

    client.answer(found, render)


@policy_app.command("delete")
@api_client
def delete_policy(agent_id: str, resource: str, *, client: Client) -> None:
    """Revoke the agent's use of the type: its very next read, in a run or not, no longer sees it."""
    answer = client.call("DELETE", _path(agent_id, resource))

    def render(deleted: dict[str, Any]) -> str:
        revoked = deleted["revoked"]
        return (f"revoked agent {deleted['agent_id']}'s {deleted['resource']}: "
                f"{','.join(revoked['operations'])} on {','.join(revoked['fields'])}")

    client.answer(answer, render)
