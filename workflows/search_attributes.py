"""Search attributes mnemo registers, so SREs can filter workflows by them (no personal data)."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

TENANT = SearchAttributeKey.for_keyword("MnemoTenant")
TASK_TYPE = SearchAttributeKey.for_keyword("MnemoTaskType")
STATUS = SearchAttributeKey.for_keyword("MnemoStatus")
WAITING_REASON = SearchAttributeKey.for_keyword("MnemoWaitingReason")

ALL = (TENANT, TASK_TYPE, STATUS, WAITING_REASON)
"""Registered by ``mnemo dev`` with ``temporal server start-dev --search-attribute NAME=Keyword``."""
