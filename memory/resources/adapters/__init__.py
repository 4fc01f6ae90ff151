"""Sources of mnemo's own objects as resource types (issue 15 item 1): memories, sessions, their summaries,
tasks and published knowledge, each read under the rules its own API applies, with no copy of their rows in
``resource_records``.

:data:`ADAPTERS` maps a declaration's ``store`` to the source that reads it; the reader's registry takes
the sources of every other store than ``records`` from here.
"""

from __future__ import annotations

from collections.abc import Callable

from memory.resources.adapters.knowledge import KnowledgeSource
from memory.resources.adapters.memories import MemorySource
from memory.resources.adapters.sessions import SessionSource
from memory.resources.adapters.summaries import SummarySource
from memory.resources.adapters.tasks import TaskSource
from memory.resources.declarations import Declaration
from memory.resources.sources import Source

ADAPTERS: dict[str, Callable[[Declaration], Source]] = {
    "memories": MemorySource,
    "sessions": SessionSource,
    "session_summaries": SummarySource,
    "tasks": TaskSource,
    "knowledge_items": KnowledgeSource,
}
