"""A task definition's body is parsed strictly (issue 26, item 1): every problem named by its path and code, all of
them at once; a valid body keeps its steps in order and hashes to the same sha256 whatever its key order."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memory.tasks.definitions import InvalidDefinition, from_body, runnable

DIGEST: dict[str, Any] = {
    "version": "1",
    "goal_schema": {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"],
                    "additionalProperties": False},
    "steps": [
        {"step_id": "collect", "kind": "agent", "description": "collect the incidents"},
        {"step_id": "draft", "kind": "llm", "prompt": "Summarise {{artifacts.collect/incidents.json}} with {{bundle}}",
         "recall": {"query": "runbook"}, "output_schema": {"type": "object"}},
        {"step_id": "render", "kind": "compute", "function": "digest.render"},
        {"step_id": "review", "kind": "approval", "artifact_from": "render/digest.md", "deadline_seconds": 3600},
        {"step_id": "publish", "kind": "publish", "destination": "archive"},
    ],
    "redraft_step": "render",
}


def problems(task_type: str, body: object) -> list[tuple[str, str]]:
    with pytest.raises(InvalidDefinition) as refused:
        from_body(task_type, body)
    assert refused.value.code == "invalid_definition" and refused.value.http_status == 422
    return [(p["path"], p["code"]) for p in refused.value.details["problems"]]


def test_a_valid_body_keeps_its_steps_and_hashes_canonically() -> None:
    definition = from_body("incident-digest", DIGEST)
    assert [(s.step_id, s.kind) for s in definition.steps] == [
        ("collect", "agent"), ("draft", "llm"), ("render", "compute"), ("review", "approval"),
        ("publish", "publish")]
    assert definition.step("review").artifact_from == ("render", "digest.md")
    assert definition.redraft_step == "render" and definition.index("publish") == 4
    reordered = dict(reversed(list(copy.deepcopy(DIGEST).items())))
    assert from_body("incident-digest", reordered).sha256 == definition.sha256
    changed = copy.deepcopy(DIGEST)
    changed["steps"][0]["description"] = "collect them all"
    assert from_body("incident-digest", changed).sha256 != definition.sha256


@pytest.mark.parametrize(("change", "expected"), [
    (lambda b: b.update(extra=1), [("/extra", "unknown_field")]),
    (lambda b: b.pop("version"), [("/version", "missing_field")]),
    (lambda b: b.update(version="v 2"), [("/version", "invalid_value")]),
    (lambda b: b.update(goal_schema={"type": "array"}), [("/goal_schema/type", "invalid_goal_schema")]),
    (lambda b: b.update(goal_schema={"type": "object", "minProperties": -1}),
     [("/goal_schema/minProperties", "invalid_goal_schema")]),
    (lambda b: b.update(steps=[]), [("/steps", "invalid_type"), ("/redraft_step", "invalid_value")]),
    (lambda b: b["steps"][0].update(kind="human"), [("/steps/0/kind", "invalid_value")]),
    (lambda b: b["steps"][1].update(step_id="collect"), [("/steps/1/step_id", "invalid_value")]),
    (lambda b: b["steps"][2].pop("function"), [("/steps/2/function", "missing_field")]),
    (lambda b: b["steps"][1].update(model="gpt"), [("/steps/1/model", "unknown_field")]),
    (lambda b: b["steps"][1].update(temperature=True), [("/steps/1/temperature", "invalid_value")]),
    (lambda b: b["steps"][3].update(artifact_from="publish/x.md"), [("/steps/3/artifact_from", "invalid_value")]),
    (lambda b: b["steps"][3].update(artifact_from="render"), [("/steps/3/artifact_from", "invalid_value")]),
    (lambda b: b["steps"][3].update(deadline_seconds=0), [("/steps/3/deadline_seconds", "invalid_value")]),
    (lambda b: b.pop("redraft_step"), [("/redraft_step", "missing_field")]),
    (lambda b: b.update(redraft_step="publish"), [("/redraft_step", "invalid_value")]),
    # An llm prompt and a recall query name only what the step will have: refused at PUT, not when a task runs.
    (lambda b: b["steps"][1].pop("recall"), [("/steps/1/prompt", "invalid_value")]),
    (lambda b: b["steps"][1].update(prompt="{{artifacts.render/digest.md}}"), [("/steps/1/prompt", "invalid_value")]),
    (lambda b: b["steps"][1].update(prompt="{{artifacts.collect}}"), [("/steps/1/prompt", "invalid_value")]),
    (lambda b: b["steps"][1].update(prompt="{{secrets.key}}"), [("/steps/1/prompt", "invalid_value")]),
    (lambda b: b["steps"][1].update(recall={"query": "runbook", "intent": "RESUME_TASK"}),
     [("/steps/1/recall", "invalid_value")]),
    (lambda b: b["steps"][1].update(recall={"query": "runbook for {{artifacts.collect/x}}"}),
     [("/steps/1/recall/query", "invalid_value")]),
])
def test_each_problem_is_named_by_its_path_and_code(change: Any, expected: list[tuple[str, str]]) -> None:
    body = copy.deepcopy(DIGEST)
    change(body)
    assert problems("incident-digest", body) == expected


def test_every_problem_is_listed_at_once() -> None:
    body = copy.deepcopy(DIGEST)
    body["steps"][0]["kind"] = "robot"
    body["steps"][4].pop("destination")
    body["colour"] = "blue"
    assert problems("Incident Digest", body) == [
        ("/task_type", "invalid_value"), ("/colour", "unknown_field"), ("/steps/0/kind", "invalid_value"),
        ("/steps/4/destination", "missing_field")]
    assert problems("digest", ["not", "an", "object"]) == [("/", "invalid_type")]


@pytest.mark.parametrize(("steps", "path"), [
    ([{"step_id": "collect", "kind": "agent"}], "/steps/0"),  # never published: the task could never succeed
    ([{"step_id": "collect", "kind": "agent"}, {"step_id": "send", "kind": "publish", "destination": "archive"}],
     "/steps/1"),  # nothing approved to publish
    ([{"step_id": "collect", "kind": "agent"}, {"step_id": "review", "kind": "approval", "artifact_from":
      "collect/x.md"}, {"step_id": "send", "kind": "publish", "destination": "archive"},
      {"step_id": "after", "kind": "agent"}], "/steps/2"),  # a step after the publish would never run
])
def test_a_definition_no_task_of_which_can_succeed_is_refused_where_it_is_declared(
    steps: list[dict[str, Any]], path: str
) -> None:
    body = {"version": "1", "goal_schema": {"type": "object"}, "steps": steps, "redraft_step": "collect"}
    if not any(step["kind"] == "approval" for step in steps):
        body.pop("redraft_step")
    parsed = from_body("doomed", body)  # a pinned body read back in a workflow still parses
    with pytest.raises(InvalidDefinition) as refused:
        runnable(parsed)
    assert refused.value.details["problems"][0]["path"] == path
