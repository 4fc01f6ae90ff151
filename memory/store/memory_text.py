"""What a memory says to each retrieval channel: the words its lexical index holds, the text its vector is from.

Both start from :func:`memory_text` (key, the summaries the content does not already say, content). The
lexical side adds when the memory was observed, as words (:func:`observed_words`); the vector side leaves
the date out and cuts to what the model reads (:func:`embedding_text`). Measured on LoCoMo
(docs/benchmarks.md, "The text a memory is embedded from"): a date in the embedded text blurs what e5
finds, while as words in the lexical index it lets a question about a time find what was observed then,
and lets the feedback round (:mod:`memory.recall.scoring`) bring in what was said the same day. How a
message becomes memory content is :mod:`memory.store.message_text`. A reply's content quotes the message it
answers; :func:`lexical_parts` splits its lexical text there, so that recall's lexical scores can count the
quoted words less (:data:`memory.recall.scoring.QUOTED_WEIGHT`), while the index still holds every word.

A vector stands for a text; when the rule that makes the text changes, vectors made under the old rule are
stale. The rule's version is part of the model id stored with each vector (:func:`vector_model_id`), so the
embedding backlog (:func:`memory.store.vectors.pending_batch`) treats them as another model's and the sweep
re-embeds them, newest writes first. The lexical rule is re-applied to stored rows by a migration (0020).
"""

from __future__ import annotations

from datetime import UTC, datetime

from memory.models import Memory

TEXT_VERSION = "text2"
"""``text2``: summaries compared with the content whitespace-blind (a cut L0 of a text with line breaks was
embedded twice), the text cut at a word to :data:`MAX_CHARS`. Vectors of the first rule carry no version."""
MAX_CHARS = 2_000
"""e5-small reads at most 512 tokens; longer text only costs time."""


def vector_model_id(engine: str) -> str:
    """The ``embedding_model`` stored with a vector of ``engine`` computed from :func:`embedding_text`."""
    return f"{engine}/{TEXT_VERSION}"


def _words(text: str) -> str:
    return " ".join(text.split())


def _repeated(summary: str, content: str) -> bool:
    """Whether ``content`` already says ``summary`` (a cut L0 ends in "…" and has its whitespace collapsed).

    The plain substring test first: it is the common case, and recall scores every candidate with this.
    """
    head = summary.rstrip("…")
    return head in content or _words(head) in _words(content)


def _text(memory: Memory, content: str) -> str:
    parts = [memory.key or ""]
    parts += [s for s in (memory.abstract, memory.overview) if s and not _repeated(s, memory.content)]
    parts.append(content)
    return "\n".join(part for part in parts if part)


def memory_text(memory: Memory) -> str:
    """What a memory says, once: its key, its summaries unless the content already holds them, its content."""
    return _text(memory, memory.content)


def observed_words(observed_at: datetime) -> str:
    """The day a memory was observed, as the words a question would use: ``8 May 2023`` (UTC).

    A day, not an instant: messages of one conversation share it, while a time of day would be a word
    hardly anyone asks for, shared only by what was said in the same minute.
    """
    day = observed_at.astimezone(UTC)
    return f"{day.day} {day:%B} {day.year}"


def _with_day(memory: Memory, text: str) -> str:
    return f"{text}\n{observed_words(memory.observed_at)}" if memory.observed_at is not None else text


def lexical_text(memory: Memory) -> str:
    """What the full-text index and the lexical scores read: :func:`memory_text`, then the day it was observed."""
    return _with_day(memory, memory_text(memory))


def lexical_parts(memory: Memory) -> tuple[str, str]:
    """:func:`lexical_text` in two: the memory's own words, and the message its content quotes ("" if none).

    Recall's lexical scores weigh the quoted words less (:data:`memory.recall.scoring.QUOTED_WEIGHT`).
    """
    if memory.quote_start is None:
        return lexical_text(memory), ""
    own = _text(memory, memory.content[: memory.quote_start])
    return _with_day(memory, own), memory.content[memory.quote_start :]


def embedding_text(memory: Memory) -> str:
    """The text of a memory's vector: :func:`memory_text`, cut at a word boundary to :data:`MAX_CHARS`.

    The engine would cut it anyway; cutting here keeps a word whole rather than a fragment of it.
    """
    text = memory_text(memory)
    if len(text) <= MAX_CHARS:
        return text
    cut = text[:MAX_CHARS]
    boundary = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:boundary] if boundary > MAX_CHARS // 2 else cut
