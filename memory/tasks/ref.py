"""The identity of a task: which tenant's, which task."""

from __future__ import annotations

from dataclasses import dataclass

from memory.tasks.keys import workflow_id


@dataclass(frozen=True)
class TaskRef:
    """Every read-model function and every activity payload addresses a task by these two fields.

    The payloads that cross Temporal keep them as flat fields (their JSON shape is recorded in
    workflow histories) and hand out a :class:`TaskRef` through their ``ref`` property.
    """

    tenant_id: str
    task_id: str

    @property
    def workflow_id(self) -> str:
        return workflow_id(self.tenant_id, self.task_id)
