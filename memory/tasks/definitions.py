"""Task definitions as data (issue 26): a task type's goal schema and steps, versioned, parsed strictly.

A definition is what ``PUT /task-definitions/{task_type}`` takes and what a team's SDK module declares:
``{"version", "goal_schema", "steps": [{"step_id", "kind", ...}], "redraft_step"?}``. This module is pure (no I/O):
the workflow reads a parsed :class:`Definition` from its input, so a running task keeps the version it started
with whatever is registered later. What depends on the deployment (an LLM endpoint configured, a compute function
loaded by some worker, a destination of the tenant) is checked by the callers that know it.

Step kinds:

- ``agent``: performed by an external agent through the API (claim, heartbeat, complete);
- ``llm``: a prompt template over the goal, earlier artifacts and a memory bundle, run against the configured
  OpenAI-compatible endpoint, its answer optionally checked against ``output_schema``;
- ``compute``: a Python function registered on the worker (``function``);
- ``approval``: the engine's approval wait, bound to the sha256 of the artifact named by ``artifact_from``
  (``"<step_id>/<artifact name>"`` of an earlier step);
- ``publish``: exactly once to the destination named by ``destination``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from memory.errors import InvalidInput
from memory.schema_problems import escape
from memory.tasks.keys import digest

TASK_TYPE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
STEP_ID = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
MAX_STEPS = 50
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
"""A template's ``{{...}}`` (an llm prompt, a recall's query): one definition, used by :mod:`memory.tasks.llm_steps`."""
RECALL_INTENTS = frozenset({"ANSWER", "CHITCHAT"})
"""What a step's recall may ask for (a resume names a task: a step reads its own through its inputs)."""
PRODUCERS = frozenset({"agent", "llm", "compute"})
"""The kinds whose steps produce artifacts (and may be re-run with a reviewer's reason)."""

_OPTIONAL: dict[str, frozenset[str]] = {
    "agent": frozenset({"description", "timeout_seconds"}),
    "llm": frozenset({"recall", "output_schema", "max_tokens", "temperature", "timeout_seconds"}),
    "compute": frozenset({"recall", "timeout_seconds"}),
    "approval": frozenset({"approval_type", "deadline_seconds", "reminder_every_seconds"}),
    "publish": frozenset({"artifact_from"}),
}
_REQUIRED: dict[str, frozenset[str]] = {
    "agent": frozenset(),
    "llm": frozenset({"prompt"}),
    "compute": frozenset({"function"}),
    "approval": frozenset({"artifact_from"}),
    "publish": frozenset({"destination"}),
}
STEP_KINDS = tuple(_REQUIRED)
CODE_KEYWORD = "x-mnemo-code"
"""A goal schema node's own error code (:mod:`memory.tasks.goals`), e.g. ``unsupported_currency`` on an enum."""
ERROR_CODE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_VALUES = frozenset({"items", "additionalProperties", "contains", "propertyNames", "not", "if", "then",
                            "else", "unevaluatedItems", "unevaluatedProperties"})


class InvalidDefinition(InvalidInput):
    code = "invalid_definition"


@dataclass(frozen=True)
class StepSpec:
    step_id: str
    kind: str
    spec: Mapping[str, Any]
    """The step's own keys as given (``step_id`` and ``kind`` apart)."""

    @property
    def artifact_from(self) -> tuple[str, str] | None:
        """(step id, artifact name) of an approval's or publish's artifact, when it names one."""
        value = self.spec.get("artifact_from")
        if not isinstance(value, str):
            return None
        step, _, name = value.partition("/")
        return step, name


@dataclass(frozen=True)
class Definition:
    task_type: str
    version: str
    goal_schema: Mapping[str, Any]
    steps: tuple[StepSpec, ...]
    redraft_step: str | None
    """The step re-run (with the reviewer's reason) when an approver rejects; required when there is an approval."""
    body: Mapping[str, Any]
    """The body as registered: what ``GET /task-definitions/{task_type}`` returns and what :attr:`sha256` hashes."""
    sha256: str

    def step(self, step_id: str) -> StepSpec:
        for step in self.steps:
            if step.step_id == step_id:
                return step
        raise KeyError(step_id)

    def index(self, step_id: str) -> int:
        return [step.step_id for step in self.steps].index(step_id)


