"""What a task schedule may say, and what one firing of it starts: the rules, without I/O.

A schedule names a task type, a goal, a 5-field cron and an IANA timezone. A goal's strings may hold placeholders
resolved at each firing from its nominal time in the schedule's timezone — ``{{fire.previous_month}}`` (YYYY-MM of
the month before) and ``{{fire.date}}`` (YYYY-MM-DD) — so "the monthly report on the 1st at 09:00" reports on the
month that just ended. A firing's ``request_intent_id`` is ``schedule:{name}:{nominal time, UTC ISO}``: a firing
delivered twice, or a backfill of the same time, names the same task (:func:`memory.tasks.keys.task_id_for`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory.errors import InvalidInput

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")

_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 6))
_NAMES = {
    3: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    4: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
}
_TERM = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/([0-9]+))?$")


def _previous_month(local: datetime) -> str:
    return (local.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")


PLACEHOLDERS: dict[str, Callable[[datetime], str]] = {
    "fire.previous_month": _previous_month,
    "fire.date": lambda local: local.strftime("%Y-%m-%d"),
}
"""What a goal may say of its firing, from the nominal fire time in the schedule's timezone."""


def check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidInput(
            "a schedule name is 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
            code="invalid_schedule_name", details={"name": name},
        )


def zone(timezone: str) -> ZoneInfo:
    """The IANA zone of ``timezone``, else a 422 ``invalid_timezone``."""
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(
            f"{timezone!r} is not an IANA timezone name; use one like 'Asia/Shanghai', 'Europe/Berlin' or 'UTC'",
            code="invalid_timezone", details={"field": "timezone"},
        ) from None


def _value(text: str, index: int) -> int:
    names = _NAMES.get(index, [])
    if text in names:
        return names.index(text) + (1 if index == 3 else 0)
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


def _check_term(term: str, index: int) -> None:
    label, low, high = _FIELDS[index]
    matched = _TERM.match(term.lower())
    if matched is None:
        raise ValueError(f"{term!r} in the {label} field")
    span, step = matched.groups()
    bounds = [] if span == "*" else [_value(part, index) for part in span.split("-")]
    if (any(not low <= bound <= high for bound in bounds) or bounds != sorted(bounds)
            or (step is not None and int(step) == 0)):
        raise ValueError(f"{term!r} in the {label} field (allowed {low}-{high})")


def check_cron(cron: str) -> None:
    """Five fields (minute hour day-of-month month day-of-week) of numbers, ranges, lists, steps and names, else a
    422 ``invalid_cron`` saying which part."""
    fields = cron.split()
    try:
        if len(fields) != len(_FIELDS):
            raise ValueError(f"{len(fields)} fields instead of 5")
        for index, field in enumerate(fields):
            for term in field.split(","):
                _check_term(term, index)
    except ValueError as exc:
        raise InvalidInput(
            f"the cron expression {cron!r} is refused: {exc}; write five fields, minute hour day-of-month month "
            "day-of-week, e.g. '0 9 1 * *' for the 1st of every month at 09:00",
            code="invalid_cron", details={"field": "cron"},
        ) from None


def _walk(value: Any, on_text: Callable[[str, str], str], path: str) -> Any:
    if isinstance(value, str):
        return on_text(value, path)
    if isinstance(value, dict):
        return {key: _walk(item, on_text, f"{path}/{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, on_text, f"{path}/{index}") for index, item in enumerate(value)]
    return value


def check_placeholders(goal: dict[str, Any]) -> None:
    """Only the placeholders of :data:`PLACEHOLDERS`; any other ``{{...}}`` is a 422 ``unknown_placeholder``."""

    def check(text: str, path: str) -> str:
        for found in PLACEHOLDER.findall(text):
            if found.strip() not in PLACEHOLDERS:
                raise InvalidInput(
                    f"the goal's {path} holds the unknown placeholder {{{{{found}}}}}; a schedule's goal may say "
                    + " or ".join(f"{{{{{name}}}}}" for name in PLACEHOLDERS),
                    code="unknown_placeholder", details={"path": path},
                )
        return text

    _walk(goal, check, "/goal")


def resolve_goal(goal: dict[str, Any], fire_time: datetime, timezone: str) -> dict[str, Any]:
    """The goal of the firing at ``fire_time``: every placeholder replaced by its value in the schedule's zone."""
    local = fire_time.astimezone(zone(timezone))
    resolved: dict[str, Any] = _walk(
        goal, lambda text, _: PLACEHOLDER.sub(lambda m: PLACEHOLDERS[m.group(1).strip()](local), text), "/goal"
    )
    return resolved


def fire_intent(name: str, fire_time: datetime) -> str:
    """The firing's ``request_intent_id``: one per schedule and nominal time, however often it is delivered."""
    return f"schedule:{name}:{fire_time.astimezone(UTC).isoformat()}"
