"""``llm`` steps (issue 26, item 1): a prompt template over the goal, earlier artifacts and a memory bundle, sent to
the configured OpenAI-compatible endpoint; the answer checked against the step's ``output_schema`` when it has one.

What was asked and answered is recorded as artifacts: ``answer.json`` (a schema'd answer) or ``answer.txt``, and
``llm-call.json`` with the prompt's sha256, the model, the token counts and the answer's sha256 (never the prompt
itself: it may quote the goal and the bundle, which a deletion must be able to remove). An endpoint that cannot
answer now is an outage (:func:`memory.tasks.steps.outage_code`): waited out, never counted against the step; one
that refuses (credentials, model) fails the task with ``llm_refused``; an answer that is not what the step asked
for counts as one of the step's own failures and is asked again, up to the step's attempt limit.

Placeholders, each ``{{...}}`` with nothing else inside: ``{{goal}}`` (the goal as JSON), ``{{goal.a.b}}`` (one
value of it), ``{{artifacts.<step_id>/<name>}}`` (an earlier artifact's text) and ``{{bundle}}`` (the memory
bundle the step's ``recall`` asked for, as prompt text: recalled memories tagged and escaped as material, never
instructions). An unknown one is refused before anything is sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from jsonschema import Draft202012Validator

from memory.llm import Completion, LlmConfig, LlmUnavailable, chat
from memory.tasks.contract import ProducedArtifact, StepFailed, StepOutcome
from memory.tasks.definitions import PLACEHOLDER

MAX_PROMPT_CHARS = 200_000
"""A rendered prompt longer than this is refused (``llm_prompt_too_long``): it would not fit any model's context."""

Chat = Callable[..., Completion | None]


class LlmAnswerInvalid(Exception):
    """The model's answer is not what the step asked for: one of the step's own failures, asked again."""


def placeholders(template: str) -> list[str]:
    """The placeholders a template uses, in order."""
    return [match.group(1) for match in PLACEHOLDER.finditer(template)]


def render_prompt(template: str, goal: Mapping[str, Any], artifacts: Mapping[str, str],
                  bundle: Mapping[str, Any] | None, review: Mapping[str, Any] | None = None) -> str:
    """The template with every placeholder replaced, or :class:`StepFailed` ``llm_prompt_invalid`` naming the
    first one that names nothing (a missing goal field, an artifact no earlier step made, a bundle not asked for)."""

    def value(name: str) -> str:
        if name == "goal":
            return json.dumps(goal, ensure_ascii=False, sort_keys=True)
        if name == "review.reason":
            return str((review or {}).get("reviewer_note") or "")
        if name == "bundle":
            if bundle is None:
                raise StepFailed("llm_prompt_invalid", "{{bundle}} needs the step's recall (\"recall\": {\"query\"})")
            return str(bundle["text"])
        if name.startswith("goal."):
            found: Any = goal
            for part in name.removeprefix("goal.").split("."):
                if not isinstance(found, Mapping) or part not in found:
                    raise StepFailed("llm_prompt_invalid", f"{{{{{name}}}}}: the goal has no {part!r}")
                found = found[part]
            return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False, sort_keys=True)
        if name.startswith("artifacts."):
            key = name.removeprefix("artifacts.")
            if key not in artifacts:
                raise StepFailed("llm_prompt_invalid", f"{{{{{name}}}}}: no earlier step made an artifact {key!r} "
                                 "(name it as <step_id>/<artifact name>)")
            return artifacts[key]
        raise StepFailed("llm_prompt_invalid", f"{{{{{name}}}}} is not a placeholder: use goal, goal.<field>, "
                         "artifacts.<step_id>/<name>, bundle or review.reason")

    prompt = PLACEHOLDER.sub(lambda match: value(match.group(1)), template)
    note = (review or {}).get("reviewer_note")
    if note and "review.reason" not in placeholders(template):
        # Re-run after a rejection: the reviewer's reason always reaches the model, quoted or not.
        prompt += f"\n\nA reviewer rejected the previous answer, saying: {note}\nAnswer again, addressing it."
    if len(prompt) > MAX_PROMPT_CHARS:
        raise StepFailed("llm_prompt_too_long", f"the rendered prompt has {len(prompt):,} characters; at most "
                         f"{MAX_PROMPT_CHARS:,} are sent")
    return prompt


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def checked_answer(text: str | None, output_schema: Mapping[str, Any] | None) -> Any:
    """The answer as the step asked for it: JSON valid against ``output_schema`` when there is one, else the text;
    :class:`LlmAnswerInvalid` (without the answer's text, which may quote the prompt) otherwise."""
    if text is None or not text.strip():
        raise LlmAnswerInvalid("the model sent an empty answer")
    if output_schema is None:
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        raise LlmAnswerInvalid("the answer is not JSON, and the step has an output_schema") from None
    problems = sorted(Draft202012Validator(output_schema).iter_errors(parsed), key=lambda e: list(e.absolute_path))
    if problems:
        where = "".join(f"/{part}" for part in problems[0].absolute_path) or "/"
        raise LlmAnswerInvalid(f"the answer does not satisfy the output_schema at {where} ({problems[0].validator}; "
                               f"{len(problems)} problem(s))")
    return parsed


