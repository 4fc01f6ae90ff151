"""The incident-digest example (issue 26, item 8) run end to end as a person runs it: examples/incident_digest/
agent.py's own functions (stdlib HTTP, nothing of mnemo's) against a real uvicorn serving the API, a worker of the
test's own, real PostgreSQL and Temporal. The ``summarise`` step's model is the labelled LLM stand-in
(tests/sessions/llm_standin.py: a real OpenAI-compatible HTTP server whose answers the test scripts); it is the only
stand-in here.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from activities.tasks.faults import FaultPlan
from api.main import create_app
from api.settings import Settings
from bench.model_server import WRITTEN_BY_NO_MODEL, ModelServer
from examples.incident_digest import agent
from tests.conftest import MakeKey
from tests.factories import candidate
from tests.sessions.llm_standin import LlmStandIn, completion, running_standin
from tests.tasks.conftest import own_worker
from tests.workers import served

RUNBOOK = "On-call runbook for checkout: restart the payment proxy before failing the database over."
ANSWER: dict[str, Any] = {"summary": "The payment proxy failed twice in November.",
                          "actions": ["alert on proxy 502s above 1%"]}
GOAL = ("checkout", "2026-11-01", "2026-11-30")


@dataclass(frozen=True)
class Digest:
    """The example's three people, each with the API at hand: an admin, the task's owner, an approver."""

    admin: agent.Api
    owner: agent.Api
    approver: agent.Api


@asynccontextmanager
async def running(settings: Settings, engine: Engine, make_key: MakeKey, llm_url: str) -> AsyncIterator[Digest]:
    """The API served on a port with ``llm_url`` as its LLM endpoint, and a worker with the same endpoint."""
    llm = {"llm_base_url": llm_url, "llm_model": "standin-model"}
    config = settings.model_copy(update=llm).llm_config()
    async with own_worker(settings, engine, threads=4, faults=FaultPlan(), llm=config) as (_, queue):
        own = settings.model_copy(update={**llm, "task_queue": queue})
        with served(create_app(own)) as port:
            url, tenant = f"http://127.0.0.1:{port}", f"t-{uuid.uuid4().hex[:12]}"
            yield Digest(agent.Api(url, make_key(tenant=tenant, user="root", roles=("admin",))),
                         agent.Api(url, make_key(tenant=tenant, user="alice", roles=("memory_writer",))),
                         agent.Api(url, make_key(tenant=tenant, user="bob", roles=("approver",))))


async def scripted(settings: Settings, engine: Engine, make_key: MakeKey,
                   scenario: Callable[[Digest, LlmStandIn], None]) -> None:
    """``scenario`` against the API and a worker whose model is the scripted stand-in; in a thread, since its HTTP
    calls block and the worker runs on this event loop."""
    with running_standin() as standin:
        async with running(settings, engine, make_key, standin.base_url) as digest:
            await asyncio.to_thread(scenario, digest, standin)


def work(api: agent.Api, task_id: str, logged: list[str]) -> dict[str, Any]:
    return agent.work(api, task_id, poll_seconds=0.2, timeout_seconds=60, log=logged.append)


def decide(api: agent.Api, view: dict[str, Any], decision: str, reason: str | None = None) -> None:
    body = {"decision": decision, "artifact_sha256": view["pending_approval"]["artifact_sha256"],
            "state_version": view["state_version"], **({"reason": reason} if reason else {})}
    api.call("POST", f"/tasks/{view['task_id']}/approvals", body)


def artifact(api: agent.Api, task_id: str, name: str) -> bytes:
    """The task's artifact called ``name`` (the newest), found in its timeline's last checkpoint."""
    timeline = api.call("GET", f"/tasks/{task_id}/timeline")
    refs = [entry["artifact_refs"] for entry in timeline["entries"] if entry["kind"] == "checkpoint"][-1]
    [sha, *_] = [ref["sha256"] for ref in reversed(refs) if ref["name"] == name]
    return api.bytes_of(f"/tasks/{task_id}/artifacts/{sha}")


def summarise_attempts(api: agent.Api, task_id: str) -> list[str]:
    timeline = api.call("GET", f"/tasks/{task_id}/timeline")
    return [entry["status"] for entry in sorted(timeline["entries"], key=lambda e: str(e["at"]))
            if entry["kind"] == "attempt" and entry["step_id"] == "summarise"]


def the_digest_is_reviewed_and_published(digest: Digest, standin: LlmStandIn) -> None:
    """README's walk-through: registered by the CLI, the model asked once with the incidents and the owner's runbook,
    the digest rejected with a reason and redone answering it, the approved bytes published once to the archive."""
    assert agent.main(["--api-url", digest.admin.base_url, "--key", digest.admin.key, "register"]) == 0
    assert agent.register(digest.admin)["replayed"] is True  # the CLI registered it; the same body again replays
    digest.owner.call("POST", "/memory-candidates", candidate(RUNBOOK, category="ENTITY"))
    standin.script(completion(json.dumps(ANSWER), prompt_tokens=321, completion_tokens=17))
    task_id = agent.start(digest.owner, *GOAL)
    logged: list[str] = []

    view = work(digest.owner, task_id, logged)
    assert (view["status"], view["current_step_id"]) == ("WAITING_FOR_APPROVAL", "review"), (view, logged)
    [asked] = standin.received
    prompt = asked.body["messages"][0]["content"]
    assert "INC-101" in prompt and "INC-107" in prompt and "INC-112" not in prompt  # checkout's, in the window
    bundle = prompt[prompt.index("<memory_bundle"):prompt.index("</memory_bundle>")]
    assert RUNBOOK.removesuffix(".") in bundle  # the owner's runbook, recalled for the step and quoted as material
    assert asked.body["model"] == "standin-model"
    call = json.loads(artifact(digest.owner, task_id, "llm-call.json"))
    assert call["prompt_sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert (call["model"], call["prompt_tokens"], call["completion_tokens"]) == ("standin", 321, 17)
    assert "INC-101" not in json.dumps(call) and "payment proxy" not in json.dumps(call)  # by hash, not the prompt
    first = digest.owner.bytes_of(f"/tasks/{task_id}/artifacts/{view['pending_approval']['artifact_sha256']}")
    assert ANSWER["summary"] in first.decode() and "- alert on proxy 502s above 1%" in first.decode()
    assert "In answer to the review" not in first.decode()

    decide(digest.approver, view, "reject", "say how long each incident lasted")
    view = work(digest.owner, task_id, logged)
    assert view["status"] == "WAITING_FOR_APPROVAL", (view, logged)
    approved = digest.owner.bytes_of(f"/tasks/{task_id}/artifacts/{view['pending_approval']['artifact_sha256']}")
    text = approved.decode()
    assert "## In answer to the review\n\n> say how long each incident lasted" in text
    assert "| INC-101 | SEV2 | 2026-11-03T09:12:00Z | 2026-11-03T09:41:00Z | 29 min |" in text
    assert "| INC-107 | SEV3 | 2026-11-12T14:00:00Z | 2026-11-12T16:30:00Z | 2 h 30 min |" in text
    assert any("the reviewer asked: say how long each incident lasted" in line for line in logged)
    assert len(standin.received) == 1  # a rejection redoes render, not the model's step

    decide(digest.approver, view, "approve")
    view = work(digest.owner, task_id, logged)
    assert view["status"] == "SUCCEEDED", (view, logged)
    assert view["completed_step_ids"] == ["collect", "summarise", "render", "review", "publish"]
    [published] = digest.owner.call("GET", f"/tasks/{task_id}/publications")["items"]
    assert (published["destination"], published["artifact_sha256"]) == \
        ("archive", hashlib.sha256(approved).hexdigest())
    assert digest.owner.bytes_of(published["url"].removeprefix(digest.owner.base_url)) == approved



def a_bad_answer_is_asked_again(digest: Digest, standin: LlmStandIn) -> None:
    """Answers that break the output_schema are the step's own failures: asked again until one satisfies it."""
    agent.register(digest.admin)
    standin.script(completion("The digest: all fine."),  # not JSON
                   completion(json.dumps({"summary": "no actions"})),  # JSON, but no "actions"
                   completion(json.dumps(ANSWER)))
    task_id = agent.start(digest.owner, *GOAL)
    view = work(digest.owner, task_id, [])
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    prompts = {received.body["messages"][0]["content"] for received in standin.received}
    assert len(standin.received) == 3 and len(prompts) == 1  # the same question, asked again
    assert summarise_attempts(digest.owner, task_id) == ["FAILED", "FAILED", "SUCCEEDED"]
    assert json.loads(artifact(digest.owner, task_id, "answer.json")) == ANSWER



