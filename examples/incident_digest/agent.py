"""The incident digest's agent: it performs the ``agent`` steps of an ``incident-digest`` task over mnemo's REST API.

Standard library only, and nothing of mnemo's: the proof that an agent in any language can do a task's steps with
HTTP and JSON alone. ``register`` puts definition.json (an admin key), ``start`` starts a task, ``work`` does the
task's agent steps until it ends or waits for a person (see README.md next to this file).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

TASK_TYPE = "incident-digest"
DEFINITION = Path(__file__).with_name("definition.json")
ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
PEOPLES_TURN = frozenset({"WAITING_FOR_APPROVAL", "WAITING_FOR_OPERATOR"})
"""The task waits for a person (an approver's decision, an operator's resolution): the agent has nothing to do."""

SAMPLE_INCIDENTS: list[dict[str, Any]] = [
    {"id": "INC-101", "service": "checkout", "severity": "SEV2", "title": "payment proxy returned 502s",
     "opened_at": "2026-11-03T09:12:00Z", "resolved_at": "2026-11-03T09:41:00Z",
     "impact": "3% of checkouts failed for 29 minutes"},
    {"id": "INC-107", "service": "checkout", "severity": "SEV3", "title": "slow order confirmation e-mails",
     "opened_at": "2026-11-12T14:00:00Z", "resolved_at": "2026-11-12T16:30:00Z",
     "impact": "confirmations arrived up to 40 minutes late"},
    {"id": "INC-112", "service": "search", "severity": "SEV3", "title": "stale index after a failed rebuild",
     "opened_at": "2026-11-20T07:05:00Z", "resolved_at": "2026-11-20T08:00:00Z",
     "impact": "new products missing from results for an hour"},
]
"""What ``collect`` gathers when no ``--incidents`` file is given: enough to try the example end to end."""

Log = Callable[[str], None]


class ApiError(Exception):
    """mnemo answered with an error: its HTTP status, its machine ``code`` and its sentence."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class StepError(Exception):
    """The step could not be done; ``retryable``: another try may succeed (the agent's own transient trouble)."""

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason, self.retryable = reason, retryable


class Api:
    """mnemo's REST API at ``base_url``, called with one API key."""

    def __init__(self, base_url: str, key: str, timeout: float = 30.0) -> None:
        self.base_url, self.key, self.timeout = base_url.rstrip("/"), key, timeout

    def _send(self, method: str, path: str, body: Any = None) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.key}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                content: bytes = response.read()
                return content
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                error = json.loads(raw)["error"]
                raise ApiError(exc.code, str(error["code"]), str(error["message"])) from None
            except (ValueError, KeyError, TypeError):
                raise ApiError(exc.code, "http_error", raw.decode(errors="replace")[:200]) from None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """A JSON request and its JSON answer; :class:`ApiError` for an error answer."""
        return json.loads(self._send(method, path, body))

    def bytes_of(self, path: str) -> bytes:
        return self._send("GET", path)


def register(api: Api, definition: dict[str, Any] | None = None) -> dict[str, Any]:
    """Register definition.json as the tenant's ``incident-digest`` type (an admin key); the same body again is
    a replay, so running this twice is harmless."""
    body = definition if definition is not None else json.loads(DEFINITION.read_text())
    answer: dict[str, Any] = api.call("PUT", f"/task-definitions/{TASK_TYPE}", body)
    return answer


def start(api: Api, service: str, since: str, until: str, intent: str | None = None) -> str:
    """Start a digest of ``service`` from ``since`` to ``until`` (dates, inclusive); the task id. The same
    ``intent`` again is the same task (start is idempotent by it)."""
    if since > until:
        raise ValueError(f"since ({since}) is after until ({until}): swap them")
    body = {"task_type": TASK_TYPE, "goal": {"service": service, "since": since, "until": until},
            "request_intent_id": intent or f"digest-{uuid.uuid4().hex[:12]}"}
    return str(api.call("POST", "/tasks", body)["task_id"])