class _Problems:
    """Every problem of a body, each with its JSON Pointer: a definition is refused whole, naming all of them."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, path: str, code: str, message: str) -> None:
        self.items.append({"path": path, "code": code, "message": f"{path}: {message}"})

    def raise_any(self, task_type: str) -> None:
        if self.items:
            raise InvalidDefinition(
                f"the definition of {task_type!r} is refused: {self.items[0]['message']}"
                + (f" (and {len(self.items) - 1} more problems)" if len(self.items) > 1 else ""),
                details={"problems": self.items[:50]},
            )


def from_body(task_type: str, body: object) -> Definition:
    """The definition a body describes, or :class:`InvalidDefinition` listing every problem (unknown keys,
    missing ones, wrong types, duplicate or dangling step ids, an invalid goal schema)."""
    problems = _Problems()
    if not TASK_TYPE.match(task_type):
        problems.add("/task_type", "invalid_value", "a task type is 1-63 lower-case letters, digits and '-', "
                     "starting with a letter, e.g. incident-digest")
    if not isinstance(body, dict):
        raise InvalidDefinition(f"the definition of {task_type!r} is refused: a definition is a JSON object",
                                details={"problems": [{"path": "/", "code": "invalid_type",
                                                       "message": "/: a definition is a JSON object"}]})
    for key in sorted(set(body) - {"version", "goal_schema", "steps", "redraft_step"}):
        problems.add(f"/{key}", "unknown_field", "not a field of a definition (version, goal_schema, steps, "
                     "redraft_step)")
    version = body.get("version")
    if not isinstance(version, str) or not VERSION.match(version):
        problems.add("/version", "missing_field" if version is None else "invalid_value",
                     "a version is 1-63 letters, digits, '.', '_' or '-', e.g. 2 or incident-digest-v2")
    goal_schema = body.get("goal_schema")
    _check_goal_schema(goal_schema, problems)
    steps = _steps(body.get("steps"), problems)
    redraft = body.get("redraft_step")
    if isinstance(body.get("steps"), list) and len(steps) == len(body["steps"]):
        # Cross-step references are checked once every step parsed: a refused step would shift the paths.
        _check_references(steps, redraft, problems)
    problems.raise_any(task_type)
    assert isinstance(version, str) and isinstance(goal_schema, dict)
    return Definition(task_type, version, goal_schema, tuple(steps), redraft if isinstance(redraft, str) else None,
                      body, digest(body).removeprefix("sha256:"))


def _check_goal_schema(schema: object, problems: _Problems) -> None:
    if not isinstance(schema, dict):
        problems.add("/goal_schema", "missing_field" if schema is None else "invalid_type",
                     'the goal\'s JSON Schema is an object, e.g. {"type": "object", "properties": {...}}')
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        where = "".join(f"/{part}" for part in error.absolute_path)
        problems.add(f"/goal_schema{where}", "invalid_goal_schema", f"not a valid JSON Schema: {error.message}")
        return
    if schema.get("type") != "object":
        problems.add("/goal_schema/type", "invalid_goal_schema", 'a goal is a JSON object: say "type": "object"')
    for path, code in _own_codes(schema, "/goal_schema"):
        if not isinstance(code, str) or not ERROR_CODE.match(code):
            problems.add(f"{path}/{CODE_KEYWORD}", "invalid_goal_schema",
                         "an error code is 1-63 lower-case letters, digits and '_', e.g. unsupported_currency")


def _own_codes(schema: object, path: str) -> list[tuple[str, object]]:
    """Every ``x-mnemo-code`` of a schema and its sub-schemas, with the JSON Pointer of the node that has it."""
    if not isinstance(schema, dict):
        return []
    found: list[tuple[str, object]] = [(path, schema[CODE_KEYWORD])] if CODE_KEYWORD in schema else []
    for key, value in schema.items():
        where = f"{path}/{escape(key)}"
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, child in value.items():
                found += _own_codes(child, f"{where}/{escape(name)}")
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for number, child in enumerate(value):
                found += _own_codes(child, f"{where}/{number}")
        elif key in _SCHEMA_VALUES:
            found += _own_codes(value, where)
    return found


def _steps(raw: object, problems: _Problems) -> list[StepSpec]:
    if not isinstance(raw, list) or not raw:
        problems.add("/steps", "missing_field" if raw is None else "invalid_type", "a definition has a list of steps")
        return []
    if len(raw) > MAX_STEPS:
        problems.add("/steps", "invalid_value", f"at most {MAX_STEPS} steps")
    steps: list[StepSpec] = []
    seen: set[str] = set()
    for number, item in enumerate(raw):
        path = f"/steps/{number}"
        if not isinstance(item, dict):
            problems.add(path, "invalid_type", "a step is a JSON object")
            continue
        step_id, kind = item.get("step_id"), item.get("kind")
        if not isinstance(step_id, str) or not STEP_ID.match(step_id):
            problems.add(f"{path}/step_id", "missing_field" if step_id is None else "invalid_value",
                         "a step id is 1-63 lower-case letters, digits and '_', starting with a letter")
            continue
        if step_id in seen:
            problems.add(f"{path}/step_id", "invalid_value", f"step id {step_id!r} is used twice")
        seen.add(step_id)
        if kind not in _REQUIRED:
            problems.add(f"{path}/kind", "missing_field" if kind is None else "invalid_value",
                         f"a step's kind is one of {', '.join(STEP_KINDS)}")
            continue
        spec = {key: value for key, value in item.items() if key not in ("step_id", "kind")}
        for key in sorted(set(spec) - _OPTIONAL[kind] - _REQUIRED[kind]):
            problems.add(f"{path}/{key}", "unknown_field", f"not a field of a {kind} step")
        for key in sorted(_REQUIRED[kind] - set(spec)):
            problems.add(f"{path}/{key}", "missing_field", f"a {kind} step needs {key}")
        _check_values(path, spec, problems)
        steps.append(StepSpec(step_id, kind, spec))
    return steps


def _check_values(path: str, spec: dict[str, Any], problems: _Problems) -> None:
    for key in ("prompt", "function", "destination", "artifact_from", "description", "approval_type"):
        if key in spec and (not isinstance(spec[key], str) or not spec[key].strip()):
            problems.add(f"{path}/{key}", "invalid_type", "a non-empty string")
    for key, low, high in (("timeout_seconds", 1, 7 * 86_400), ("deadline_seconds", 1, 366 * 86_400),
                           ("reminder_every_seconds", 1, 366 * 86_400), ("max_tokens", 1, 100_000)):
        value = spec.get(key)
        if key in spec and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
            problems.add(f"{path}/{key}", "invalid_value", f"a whole number from {low} to {high}")
    if "temperature" in spec and (not isinstance(spec["temperature"], int | float)
                                  or isinstance(spec["temperature"], bool) or not 0 <= spec["temperature"] <= 2):
        problems.add(f"{path}/temperature", "invalid_value", "a number from 0 to 2")
    if "output_schema" in spec:
        try:
            Draft202012Validator.check_schema(spec["output_schema"])
        except SchemaError as error:
            problems.add(f"{path}/output_schema", "invalid_value", f"not a valid JSON Schema: {error.message}")
    recall = spec.get("recall")
    if "recall" in spec and (not isinstance(recall, dict) or set(recall) - {"query", "intent"}
                             or not isinstance(recall.get("query"), str) or not recall["query"].strip()
                             or recall.get("intent", "ANSWER") not in RECALL_INTENTS):
        problems.add(f"{path}/recall", "invalid_value", 'a recall is {"query": "...", "intent"?: "ANSWER" or '
                     '"CHITCHAT"}')
    elif isinstance(recall, dict):
        quoted = [name for name in PLACEHOLDER.findall(recall["query"]) if name != "goal"
                  and not name.startswith("goal.")]
        if quoted:
            problems.add(f"{path}/recall/query", "invalid_value", f"{{{{{quoted[0]}}}}}: a recall's query may quote "
                         "only the goal ({{goal}}, {{goal.<field>}})")


def _check_references(steps: list[StepSpec], redraft: object, problems: _Problems) -> None:
    """``artifact_from`` names an earlier producing step; ``redraft_step`` a producing step before every approval."""
    position = {step.step_id: number for number, step in enumerate(steps)}
    for number, step in enumerate(steps):
        _check_prompt(number, step, steps[:number], problems)
        source = step.artifact_from
        if source is None:
            continue
        producer, name = source
        if not name or producer not in position or position[producer] >= number \
                or steps[position[producer]].kind not in PRODUCERS:
            problems.add(f"/steps/{number}/artifact_from", "invalid_value",
                         "names an artifact of an earlier agent, llm or compute step as <step_id>/<artifact name>")
    approvals = [number for number, step in enumerate(steps) if step.kind == "approval"]
    if redraft is None:
        if approvals:
            problems.add("/redraft_step", "missing_field", "a definition with an approval names the step re-run "
                         "with the reviewer's reason when an approver rejects")
        return
    if not isinstance(redraft, str) or redraft not in position:
        problems.add("/redraft_step", "invalid_value", "names one of the definition's steps")
    elif steps[position[redraft]].kind not in PRODUCERS or any(position[redraft] > a for a in approvals):
        problems.add("/redraft_step", "invalid_value", "names an agent, llm or compute step before every approval")


def _check_prompt(number: int, step: StepSpec, earlier: list[StepSpec], problems: _Problems) -> None:
    """An llm prompt's placeholders name something the step will have: a task is refused at PUT, not at run time."""
    if step.kind != "llm" or not isinstance(step.spec.get("prompt"), str):
        return
    # A step whose kind is itself refused still counts: one mistake, one problem.
    producers = {other.step_id for other in earlier if other.kind not in ("approval", "publish")}
    for name in PLACEHOLDER.findall(step.spec["prompt"]):
        if name == "goal" or name.startswith("goal.") or name == "review.reason":
            continue
        if name == "bundle":
            if "recall" not in step.spec:
                problems.add(f"/steps/{number}/prompt", "invalid_value", "{{bundle}} needs the step's recall "
                             '("recall": {"query": "..."})')
        elif not name.startswith("artifacts.") or name.removeprefix("artifacts.").partition("/")[0] not in producers \
                or not name.partition("/")[2]:
            problems.add(f"/steps/{number}/prompt", "invalid_value", f"{{{{{name}}}}} names nothing: use {{{{goal}}}}, "
                         "{{goal.<field>}}, {{artifacts.<earlier step_id>/<artifact name>}}, {{bundle}} or "
                         "{{review.reason}}")


