"""A message someone said, as the memory content it becomes: natural language that names the speaker.

A client that remembers a conversation turn sends who said it, what they said and what they shared (an
image as its caption); mnemo writes the memory's content from them (``Caroline said, "…" and shared a
photo of a dog.``). Measured on LoCoMo with the bundled e5 model (docs/benchmarks.md, "The text a memory is
embedded from"), this wording finds the evidence far more often than ``Caroline: … [shares …]``: e5 reads
an attributed quotation as a statement about the speaker. When the message was said is not part of it: that
is the memory's ``observed_at`` (and its source's ``captured_at``), metadata the hard filters and the
bundle carry, not words to embed.
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


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def message_content(message: SaidMessage) -> str:
    """``<speaker> said, "<text>"``, then `` and shared <description>.`` for what was shared with it."""
    speaker = " ".join(message.speaker.split())
    text = message.text.strip()
    shared = [" ".join(item.split()).rstrip(".") for item in message.shared if item.strip()]
    if not speaker:
        raise InvalidInput("a message needs a speaker: who said it", code="message_speaker_required")
    if not text:
        if not shared:
            raise InvalidInput("a message needs text or something shared", code="message_empty")
        return f"{speaker} shared {_listed(shared)}."
    said = f'{speaker} said, "{text}"'
    return f"{said} and shared {_listed(shared)}." if shared else said
