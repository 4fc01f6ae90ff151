"""``search(query, resource?, top_k?)``: candidates from every permitted type, re-read, ranked as one list.

Each type's source matches the query against the fields the caller may read only; each candidate is
then re-read from its source row (a todo completed since is reported — and ranked — as completed; a
deleted or forgotten one is gone), ranked by :mod:`memory.resources.ranking`, one per ref, cut to
``top_k`` and to what fits 65,536 bytes. The snippet is a window of the first readable search field
holding a query word, taken from the current row, never from the projection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from memory.errors import InvalidInput
from memory.resources import pointers
from memory.resources.access import Access, Grant
from memory.resources.catalog import Catalog
from memory.resources.declarations import Declaration, Operation
from memory.resources.derived import Shown, shown
from memory.resources.listing import title_of
from memory.resources.pages import fits
from memory.resources.ranking import Ranked, rank
from memory.resources.registry import Sources
from memory.resources.results import SearchHit, SearchResult
from memory.resources.sources import Candidate, Query
from memory.text import lexemes, normalize, search_terms, tokens

DEFAULT_TOP_K = 10
MAX_TOP_K = 50
MAX_QUERY_CHARS = 1_000
MAX_QUERY_TERMS = 32
"""A query is matched by its first this many distinct terms (a word, or a CJK bigram), the rest ignored: a
1,000-character CJK query is ~850 bigrams, whose OR over every readable field ran into the 15 s statement
timeout (a 503) instead of answering (issue 23, finding 7). Recall caps its lexical query likewise."""
OFFLOAD_FROM_TERMS = 16
"""A search by this many terms or more runs in the CPU pool (:mod:`memory.offload`): two long queries of one tenant
in flight kept the API's interpreter busy (~40 ms of CPU each), slowing every other tenant's request (issue 23,
finding 7). A shorter one runs in place: it would wait behind the long ones in the pool."""
CANDIDATES_PER_HIT = 4
"""Each type offers this many candidates per requested hit: enough for state and recency to reorder them."""
SNIPPET_BEFORE = 60
SNIPPET_CHARS = 200


def parse_query(text: str) -> Query:
    if not text.strip() or len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"a query is 1-{MAX_QUERY_CHARS} characters with at least one word", code="invalid_query")
    terms = tuple(search_terms(text))[:MAX_QUERY_TERMS]
    if not terms:
        raise InvalidInput("the query has no word to search for", code="invalid_query")
    return Query(text=normalize(text), terms=terms)


def search(session: Session, access: Access, catalog: Catalog, sources: Sources, text: str, resource: str | None,
           top_k: int, now: datetime) -> SearchResult:
    query = parse_query(text)
    grants = [access.grant(resource, Operation.SEARCH)] if resource is not None else access.may(Operation.SEARCH)
    pairs: list[tuple[Candidate, Shown]] = []
    for grant in grants:
        source = sources.get(grant.resource)
        candidates = source.match(session, access, grant, query, top_k * CANDIDATES_PER_HIT)
        rows = source.fetch(session, access, grant, [candidate.record_id for candidate in candidates])
        pairs += [(candidate, shown(rows[candidate.record_id], grant)) for candidate in candidates
                  if candidate.record_id in rows]
    ranked = rank(pairs, now)[:top_k]
    by_type = {grant.resource: grant for grant in grants}
    pattern = snippet_pattern(text, query.terms)
    hits = [_hit(session, access, catalog.get(r.row.resource), sources, by_type[r.row.resource], r, pattern)
            for r in ranked]
    for count in range(len(hits), -1, -1):
        result = SearchResult(items=hits[:count], omitted=len(hits) - count)
        if fits(result):
            return result
    raise AssertionError("an empty search result fits a page")


def _hit(session: Session, access: Access, declaration: Declaration, sources: Sources, grant: Grant,
         ranked: Ranked, pattern: re.Pattern[str] | None) -> SearchHit:
    row = ranked.row
    matched = ranked.candidate.fields
    fields = [*matched, *(path for path in declaration.search_fields if grant.reads(path) and path not in matched)]
    window = snippet(row.data, fields, pattern)
    if not window and any(path in row.long_fields for path in fields):  # the words are in a long body: read it
        whole = sources.get(row.resource).fetch(session, access, grant, [row.record_id], whole=True)
        if row.record_id in whole:
            row = shown(whole[row.record_id], grant)
        window = snippet(row.data, fields, pattern)
    return SearchHit(ref=row.ref, resource=row.resource, title=title_of(declaration, row.data),
                     snippet=window or title_of(declaration, row.data)[:SNIPPET_CHARS],
                     state=row.state.value, version=row.version, updated_at=row.updated_at, score=ranked.score)


def snippet_pattern(text: str, terms: Sequence[str]) -> re.Pattern[str] | None:
    """The query's words its terms came from (the first :data:`MAX_QUERY_TERMS`, what candidates matched), longest
    first, as one pattern made once per search. Made per hit from every word of the query, it was a pattern of
    ~900 alternatives for a 1,000-character CJK query, compiled ten times: a fifth of the search's CPU in the API
    (issue 23, finding 7)."""
    wanted = set(terms)
    words = sorted({word for word, lexeme in zip(tokens(text), lexemes(text), strict=True) if lexeme in wanted},
                   key=len, reverse=True)
    return re.compile("|".join(re.escape(word) for word in words), re.IGNORECASE) if words else None


def snippet(data: dict[str, Any], fields: list[str], pattern: re.Pattern[str] | None) -> str:
    """A window around the first query word (``pattern``) in the first of ``fields`` (readable data) holding one."""
    for path in fields:
        for _, value in pointers.values_at(data, path):
            if not isinstance(value, str) or pattern is None:
                continue
            found = pattern.search(value)
            if found is None:
                continue
            start = max(0, found.start() - SNIPPET_BEFORE)
            window = value[start:start + SNIPPET_CHARS]
            return ("…" if start > 0 else "") + window + ("…" if start + SNIPPET_CHARS < len(value) else "")
    return ""
