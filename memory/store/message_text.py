"""A message someone said, as the memory content it becomes: natural language that names the speaker.

A client that remembers a conversation turn sends who said it, what they said and what they shared (an
image as its caption); mnemo writes the memory's content from them (``Caroline said, "…" and shared a
photo of a dog.``). Measured on LoCoMo with the bundled e5 model (docs/benchmarks.md, "The text a memory is
embedded from"), this wording finds the evidence far more often than ``Caroline: … [shares …]``: e5 reads
an attributed quotation as a statement about the speaker. A reply is quoted with the message it answers
(``…, replying to Melanie, who said, "Where did you go?"``): "Yes, at the park!" alone says nothing a
question could find, and on LoCoMo the quoted message was worth more than any wording (docs/benchmarks.md).
The memory then holds the other speaker's words as well, as any note of a conversation would: forgetting
that message means forgetting the replies that quote it too. When the message was said is not part of the
text: that is the memory's ``observed_at`` (and its source's ``captured_at``), metadata the hard filters and
the bundle carry, and the lexical index's day words (:mod:`memory.store.memory_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory.errors import InvalidInput


@dataclass(frozen=True)
class SaidMessage:
    speaker: str
    text: str
    shared: tuple[str, ...] = ()
    """What the speaker shared with the message, each as a description (an image's caption, a file's title)."""
    replying_to: SaidMessage | None = None
    """The message this one answers, quoted in the content (one level: its own ``replying_to`` is not)."""


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _speaker(message: SaidMessage) -> str:
    speaker = " ".join(message.speaker.split())
    if not speaker:
        raise InvalidInput("a message needs a speaker: who said it", code="message_speaker_required")
    return speaker


def _said(message: SaidMessage, who: str) -> str:
    """``<who> said, "<text>"`` then `` and shared <description>``, or ``<who> shared <description>``."""
    text = message.text.strip()
    shared = [" ".join(item.split()).rstrip(".") for item in message.shared if item.strip()]
    if not text:
        if not shared:
            raise InvalidInput("a message needs text or something shared", code="message_empty")
        return f"{who} shared {_listed(shared)}"
    said = f'{who} said, "{text}"'
    return f"{said} and shared {_listed(shared)}" if shared else said


def quote_start(message: SaidMessage) -> int | None:
    """Where in :func:`message_content` the quoted message begins (at ``, replying to``); None without one.

    Recall's lexical scores count the quoted words at a fraction of the reply's own
    (:data:`memory.recall.scoring.QUOTED_WEIGHT`): the quoted message has a memory of its own, which a
    question in its words should find first.
    """
    return len(_said(message, _speaker(message))) if message.replying_to is not None else None


def message_content(message: SaidMessage) -> str:
    """``<speaker> said, "<text>"`` (`` and shared <description>`` for what was shared with it), then
    ``, replying to <speaker>, who said, "<text>"`` for the message it answers; a full stop after a description."""
    content = _said(message, _speaker(message))
    if message.replying_to is not None:
        content += ", replying to " + _said(message.replying_to, f"{_speaker(message.replying_to)}, who")
    return content if content.endswith('"') else f"{content}."
