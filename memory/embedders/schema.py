"""The vector column holds any model's dimension; each dimension is searched through its own HNSW index.

Migration 0019 dropped the column's fixed ``vector(384)``: a model of another dimension can be
configured without clearing anything. Its index is a partial expression index,
``hnsw ((embedding::vector(n)) vector_cosine_ops) WHERE vector_dims(embedding) = n``, built
``CONCURRENTLY`` (writes and recall go on meanwhile) by :func:`ensure_vector_index` when the schema is
brought up to date (``mnemo migrate``, ``mnemo dev``). The recall statements read the vectors through
:func:`typed` and :func:`of_dimensions`, which are exactly that expression and that predicate, so the
planner can walk the index.

During a change of model, the old model's vectors stay (recall ignores them: the model id differs)
until the backlog sweep has re-embedded each memory; recall meanwhile finds the rest lexically and
says so (``reembedding_in_progress``, :func:`other_model_vectors`).
"""

from __future__ import annotations

import logging
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, and_, cast, create_engine, exists, func, literal_column, select, text
from sqlalchemy.orm import Session

from memory.models import MemorySearch

log = logging.getLogger(__name__)

HNSW_MAX_DIMENSIONS = 2_000
"""pgvector's limit for an HNSW index of ``vector``."""


def vector_index_name(dimensions: int) -> str:
    return f"memory_search_embedding_{int(dimensions)}"


def index_statement(dimensions: int, concurrently: bool = True) -> str:
    n = int(dimensions)
    return (f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}{vector_index_name(n)} ON memory_search "
            f"USING hnsw ((embedding::vector({n})) vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
            f"WHERE vector_dims(embedding) = {n}")


def typed(column: Any, dimensions: int) -> ColumnElement[Any]:
    """``column`` as ``vector(n)``: the index's expression."""
    return cast(column, Vector(int(dimensions)))


def of_dimensions(column: Any, dimensions: int) -> ColumnElement[bool]:
    """The index's predicate, with ``n`` inline (a bound parameter could not prove it)."""
    return func.vector_dims(column) == literal_column(str(int(dimensions)))


def ensure_vector_index(url: str, dimensions: int) -> bool:
    """Build ``dimensions``' index if it is missing (or left invalid by an interrupted build); True if built now.

    Runs as the schema's owner (the application role may not create indexes), outside a transaction.
    """
    if not 1 <= dimensions <= HNSW_MAX_DIMENSIONS:
        raise ValueError(f"pgvector indexes vectors of at most {HNSW_MAX_DIMENSIONS} dimensions, "
                         f"not {dimensions}: configure a model (or its MNEMO_EMBEDDINGS_DIMENSIONS) within that")
    name = vector_index_name(dimensions)
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            valid = connection.execute(
                text("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                     "WHERE c.relname = :n"),
                {"n": name},
            ).scalar_one_or_none()
            if valid:
                return False
            if valid is False:
                log.warning("index %s was left invalid by an interrupted build; building it again", name)
                connection.execute(text(f"DROP INDEX CONCURRENTLY {name}"))
            log.info("building %s for %d-dimensional vectors (concurrently)", name, dimensions)
            connection.execute(text(index_statement(dimensions)))
            return True
    finally:
        engine.dispose()


def other_model_vectors(session: Session, tenant_id: str, model: str) -> bool:
    """Whether any memory of the tenant still carries a vector of another model (a re-embedding is under way).

    Two probes of the ``memory_search_embedding_model`` index (the ranges below and above ``model``).
    """
    stored = and_(MemorySearch.tenant_id == tenant_id, MemorySearch.embedding.is_not(None))
    below = exists().where(stored, MemorySearch.embedding_model < model)
    above = exists().where(stored, MemorySearch.embedding_model > model)
    return bool(session.execute(select(below | above)).scalar_one())
