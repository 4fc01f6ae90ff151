"""``mnemo knowledge list|show|review|propose``: knowledge candidates and published knowledge over the HTTP API.

A candidate is reviewed by a person holding ``knowledge_reviewer`` who did not propose it: ``show`` prints what
the review names (its content_sha256 and state_version) beside the claim, its redactions, duplicates and
conflicts; ``review`` sends the decision bound to them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from api.cli.options import Client, api_client
from api.cli.output import json_file, table

knowledge_app = typer.Typer(help="Knowledge: propose it, review candidates, read what is published.",
                            no_args_is_help=True)

CANDIDATE_COLUMNS = ["candidate_id", "status", "key", "authority", "author_user_id", "review_deadline"]
ITEM_COLUMNS = ["knowledge_id", "version", "status", "key", "authority", "reviewer_user_id", "published_at"]
Decision = Literal["approve", "reject", "request_changes"]


def _render(c: dict[str, Any]) -> str:
    scope = c["scope"]["type"] + (f" {c['scope']['project_id']}" if c["scope"].get("project_id") else "")
    lines = [f"{name:<16} {c.get(name) if c.get(name) is not None else '-'}"
             for name in ("candidate_id", "status", "version", "state_version", "content_sha256", "key",
                          "authority", "author_user_id", "review_deadline", "decision", "decided_by",
                          "decision_reason", "knowledge_id", "knowledge_version")]
    lines += [f"{'scope':<16} {scope}", f"{'claim':<16} {c['claim']}",
              f"{'sources':<16} {', '.join(c['source_refs'])}"]
    lines += [f"{'evidence':<16} {e['quote']}" + (f" ({e['ref']})" if e.get("ref") else "") for e in c["evidence"]]
    lines += [f"{'redacted':<16} {r['kind']} at {r['path']}" for r in c["redactions"]]
    lines += [f"{'duplicate':<16} {json.dumps(d, ensure_ascii=False)}" for d in c["duplicates"]]
    lines += [f"{'conflicts with':<16} {k['knowledge_id']} v{k['version']}: {k['claim']}" for k in c["conflicts"]]
    return "\n".join(lines)


@knowledge_app.command("list")
@api_client
def list_knowledge(
    status: Annotated[str | None, typer.Option(help="Candidates in this status, e.g. PENDING_REVIEW.")] = None,
    published: Annotated[bool, typer.Option("--published", help="Published items (ACTIVE) instead.")] = False,
    *,
    client: Client,
) -> None:
    """Candidates (a reviewer: the tenant's; anyone else: their own), or with --published the active items."""
    if published:
        items = client.call("GET", "/knowledge")
        client.answer(items, lambda r: table(r["items"], ITEM_COLUMNS) if r["items"] else "no published knowledge")
        return
    listed = client.call("GET", "/knowledge-candidates", params={"status": status} if status else None)
    client.answer(listed, lambda r: table(r["items"], CANDIDATE_COLUMNS) if r["items"] else "no candidates")


@knowledge_app.command("show")
@api_client
def show(candidate_id: str, *, client: Client) -> None:
    """A candidate as a reviewer sees it: claim, sources, evidence, redactions, duplicates, conflicts, deadline."""
    client.answer(client.call("GET", f"/knowledge-candidates/{candidate_id}"), _render)


@knowledge_app.command("review")
@api_client
def review(
    candidate_id: str,
    decision: Annotated[Decision, typer.Option(help="approve, reject or request_changes.")],
    sha: Annotated[str, typer.Option("--sha", help="The content_sha256 you reviewed (from show).")],
    version: Annotated[int, typer.Option("--version", help="The state_version you reviewed (from show).")],
    reason: Annotated[str | None, typer.Option(help="Why (needed to reject or request changes).")] = None,
    authority: Annotated[str | None, typer.Option(
        help="With approve: publish as P0, P1, P2 or P3 (default: as proposed).")] = None,
    *,
    client: Client,
) -> None:
    """Decide on a candidate (knowledge_reviewer role, not its author); approve publishes a version."""
    body: dict[str, Any] = {"decision": decision, "content_sha256": sha, "state_version": version}
    if reason is not None:
        body["reason"] = reason
    if authority is not None:
        body["authority"] = authority
    decided = client.call("POST", f"/knowledge-candidates/{candidate_id}/reviews", json=body)

    def render(r: dict[str, Any]) -> str:
        item = r["knowledge"]
        published = f"\npublished {item['knowledge_id']} version {item['version']}" if item else ""
        return _render(r["candidate"]) + published

    client.answer(decided, render)


@knowledge_app.command("propose")
@api_client
def propose(
    file: Annotated[Path, typer.Argument(help="The candidate, a JSON file: claim, authority, scope, source_refs, "
                                              "evidence?, key?, validity?", exists=True, dir_okay=False)],
    *,
    client: Client,
) -> None:
    """Propose knowledge from a JSON file; it waits for a reviewer."""
    created = client.call("POST", "/knowledge-candidates", json=json_file(file, "a candidate"))
    client.answer(created, lambda r: f"candidate {r['candidate_id']} {r['status']} (sha256 {r['content_sha256']})"
                  + "".join(f"\nredacted {x['kind']} at {x['path']}" for x in r["redactions"]))
