"""mnemo's domain core: the governed memory store.

Imports neither temporalio nor fastapi; callers hand it a SQLAlchemy session that
is already scoped to the caller's tenant (see :mod:`memory.db`).
"""
