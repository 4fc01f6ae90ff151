"""Search attributes mnemo registers, so SREs can filter workflows by them (no personal data)."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

TENANT = SearchAttributeKey.for_keyword("MnemoTenant")
TASK_TYPE = SearchAttributeKey.for_keyword("MnemoTaskType")
STATUS = SearchAttributeKey.for_keyword("MnemoStatus")
WAITING_REASON = SearchAttributeKey.for_keyword("MnemoWaitingReason")

SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
"""Temporal's own, set on a workflow a Schedule started: its nominal fire time."""

ALL = (TENANT, TASK_TYPE, STATUS, WAITING_REASON)
"""Registered by ``mnemo dev`` with ``temporal server start-dev --search-attribute NAME=Keyword``."""


def new_task(tenant_id: str, task_type: str) -> TypedSearchAttributes:
    """What a task's workflow starts with, however it is started (``POST /tasks`` or a schedule's firing)."""
    return TypedSearchAttributes([
        SearchAttributePair(TENANT, tenant_id), SearchAttributePair(TASK_TYPE, task_type),
        SearchAttributePair(STATUS, "CREATED"),
    ])