def runnable(definition: Definition) -> Definition:
    """The definition, if a task of it can succeed; else :class:`InvalidDefinition`. A task succeeds once its result
    is published, and a publish sends an approved artifact: the last step, and only it, is a publish, with an
    approval before it. Checked where a definition is declared (``PUT``, an SDK module), not when a pinned body is
    read back in a workflow: a body pinned before the rule runs on and fails as it always did."""
    problems = _Problems()
    kinds = [step.kind for step in definition.steps]
    last = len(kinds) - 1
    for number, kind in enumerate(kinds):
        if kind == "publish" and number != last:
            problems.add(f"/steps/{number}", "invalid_value", "a publish ends the task (it succeeds once its result "
                         "is published): no step can come after it; make it the last step")
    if not kinds or kinds[last] != "publish":
        problems.add(f"/steps/{max(last, 0)}", "invalid_value", "a task succeeds once its result is published: the "
                     'last step is a publish ({"kind": "publish", "destination": "archive"})')
    elif "approval" not in kinds[:last]:
        problems.add(f"/steps/{last}", "invalid_value", "a publish sends an approved artifact: an approval step "
                     "comes before it")
    problems.raise_any(definition.task_type)
    return definition


def check_llm_endpoint(definition: Definition, *, configured: bool) -> None:
    """A definition with an ``llm`` step is refused where no LLM endpoint is configured: at registration, never as a
    task that fails later."""
    steps = [step.step_id for step in definition.steps if step.kind == "llm"]
    if steps and not configured:
        raise InvalidInput(
            f"step {steps[0]!r} of {definition.task_type!r} is an llm step, but this mnemo has no LLM endpoint: set "
            "MNEMO_LLM_BASE_URL and MNEMO_LLM_MODEL (and MNEMO_LLM_API_KEY if it wants one) on the API and its "
            "workers, or make the step an agent step",
            code="llm_endpoint_not_configured",
            details={"steps": steps},
        )


__all__ = ["CODE_KEYWORD", "PRODUCERS", "STEP_KINDS", "Definition", "InvalidDefinition", "StepSpec",
           "check_llm_endpoint", "from_body", "runnable"]