def test_the_agent_needs_nothing_but_the_standard_library() -> None:
    """Any language will do: the script imports only Python's own modules, none of mnemo's or anyone's."""
    tree = ast.parse(Path(agent.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {str(node.module).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.level == 0}
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported - sys.stdlib_module_names


def a_date_that_is_not_one_is_refused(digest: Digest, _: LlmStandIn) -> None:
    """The goal's dates are schema'd: one that is not YYYY-MM-DD is a 422 at POST /tasks, naming its path."""
    agent.register(digest.admin)
    body = {"task_type": agent.TASK_TYPE, "request_intent_id": "bad-date",
            "goal": {"service": "checkout", "since": "2026-11-31x", "until": "2026-11-30"}}
    try:
        digest.owner.call("POST", "/tasks", body)
    except agent.ApiError as refused:
        assert (refused.status, refused.code) == (422, "invalid_value") and "/goal/since" in refused.message
    else:
        raise AssertionError("a goal whose since is not a date was accepted")



def a_long_step_keeps_its_lease(digest: Digest, _: LlmStandIn) -> None:
    """A step that outlasts its lease keeps it by the agent's heartbeats (without them: 409 lease_expired)."""
    agent.register(digest.admin)
    task_id = agent.start(digest.owner, *GOAL)
    deadline = time.monotonic() + 30
    while digest.owner.call("GET", f"/tasks/{task_id}").get("waiting_reason") != "AGENT":
        assert time.monotonic() < deadline, "the task never waited for its collect step"
        time.sleep(0.2)
    claimed = digest.owner.call("POST", f"/tasks/{task_id}/attempts", {"lease_seconds": 5})
    logged: list[str] = []
    with agent.Heartbeat(digest.owner, f"/tasks/{task_id}/attempts/{claimed['attempt_id']}", 1.0, logged.append):
        time.sleep(7)  # longer than the 5 s lease: only the heartbeats keep it
    agent.do_step(digest.owner, task_id, claimed, agent.SAMPLE_INCIDENTS, 5, logged.append)
    assert logged[-1].startswith("completed collect: incidents.json") and len(logged) == 2, logged



@pytest.mark.parametrize("scenario", [
    pytest.param(the_digest_is_reviewed_and_published, id="collected-summarised-rejected-redone-published"),
    pytest.param(a_bad_answer_is_asked_again, id="an-answer-breaking-the-output-schema-is-asked-again"),
    pytest.param(a_date_that_is_not_one_is_refused, id="a-goal-out-of-its-schema-is-refused"),
    pytest.param(a_long_step_keeps_its_lease, id="heartbeats-keep-the-lease-of-a-longer-step"),
])
async def test_the_incident_digest(settings: Settings, engine: Engine, make_key: MakeKey,
                                   scenario: Callable[[Digest, LlmStandIn], None]) -> None:
    await scripted(settings, engine, make_key, scenario)


def tried_without_a_model(digest: Digest) -> None:
    agent.register(digest.admin)
    task_id = agent.start(digest.owner, *GOAL)
    view = work(digest.owner, task_id, [])
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    text = digest.owner.bytes_of(f"/tasks/{task_id}/artifacts/{view['pending_approval']['artifact_sha256']}").decode()
    assert f"## Summary\n\n({WRITTEN_BY_NO_MODEL})" in text and f"## Actions\n\n- ({WRITTEN_BY_NO_MODEL})" in text


async def test_the_example_runs_on_the_stand_in_model_server_without_a_model(
    settings: Settings, engine: Engine, make_key: MakeKey
) -> None:
    """README's way to try it: bench/model_server.py answers the llm step with a placeholder of its schema."""
    server = ModelServer().start()
    try:
        async with running(settings, engine, make_key, f"{server.url}/v1") as digest:
            await asyncio.to_thread(tried_without_a_model, digest)
    finally:
        server.stop()
    assert server.requests["/v1/chat/completions"] == 1
