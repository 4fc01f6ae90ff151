"""``llm`` steps (issue 26, item 1) against the labelled LLM stand-in (tests/sessions/llm_standin.py: a real
OpenAI-compatible HTTP server with scripted replies): the prompt rendered from the goal, earlier artifacts and the
bundle; what was asked recorded by hash, model and token counts, never the prompt; an answer checked against the
step's output_schema; an endpoint that cannot answer now is an outage, one that refuses fails the task."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from memory.llm import LlmConfig, LlmUnavailable
from memory.tasks.contract import StepFailed
from memory.tasks.llm_steps import LlmAnswerInvalid, placeholders, render_prompt, run_llm_step
from memory.tasks.steps import LLM_OUTAGE, OUTAGES, failure_code, outage_code
from tests.sessions.llm_standin import Reply, completion, running_standin

GOAL = {"service": "checkout", "window": {"since": "2026-11-01", "until": "2026-11-30"}}
ARTIFACTS = {"collect/incidents.json": '[{"id": "INC-7", "title": "checkout 502s"}]'}
SPEC: dict[str, Any] = {
    "prompt": "Service {{goal.service}} from {{goal.window.since}}.\nIncidents: {{artifacts.collect/incidents.json}}\n"
              "Runbook notes: {{bundle}}",
    "output_schema": {"type": "object", "required": ["summary", "actions"], "additionalProperties": False,
                      "properties": {"summary": {"type": "string"},
                                     "actions": {"type": "array", "items": {"type": "string"}}}},
    "recall": {"query": "checkout runbook"},
}
BUNDLE: dict[str, Any] = {
    "trace_id": "trace-1",
    "text": "<memory_bundle><memories><memory>restart the payment proxy first</memory></memories></memory_bundle>",
    "memories": [{"content": "restart the payment proxy first"}]}


def config(base_url: str) -> LlmConfig:
    return LlmConfig(base_url, "standin-model", "secret-key", timeout_seconds=2.0)


def test_the_prompt_is_rendered_sent_and_recorded_by_hash() -> None:
    answer = {"summary": "one outage", "actions": ["add a 502 alert"]}
    with running_standin() as standin:
        standin.script(completion(json.dumps(answer), prompt_tokens=321, completion_tokens=17))
        outcome = run_llm_step(SPEC, config(standin.base_url), goal=GOAL, artifacts=ARTIFACTS, bundle=BUNDLE)
    [sent] = standin.received
    prompt = sent.body["messages"][0]["content"]
    assert prompt == ('Service checkout from 2026-11-01.\nIncidents: [{"id": "INC-7", "title": "checkout 502s"}]\n'
                      "Runbook notes: " + BUNDLE["text"])  # the bundle as a prompt quotes it
    assert sent.body["model"] == "standin-model" and sent.body["temperature"] == 0.0
    assert sent.body["response_format"]["json_schema"]["schema"] == SPEC["output_schema"]
    assert sent.headers["authorization"] == "Bearer secret-key"
    names = {a.name: a for a in outcome.artifacts}
    assert json.loads(names["answer.json"].content) == answer
    call = json.loads(names["llm-call.json"].content)
    assert call["prompt_sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert (call["model"], call["prompt_tokens"], call["completion_tokens"]) == ("standin", 321, 17)
    assert call["answer_sha256"] == hashlib.sha256(names["answer.json"].content).hexdigest()
    assert call["recall_trace_id"] == "trace-1"  # which audited recall the prompt quoted
    assert "checkout" not in names["llm-call.json"].content.decode()  # the prompt is recorded by hash only
    assert outcome.output == {k: call[k] for k in ("prompt_sha256", "model", "prompt_tokens", "completion_tokens",
                                                   "answer_sha256")}


def test_without_a_schema_the_answer_is_text() -> None:
    with running_standin() as standin:
        standin.script(completion("# Digest\n\nAll quiet."))
        outcome = run_llm_step({"prompt": "Write about {{goal}}"}, config(standin.base_url), goal=GOAL,
                               artifacts={}, bundle=None)
    assert "response_format" not in standin.received[0].body
    [answer] = [a for a in outcome.artifacts if a.name == "answer.txt"]
    assert answer.content == b"# Digest\n\nAll quiet." and answer.media_type.startswith("text/plain")


@pytest.mark.parametrize("reply", [
    completion("not json"),
    completion(json.dumps({"summary": "x"})),  # a required field missing
    completion(json.dumps({"summary": "x", "actions": [], "extra": 1})),
    completion(""),
    Reply(body='{"no": "choices"}'),
])
def test_an_answer_that_is_not_what_the_step_asked_for_is_one_of_its_own_failures(reply: Reply) -> None:
    with running_standin() as standin:
        standin.script(reply)
        with pytest.raises(LlmAnswerInvalid) as refused:
            run_llm_step(SPEC, config(standin.base_url), goal=GOAL, artifacts=ARTIFACTS, bundle=BUNDLE)
    assert "INC-7" not in str(refused.value) and "checkout" not in str(refused.value)  # never the answer's text
    assert outage_code(refused.value) is None and failure_code(refused.value, outage=None) == "LlmAnswerInvalid"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_an_endpoint_that_cannot_answer_now_is_an_outage(status: int) -> None:
    with running_standin() as standin:
        standin.script(Reply(status, '{"error": {"message": "busy"}}'))
        with pytest.raises(LlmUnavailable) as busy:
            run_llm_step(SPEC, config(standin.base_url), goal=GOAL, artifacts=ARTIFACTS, bundle=BUNDLE)
    assert outage_code(busy.value) == LLM_OUTAGE and LLM_OUTAGE in OUTAGES


def test_a_slow_endpoint_is_an_outage_too() -> None:
    with running_standin() as standin:
        standin.script(Reply(body=completion("late").body, delay_seconds=3.0))
        with pytest.raises(LlmUnavailable, match="no answer within") as slow:
            run_llm_step({"prompt": "x"}, config(standin.base_url), goal=GOAL, artifacts={}, bundle=None)
    assert outage_code(slow.value) == LLM_OUTAGE


def test_an_endpoint_that_refuses_fails_the_task_saying_what_to_fix() -> None:
    with running_standin() as standin:
        standin.script(Reply(401, '{"error": {"message": "bad key"}}'))
        with pytest.raises(StepFailed) as refused:
            run_llm_step(SPEC, config(standin.base_url), goal=GOAL, artifacts=ARTIFACTS, bundle=BUNDLE)
    assert refused.value.code == "llm_refused" and "MNEMO_LLM_API_KEY" in refused.value.message
    with pytest.raises(StepFailed) as unconfigured:
        run_llm_step(SPEC, None, goal=GOAL, artifacts=ARTIFACTS, bundle=BUNDLE)
    assert unconfigured.value.code == "llm_endpoint_not_configured"


@pytest.mark.parametrize(("template", "bundle", "wanted"), [
    ("{{goal.region}}", None, "the goal has no 'region'"),
    ("{{goal.service.name}}", None, "the goal has no 'name'"),
    ("{{artifacts.draft/x.md}}", None, "no earlier step made an artifact 'draft/x.md'"),
    ("{{bundle}}", None, "needs the step's recall"),
    ("{{secrets}}", None, "is not a placeholder"),
])
def test_a_placeholder_that_names_nothing_is_refused_before_anything_is_sent(
    template: str, bundle: dict[str, Any] | None, wanted: str
) -> None:
    with pytest.raises(StepFailed, match=wanted) as refused:
        render_prompt(template, GOAL, ARTIFACTS, bundle)
    assert refused.value.code == "llm_prompt_invalid"


def test_placeholders_are_listed_in_order() -> None:
    assert placeholders(SPEC["prompt"]) == ["goal.service", "goal.window.since", "artifacts.collect/incidents.json",
                                            "bundle"]
    assert render_prompt("{{ goal.service }} {{goal}}", GOAL, {}, None).startswith("checkout {")


def test_the_reviewers_reason_is_quoted_where_the_prompt_says_or_appended() -> None:
    review = {"revision": 2, "reviewer_note": "shorter"}
    assert render_prompt("Fix: {{review.reason}}.", GOAL, {}, None, review) == "Fix: shorter."
    assert render_prompt("Fix: {{review.reason}}.", GOAL, {}, None, None) == "Fix: ."  # the first run: no reason
    appended = render_prompt("Write about {{goal.service}}", GOAL, {}, None, review)
    assert appended.startswith("Write about checkout\n\n") and "saying: shorter" in appended
