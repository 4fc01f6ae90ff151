"""Durable report tasks: the read model, the status machine, and the rules around them.

The live state of a task is its Temporal workflow; these tables are its read model, written only by
activities and checked against ``state_version``. Nothing here imports temporalio or fastapi.

- ``ref``: :class:`~memory.tasks.ref.TaskRef`, a task's identity. ``keys``: idempotency keys.
- ``states``: the status machine and its guards. ``transitions``: the task row, guarded transitions,
  checkpoints.
- ``steps``: attempts, a step's idempotent result, and when its failures fail the task (outages don't count).
- ``artifacts``: artifact rows and the content-addressed store of their bytes.
- ``approvals``: requests bound to a draft's hash, decisions, expiry, the re-check before publishing.
- ``operations``: side effects recorded before they are sent, reconciliation, an operator's resolution.
- ``controls``: pause, resume, cancel (and that a cancel stops the next publish).
- ``live``: the workflow's live state and the requests people make of it (Temporal payloads).
- ``timeline``: listing tasks and a task's history in time order.
"""
