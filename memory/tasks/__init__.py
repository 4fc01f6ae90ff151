"""Durable report tasks: the read model, the status machine and idempotency keys.

The live state of a task is its Temporal workflow; these tables are its
read model, written only by activities and checked against ``state_version``.
Nothing here imports temporalio or fastapi.
"""
