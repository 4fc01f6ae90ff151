"""The peers of ``bench.peers``, called in-process as their docs show: Mem0 OSS and LangGraph's PostgresStore.

Imported only once ``bench.peers`` found the peer packages (``pip install -e '.[peers]'`` in a separate venv):
they are not mnemo's dependencies. Both peers get their vectors from :class:`LookupEmbeddings`, a LangChain
``Embeddings`` (the interface both take for a model of one's own): the vectors mnemo's worker stored for each
memory and the bundled engine's query vectors, so every system ranks the same vectors. With ``live`` set, a
query is embedded for real by the same engine instead (the "with the query embedding" timings).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from memory.embedders.engine import Embedder

UNUSED_KEY = "unused: infer=False calls no LLM and the embedder is LookupEmbeddings"
"""Mem0 builds its default OpenAI clients when it starts; with these settings neither is ever called."""


class LookupEmbeddings(Embeddings):  # type: ignore[misc]
    """Vectors given in advance, looked up by text: documents while ingesting, queries while searching."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.documents: dict[str, list[float]] = {}
        self.queries: dict[str, list[float]] = {}
        self.searching = False
        self.live: Embedder | None = None

    def _one(self, text: str) -> list[float]:
        """Looked up by the text without surrounding whitespace: Mem0 strips a query before embedding it."""
        if not self.searching:
            return self.documents[text.strip()]
        if self.live is not None:
            return self.live.embed_query(text)
        return self.queries[text.strip()]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


class Mem0Peer:
    """Mem0 OSS (``mem0ai``) with its default local vector store, Qdrant on disk in a temporary directory."""

    name = "Mem0"

    def __init__(self, embeddings: LookupEmbeddings) -> None:
        self.home = tempfile.mkdtemp(prefix="mnemo-peers-mem0-")
        os.environ["MEM0_TELEMETRY"] = "False"  # Mem0's documented switch: no telemetry is sent (nor attempted)
        os.environ["MEM0_DIR"] = self.home  # its own files (else ~/.mem0), read when mem0 is imported
        from mem0 import Memory

        self.memory = Memory.from_config({
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": "locomo", "embedding_model_dims": embeddings.dimensions,
                "path": os.path.join(self.home, "qdrant"), "on_disk": True}},
            "embedder": {"provider": "langchain", "config": {"model": embeddings}},
            "llm": {"provider": "openai", "config": {"api_key": UNUSED_KEY}},
            "history_db_path": os.path.join(self.home, "history.db"),
        })

    def add(self, scope: str, ref: str, text: str) -> None:
        self.memory.add([{"role": "user", "content": text}], user_id=scope, metadata={"ref": ref}, infer=False)

    def search(self, scope: str, query: str, limit: int) -> list[str]:
        found: dict[str, Any] = self.memory.search(query, top_k=limit, filters={"user_id": scope})
        return [str(hit["metadata"]["ref"]) for hit in found["results"]]

    def close(self) -> None:
        import shutil

        self.memory.vector_store.client.close()
        shutil.rmtree(self.home, ignore_errors=True)


class LangGraphPeer:
    """LangGraph's ``PostgresStore`` with its pgvector index (HNSW, cosine: the defaults), in a database of its
    own on the same embedded PostgreSQL as mnemo."""

    name = "LangGraph PostgresStore"

    def __init__(self, conninfo: str, embeddings: LookupEmbeddings) -> None:
        from langgraph.store.postgres import PostgresStore

        self._context = PostgresStore.from_conn_string(
            conninfo, index={"dims": embeddings.dimensions, "embed": embeddings, "fields": ["text"]})
        self.store = self._context.__enter__()
        self.store.setup()

    def add(self, scope: str, ref: str, text: str) -> None:
        self.store.put(("locomo", scope), ref, {"text": text})

    def search(self, scope: str, query: str, limit: int) -> list[str]:
        return [str(item.key) for item in self.store.search(("locomo", scope), query=query, limit=limit)]

    def close(self) -> None:
        self._context.__exit__(None, None, None)


def peers(conninfo: str, embeddings: LookupEmbeddings) -> Sequence[Mem0Peer | LangGraphPeer]:
    return [Mem0Peer(embeddings), LangGraphPeer(conninfo, embeddings)]
