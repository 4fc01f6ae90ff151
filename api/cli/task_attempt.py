"""``mnemo task attempt …``: perform an agent step by hand or from a shell script — claim it, renew the lease,
complete it with files, or fail it (README "Agent-performed steps"; the same routes any agent calls)."""

from __future__ import annotations

import base64
import json
import mimetypes
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.options import Client, api_client
from api.cli.output import fail, json_option

MEDIA_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")
attempt_app = typer.Typer(help="Agent-performed steps: claim, heartbeat, complete, fail.", no_args_is_help=True)


def _claimed(c: dict[str, Any]) -> str:
    lines = [f"attempt {c['attempt_id']} (#{c['attempt_number']}) of step {c['step_id']}, "
             f"lease until {c['lease_expires_at']}",
             f"goal: {json.dumps(c['input']['goal'], ensure_ascii=False)}"]
    lines += [f"artifact {a['step_id']}/{a['name']} ({a['media_type']}) sha256 {a['sha256']}"
              for a in c["input"]["artifacts"]]
    if c["input"].get("rejection_reason"):
        lines.append(f"the approver rejected the last draft: {c['input']['rejection_reason']}")
    return "\n".join(lines)


@attempt_app.command("claim")
@api_client
def claim(
    task_id: str,
    step: Annotated[str | None, typer.Option(help="The step to claim (default: the one the task waits on).")] = None,
    lease: Annotated[int, typer.Option(help="Seconds the claim holds the step (5-3600).")] = 300,
    *,
    client: Client,
) -> None:
    """Claim the step the task waits on: its goal, the task's artifacts so far, and a reviewer's reason."""
    body: dict[str, Any] = {"lease_seconds": lease, **({"step_id": step} if step else {})}
    client.answer(client.call("POST", f"/tasks/{task_id}/attempts", json=body), _claimed)


@attempt_app.command("heartbeat")
@api_client
def heartbeat(task_id: str, attempt_id: str, *, client: Client) -> None:
    """Renew the attempt's lease by the seconds it was claimed for."""
    renewed = client.call("POST", f"/tasks/{task_id}/attempts/{attempt_id}/heartbeat")
    client.answer(renewed, lambda r: f"lease until {r['lease_expires_at']}")


def _artifact(spec: str) -> dict[str, str]:
    """``NAME=PATH`` or ``NAME=PATH:MEDIA/TYPE``: the file's bytes under the artifact's name."""
    name, _, rest = spec.partition("=")
    path, _, media_type = rest.rpartition(":")
    if not path or not MEDIA_TYPE.match(media_type):  # no media type given: it is guessed from the file's name
        path, media_type = rest, ""
    if not name or not path:
        fail(f"--artifact {spec!r}: say NAME=PATH or NAME=PATH:MEDIA/TYPE, e.g. digest.md=out/digest.md:text/markdown")
    file = Path(path)
    if not file.is_file():
        fail(f"--artifact {spec!r}: {path} is not a readable file")
    media_type = media_type or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return {"name": name, "media_type": media_type, "content_base64": base64.b64encode(file.read_bytes()).decode()}


@attempt_app.command("complete")
@api_client
def complete(
    task_id: str,
    attempt_id: str,
    artifact: Annotated[list[str] | None, typer.Option(help="NAME=PATH[:MEDIA/TYPE], once per file.")] = None,
    output: Annotated[str, typer.Option(help="The step's output, a JSON object.")] = "{}",
    *,
    client: Client,
) -> None:
    """Complete the attempt with its files (the same call again is answered as a replay)."""
    parsed = json_option(output, "--output", '{"items": 3}')
    body = {"artifacts": [_artifact(spec) for spec in artifact or []], "output": parsed}
    done = client.call("POST", f"/tasks/{task_id}/attempts/{attempt_id}/complete", json=body)
    client.answer(done, lambda d: f"step {d['step_id']} completed" + (" (already, replayed)" if d["replayed"] else "")
                  + "".join(f"\n{a['name']} sha256 {a['sha256']}" for a in d["artifacts"]))


@attempt_app.command("fail")
@api_client
def fail_attempt(
    task_id: str,
    attempt_id: str,
    reason: Annotated[str, typer.Option(help="What went wrong, for the people reading the task.")],
    retryable: Annotated[bool, typer.Option(help="Another claim may succeed (else the task fails).")] = True,
    *,
    client: Client,
) -> None:
    """Fail the attempt: retryable, the step waits for the next claim; otherwise the task fails with the reason."""
    failed = client.call("POST", f"/tasks/{task_id}/attempts/{attempt_id}/fail",
                         json={"reason": reason, "retryable": retryable})
    client.answer(failed, lambda f: f"attempt failed; the step is {f['step_status']}")
