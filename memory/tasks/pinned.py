"""Which definition a task runs, read back for people (the console's step list): the version it pinned at start.

A running task never reads this (its workflow input carries the body); this answers "what are this task's steps"
after the fact. The version may be gone from where it came from (a code module now declares a newer one): then
there is no answer, and callers show what the task's own records say.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from memory.tasks import definition_store, registry
from memory.tasks.builtin import MONTHLY_REPORT_V1
from memory.tasks.definitions import Definition


def pinned_definition(session: Session, tenant_id: str, task_type: str, version: str) -> Definition | None:
    """The code type's definition if it is still at ``version``, the frozen ``monthly-report-v1`` (what a task
    pinning no body runs), else the tenant's registered ``version``; None when none of them has it."""
    for known in (registry.definition(task_type), MONTHLY_REPORT_V1):
        if known is not None and (known.task_type, known.version) == (task_type, version):
            return known
    return definition_store.registered_version(session, tenant_id, task_type, version)
