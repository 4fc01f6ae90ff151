"""Every workflow runs under its tenant's fairness key, so one tenant's flood cannot queue everyone behind it.

Issue 23, finding 7: 300 deletion requests of one tenant (each a workflow) took another tenant's session
commit from 0.8 s to 44.8 s: the task queue was FIFO, and the commit's tasks waited behind every purge.
Temporal's task-queue fairness (server 1.29+, ``matching.enableFairness``, which the dev stack and the
docker-compose stack turn on) keeps a virtual queue per fairness key and dispatches the keys in turn. A
workflow's activities and child workflows inherit its priority, so setting it on every start is enough.
"""

from __future__ import annotations

from temporalio.common import Priority


def tenant_priority(tenant_id: str) -> Priority:
    """The priority of a tenant's workflow: its tenant id as the fairness key (tenant ids are at most 63 ASCII
    characters, within Temporal's 64 bytes), default priority and weight."""
    return Priority(fairness_key=tenant_id)