def run_llm_step(spec: Mapping[str, Any], config: LlmConfig | None, *, goal: Mapping[str, Any],
                 artifacts: Mapping[str, str], bundle: Mapping[str, Any] | None,
                 review: Mapping[str, Any] | None = None, send: Chat = chat) -> StepOutcome:
    """One attempt of an ``llm`` step (``spec``: the step's keys, as :mod:`memory.tasks.definitions` parsed them;
    ``review``: the engine's extras when it re-runs the step after a rejection, ``reviewer_note`` among them). The
    step's ``timeout_seconds`` bounds the call to the model, below the endpoint's own timeout."""
    if config is None:
        raise StepFailed("llm_endpoint_not_configured", "this worker has no LLM endpoint: set MNEMO_LLM_BASE_URL and "
                         "MNEMO_LLM_MODEL on every worker, as on the API that accepted the definition")
    if "timeout_seconds" in spec:
        config = replace(config, timeout_seconds=min(config.timeout_seconds, float(spec["timeout_seconds"])))
    prompt = render_prompt(str(spec["prompt"]), goal, artifacts, bundle, review)
    schema = spec.get("output_schema")
    response_format = None if schema is None else {
        "type": "json_schema", "json_schema": {"name": "mnemo_step_answer", "strict": False, "schema": schema}}
    try:
        completion = send(config, [{"role": "user", "content": prompt}],
                          temperature=float(spec.get("temperature", 0.0)), response_format=response_format,
                          max_tokens=spec.get("max_tokens"))
    except LlmUnavailable as exc:
        if exc.retryable:
            raise
        raise StepFailed("llm_refused", str(exc)) from exc
    if completion is None:
        raise LlmAnswerInvalid("the endpoint's reply is not a chat completion")
    answer = checked_answer(completion.text, schema)
    answered = (ProducedArtifact("answer.json", "llm-answer", "application/json",
                                 json.dumps(answer, ensure_ascii=False, sort_keys=True).encode())
                if schema is not None else
                ProducedArtifact("answer.txt", "llm-answer", "text/plain; charset=utf-8", str(answer).encode()))
    call = {"prompt_sha256": _sha256(prompt), "recall_trace_id": bundle["trace_id"] if bundle else None,
            "model": completion.model, "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens, "answer_sha256": hashlib.sha256(answered.content)
            .hexdigest(), "temperature": float(spec.get("temperature", 0.0)), "max_tokens": spec.get("max_tokens")}
    recorded = ProducedArtifact("llm-call.json", "llm-call", "application/json",
                                json.dumps(call, sort_keys=True).encode())
    return StepOutcome(output={key: call[key] for key in ("prompt_sha256", "model", "prompt_tokens",
                                                           "completion_tokens", "answer_sha256")},
                       artifacts=[answered, recorded])


__all__ = ["LlmAnswerInvalid", "checked_answer", "placeholders", "render_prompt", "run_llm_step"]