def collect(goal: dict[str, Any], incidents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The incidents of the goal's service opened within its window, oldest first."""
    if goal["since"] > goal["until"]:
        raise StepError(f"the goal's since ({goal['since']}) is after its until ({goal['until']})", retryable=False)
    return sorted((incident for incident in incidents if incident.get("service") == goal["service"]
                   and goal["since"] <= str(incident.get("opened_at", ""))[:10] <= goal["until"]),
                  key=lambda incident: str(incident.get("opened_at", "")))


def render(goal: dict[str, Any], answer: dict[str, Any], incidents: list[dict[str, Any]],
           rejection_reason: str | None) -> str:
    """The digest as Markdown: the model's summary and actions, the incidents; after a rejection, a section that
    quotes the reviewer's reason and answers it with each incident's full record (times, how long it lasted,
    severity, impact): a script cannot read the reason, so it gives the reviewer everything it has."""
    lines = [f"# Incident digest: {goal['service']}, {goal['since']} to {goal['until']}", "",
             "## Summary", "", str(answer["summary"]), "", "## Actions", ""]
    lines += [f"- {action}" for action in answer["actions"]] or ["- none"]
    lines += ["", f"## Incidents ({len(incidents)})", ""]
    lines += [f"- **{i['id']}** ({i.get('severity', '?')}): {i.get('title', '')}" for i in incidents] or ["- none"]
    if rejection_reason:
        lines += ["", "## In answer to the review", "", f"> {rejection_reason}", "",
                  "Every incident in full:", "", "| incident | severity | opened | resolved | lasted | impact |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {i['id']} | {i.get('severity', '?')} | {i.get('opened_at', '?')} | "
                  f"{i.get('resolved_at', 'open')} | {_lasted(i)} | {i.get('impact', 'not recorded')} |"
                  for i in incidents]
    return "\n".join(lines) + "\n"


def _lasted(incident: dict[str, Any]) -> str:
    """How long the incident lasted, from its ISO 8601 times; ``?`` when one is missing or unreadable."""
    try:
        opened = datetime.fromisoformat(str(incident["opened_at"]))
        minutes = int((datetime.fromisoformat(str(incident["resolved_at"])) - opened).total_seconds() // 60)
    except (KeyError, ValueError, TypeError):
        return "?"
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def _artifact(api: Api, task_id: str, claimed: dict[str, Any], step_id: str, name: str) -> bytes:
    """An earlier step's artifact, named in the claim's input, fetched by its sha256."""
    for ref in claimed["input"]["artifacts"]:
        if (ref["step_id"], ref["name"]) == (step_id, name):
            try:
                return api.bytes_of(f"/tasks/{task_id}/artifacts/{ref['sha256']}")
            except ApiError as exc:
                raise StepError(f"could not read {step_id}/{name}: {exc}", retryable=exc.status >= 500) from exc
            except OSError as exc:
                raise StepError(f"could not read {step_id}/{name}: {exc}", retryable=True) from exc
    raise StepError(f"the step's input has no artifact {step_id}/{name}", retryable=False)


def perform(api: Api, task_id: str, claimed: dict[str, Any],
            incidents: list[dict[str, Any]]) -> tuple[str, str, bytes]:
    """Do the claimed step: its artifact's name, media type and bytes."""
    goal, step_id = claimed["input"]["goal"], claimed["step_id"]
    if step_id == "collect":
        found = collect(goal, incidents)
        return "incidents.json", "application/json", json.dumps(found, indent=2, ensure_ascii=False).encode()
    if step_id == "render":
        answer = json.loads(_artifact(api, task_id, claimed, "summarise", "answer.json"))
        gathered = json.loads(_artifact(api, task_id, claimed, "collect", "incidents.json"))
        text = render(goal, answer, gathered, claimed["input"].get("rejection_reason"))
        return "digest.md", "text/markdown", text.encode()
    raise StepError(f"this agent does not know the step {step_id!r} (an incident-digest of another version?)",
                    retryable=False)


class Heartbeat(threading.Thread):
    """Renews an attempt's lease every ``every`` seconds while a ``with`` block works, so a long step keeps its
    claim; a failed renewal is logged, not fatal (the step's complete says whether the lease held)."""

    def __init__(self, api: Api, attempt_path: str, every: float, log: Log) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.api, self.attempt_path, self.every, self.log = api, attempt_path, every, log
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            try:
                self.api.call("POST", f"{self.attempt_path}/heartbeat", {})
            except (ApiError, OSError) as exc:
                self.log(f"heartbeat failed ({exc}); the step goes on, its complete will tell")

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.join()


def do_step(api: Api, task_id: str, claimed: dict[str, Any], incidents: list[dict[str, Any]],
            lease_seconds: int, log: Log) -> None:
    """Perform one claimed step under heartbeats, then complete it, or fail it saying whether to retry."""
    attempt = f"/tasks/{task_id}/attempts/{claimed['attempt_id']}"
    log(f"claimed {claimed['step_id']} (attempt {claimed['attempt_number']}, lease until "
        f"{claimed['lease_expires_at']})" + (f"; the reviewer asked: {claimed['input']['rejection_reason']}"
                                             if claimed["input"].get("rejection_reason") else ""))
    try:
        with Heartbeat(api, attempt, max(lease_seconds / 3, 1.0), log):
            try:
                name, media_type, content = perform(api, task_id, claimed, incidents)
            except (ValueError, KeyError, TypeError) as exc:  # an earlier artifact is not what this agent reads
                raise StepError(f"unexpected input to {claimed['step_id']}: {exc!r}", retryable=False) from exc
        artifact = {"name": name, "media_type": media_type, "content_base64": base64.b64encode(content).decode()}
        api.call("POST", f"{attempt}/complete", {"artifacts": [artifact], "output": {"bytes": len(content)}})
        log(f"completed {claimed['step_id']}: {name} ({len(content)} bytes)")
    except StepError as exc:
        api.call("POST", f"{attempt}/fail", {"reason": exc.reason, "retryable": exc.retryable})
        log(f"failed {claimed['step_id']} ({'will retry' if exc.retryable else 'gave up'}): {exc.reason}")
    except ApiError as exc:
        if exc.code not in ("lease_expired", "task_closed"):
            raise
        log(f"{claimed['step_id']} not delivered ({exc.code}): {exc.message}")


def work(api: Api, task_id: str, *, incidents: list[dict[str, Any]] | None = None, lease_seconds: int = 120,
         poll_seconds: float = 1.0, timeout_seconds: float = 3600.0, log: Log = print) -> dict[str, Any]:
    """Do the task's agent steps until it ends or waits for a person; its last view. Waiting steps are claimed;
    one another agent holds is left to it (409 ``step_claimed``); a task that never gets there within
    ``timeout_seconds`` is left as it is, with a message."""
    sample = SAMPLE_INCIDENTS if incidents is None else incidents
    deadline = time.monotonic() + timeout_seconds
    while True:
        view: dict[str, Any] = api.call("GET", f"/tasks/{task_id}")
        if view["status"] in ENDED or view["status"] in PEOPLES_TURN:
            log(f"task {task_id} is {view['status']}" + (f": {view['error']['message']}" if view.get("error") else
                                                          "; over to a person" if view["status"] in PEOPLES_TURN
                                                          else ""))
            return view
        if time.monotonic() > deadline:
            log(f"task {task_id} is still {view['status']} after {timeout_seconds:.0f}s; run `work` again later")
            return view
        if view["status"] == "WAITING_FOR_EXTERNAL" and view.get("waiting_reason") == "AGENT":
            try:
                claimed = api.call("POST", f"/tasks/{task_id}/attempts", {"lease_seconds": lease_seconds})
            except ApiError as exc:
                if exc.code == "step_claimed":
                    log(f"{exc.message}; waiting")
                elif exc.code != "no_step_ready":  # no_step_ready: the task moved on since it was read
                    raise
            else:
                do_step(api, task_id, claimed, sample, lease_seconds, log)
                continue
        time.sleep(poll_seconds)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-url", default=os.environ.get("MNEMO_API_URL", "http://127.0.0.1:8000"),
                        help="mnemo's URL (default $MNEMO_API_URL, else mnemo dev's http://127.0.0.1:8000)")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--key", default=os.environ.get("MNEMO_API_KEY"),
                      help="the API key (default $MNEMO_API_KEY): an admin's to register, the task owner's after")
    keys.add_argument("--key-file", type=Path, help="a file holding the key, such as mnemo dev's .mnemo/admin.key")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("register", help="register definition.json as the incident-digest type")
    started = commands.add_parser("start", help="start a digest; prints the task id")
    started.add_argument("service")
    started.add_argument("since", help="YYYY-MM-DD")
    started.add_argument("until", help="YYYY-MM-DD")
    worked = commands.add_parser("work", help="do the task's agent steps until it ends or waits for a person")
    worked.add_argument("task_id")
    worked.add_argument("--incidents", type=Path, help="a JSON list of incidents (default: the built-in sample)")
    worked.add_argument("--lease-seconds", type=int, default=120)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        key = args.key_file.read_text().strip() if args.key_file else args.key
    except OSError as exc:
        print(f"cannot read the key file: {exc}", file=sys.stderr)
        return 2
    if not key:
        print("no API key: pass --key-file .mnemo/admin.key (mnemo dev writes it), --key, or set MNEMO_API_KEY",
              file=sys.stderr)
        return 2
    api = Api(args.api_url, key)
    try:
        if args.command == "register":
            answer = register(api)
            print(f"{TASK_TYPE} version {answer['version']} registered" + (" (already)" if answer.get("replayed")
                                                                            else ""))
        elif args.command == "start":
            print(start(api, args.service, args.since, args.until))
        else:
            incidents = None if args.incidents is None else json.loads(args.incidents.read_text())
            view = work(api, args.task_id, incidents=incidents, lease_seconds=args.lease_seconds)
            return 0 if view["status"] != "FAILED" else 1
    except ApiError as exc:
        print(f"mnemo refused: {exc}", file=sys.stderr)
        return 1
    except urllib.error.URLError as exc:
        print(f"cannot reach mnemo at {args.api_url}: {exc.reason} (is `mnemo dev` running?)", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
