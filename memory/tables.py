"""Every table of mnemo, registered on one :class:`~memory.models.Base`: what Alembic compares the schema with and
what a test of the migrations checks, from one list, so that no table module can be left out of either."""

from __future__ import annotations

from memory.artifact_store import models as artifact_models
from memory.identity import console_sessions
from memory.knowledge import models as knowledge_models
from memory.models import Base
from memory.reports import sales
from memory.resources import models as resource_models
from memory.resources import run_models
from memory.sessions import models as session_models
from memory.skills import models as skill_models
from memory.tasks import models as task_models

TABLE_MODULES = (
    artifact_models, console_sessions, knowledge_models, sales, resource_models, run_models, session_models,
    skill_models, task_models,
)
"""The modules whose classes map tables (besides :mod:`memory.models`): importing them registers their tables."""

metadata = Base.metadata

__all__ = ["TABLE_MODULES", "metadata"]
