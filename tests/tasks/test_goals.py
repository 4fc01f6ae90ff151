"""A task's goal against its definition's goal schema (issue 26, item 1): a 422 whose code is the first problem's,
every problem listed with its path under /goal, and a schema node's x-mnemo-code naming the code of its problems."""

from __future__ import annotations

from typing import Any

import pytest

from memory.errors import InvalidInput
from memory.reports.definitions import BUILTIN
from memory.schema_problems import MAX_PROBLEMS
from memory.tasks.definitions import from_body
from memory.tasks.goals import check_goal

MONTHLY = BUILTIN["monthly-report"]
DIGEST = from_body("incident-digest", {
    "version": "1",
    "goal_schema": {
        "type": "object",
        "properties": {
            "services": {"type": "array", "items": {"type": "string", "enum": ["api", "db"],
                                                    "x-mnemo-code": "unknown_service"}},
            "a/b": {"type": "integer", "minimum": 1},
            "window": {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"],
                       "additionalProperties": False},
        },
        "required": ["services"],
        "additionalProperties": False,
    },
    "steps": [{"step_id": "collect", "kind": "agent"}],
})


def refused(definition: Any, goal: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        check_goal(definition, goal)
    assert caught.value.http_status == 422
    return caught.value


def test_a_goal_the_schema_accepts_passes() -> None:
    check_goal(MONTHLY, {"month": "2026-06", "currency": "CNY"})
    check_goal(DIGEST, {"services": ["api"], "a/b": 2, "window": {"days": 7}})


@pytest.mark.parametrize(("goal", "code", "path"), [
    ({"month": "2026-13", "currency": "CNY"}, "invalid_value", "/goal/month"),
    ({"month": "2026-06", "currency": "JPY"}, "unsupported_currency", "/goal/currency"),
    ({"month": "2026-06", "currency": "CNY", "format": "md"}, "unknown_field", "/goal"),
    ({"month": "2026-06"}, "missing_field", "/goal"),
    ({"month": 202606, "currency": "CNY"}, "invalid_type", "/goal/month"),
    (["2026-06"], "invalid_type", "/goal"),
])
def test_the_monthly_reports_goal_keeps_its_codes(goal: object, code: str, path: str) -> None:
    error = refused(MONTHLY, goal)
    assert error.code == code
    assert [(p["path"], p["code"]) for p in error.details["problems"]] == [(path, code)]
    assert error.message.startswith(f"the goal of a monthly-report task is refused: {path}: ")


def test_every_problem_is_named_by_its_path_and_the_first_gives_the_code() -> None:
    error = refused(DIGEST, {"services": ["api", "mail"], "a/b": 0, "window": {"hours": 1}, "extra": True})
    assert [(p["path"], p["code"]) for p in error.details["problems"]] == [
        ("/goal", "unknown_field"),
        ("/goal/a~1b", "invalid_value"),          # the key's '/' escaped as a JSON Pointer says
        ("/goal/services/1", "unknown_service"),  # the enum's own code, at the item it refused
        ("/goal/window", "missing_field"),
        ("/goal/window", "unknown_field"),
    ]
    assert error.code == "unknown_field" and error.details["refused"] == 5
    assert all(p["message"].startswith(p["path"] + ": ") for p in error.details["problems"])
    assert "'mail' is not one of" in error.details["problems"][2]["message"]
    assert error.message.endswith("(and 4 more problems)")


def test_the_own_code_binds_its_node_only() -> None:
    """x-mnemo-code on the items' schema names their problems; the array's own problem keeps the shared code."""
    error = refused(DIGEST, {"services": "api"})
    assert [(p["path"], p["code"]) for p in error.details["problems"]] == [("/goal/services", "invalid_type")]


def test_at_most_twenty_problems_are_listed_and_all_are_counted() -> None:
    error = refused(DIGEST, {"services": ["x"] * 30})
    assert len(error.details["problems"]) == MAX_PROBLEMS and error.details["refused"] == 30
    assert {p["code"] for p in error.details["problems"]} == {"unknown_service"}
