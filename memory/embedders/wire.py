"""How the embedding engine's child (:mod:`memory.embedders.child`) and its parent
(:class:`memory.embedders.engine.Embedder`) talk over a pipe. Its own module, so that the parent never imports
the child's module (``python -m`` of a module its package already imported runs it twice).

The protocol (native byte order, both ends are the same machine):

- the child starts (yielding the CPU when given ``--background``), loads the model and writes ``b"R"`` +
  the dimension (``uint32``);
- a request is ``kind`` (``b"q"`` query, ``b"p"`` passage) + ``threads`` (``uint32``) + ``count``
  (``uint32``), then per text its UTF-8 length (``uint32``) and bytes;
- the answer is ``b"O"`` + ``count × dim`` ``float32``, or ``b"E"`` + length (``uint32``) + a message.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

BACKGROUND_FLAG = "--background"
"""The child's argument that makes it yield the CPU to the serving processes (the worker's backlog engines)."""
IDLE_FLAG = "--idle"
"""With :data:`BACKGROUND_FLAG`: in the kernel's idle class too, not the niceness alone (``MNEMO_CPU_POOL_IDLE``)."""
BACKGROUND_NICENESS = 10
"""The niceness of a background child, beside the kernel's idle class (:mod:`memory.priority`): as the CPU pool's."""

READY, OK, ERROR = b"R", b"O", b"E"
QUERY, PASSAGE = b"q", b"p"
U32 = struct.Struct("=I")
HEADER = struct.Struct("=cII")


def read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    """``size`` bytes, or None at end of stream (a partial read is the other end going away too)."""
    data = stream.read(size)
    return data if data is not None and len(data) == size else None
