"""The code task types and step functions this process knows: what SDK modules (:mod:`memory.tasks.sdk`) declared.

Filled by importing modules: mnemo's own (:data:`BUILTIN_MODULES`), those the ``mnemo.tasks`` entry-point group
names, and those of the setting ``MNEMO_TASK_MODULES`` (``--tasks``). The API loads them to know each type's
definition and goal schema; the worker to run their steps. A module declares at import time; importing it again
(a reload) replaces its declarations. Nothing here is stored: every process that runs or starts a type loads its
module, the same list everywhere.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from importlib.metadata import entry_points
from typing import Any, Protocol

from memory.errors import InvalidInput
from memory.tasks.contract import StepFailed, StepFn
from memory.tasks.definitions import Definition, InvalidDefinition, from_body, runnable

ENTRY_POINT_GROUP = "mnemo.tasks"
BUILTIN_MODULES = ("memory.reports.monthly",)
"""Loaded explicitly too, so mnemo's own types never depend on its entry points being installed."""


class CodeTaskType(Protocol):
    task_type: str

    def definition(self) -> dict[str, Any]: ...


_types: dict[str, CodeTaskType] = {}
_functions: dict[str, StepFn] = {}


def declare_type(task_type: CodeTaskType) -> None:
    _types[task_type.task_type] = task_type


def declare_function(name: str, function: StepFn) -> None:
    _functions[name] = function


@contextmanager
def kept() -> Iterator[None]:
    """Types and functions declared inside the block are forgotten when it ends (the registry is the process's:
    a test module's types would otherwise reserve their names, or break every listing, for the modules after it)."""
    types, functions = dict(_types), dict(_functions)
    try:
        yield
    finally:
        _types.clear()
        _types.update(types)
        _functions.clear()
        _functions.update(functions)


def parse_modules(value: str) -> tuple[str, ...]:
    """``a.b, c.d`` → ``("a.b", "c.d")``: the setting's and ``--tasks``' form."""
    return tuple(name.strip() for name in value.split(",") if name.strip())


def load(modules: Iterable[str] = ()) -> None:
    """Import the built-in modules, the entry points' and ``modules``; a module that cannot be imported, or declares
    a definition the API would refuse, stops the process here, naming it (a worker missing a type's steps would leave
    its tasks waiting; an API could not start any)."""
    for name in (*BUILTIN_MODULES, *modules):
        _import(name, partial(importlib.import_module, name), "MNEMO_TASK_MODULES (--tasks)")
    for point in entry_points(group=ENTRY_POINT_GROUP):
        _import(point.value, point.load, f"the {ENTRY_POINT_GROUP!r} entry point {point.name!r}")


def _import(name: str, load_it: Callable[[], object], where: str) -> None:
    before = dict(_types)
    try:
        load_it()
    except Exception as exc:
        raise InvalidInput(
            f"the task module {name!r} named by {where} cannot be imported ({type(exc).__name__}: {exc}); "
            "check the name and that its package is installed where mnemo runs",
            code="unknown_task_module",
        ) from exc
    for task_type in [key for key, declared in _types.items() if before.get(key) is not declared]:
        try:
            definition(task_type)
        except InvalidDefinition as refused:
            raise InvalidDefinition(f"the task module {name!r} named by {where} declares a definition mnemo "
                                    f"refuses: {refused.message}", details=refused.details) from None


def task_types() -> Mapping[str, CodeTaskType]:
    return dict(_types)


def definition(task_type: str) -> Definition | None:
    """The type's current definition as its module declares it (parsed strictly), or None if none does."""
    declared = _types.get(task_type)
    return None if declared is None else runnable(from_body(task_type, declared.definition()))


def has_function(name: str) -> bool:
    return name in _functions


def function(name: str) -> StepFn:
    try:
        return _functions[name]
    except KeyError:
        raise StepFailed("unknown_step", f"no step function {name!r} is loaded on this worker") from None


def hook(task_type: str, step_id: str) -> StepFn | None:
    """An approval's ``summary`` or a publish's ``files`` hook, when the type's module gave one."""
    return _functions.get(hook_name(task_type, step_id))


def hook_name(task_type: str, step_id: str) -> str:
    """Every function a type's module declares is named ``<task_type>.<step_id>``."""
    return f"{task_type}.{step_id}"
