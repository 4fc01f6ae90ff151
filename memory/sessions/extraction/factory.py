"""One choice of extractor from settings: ``rules`` (the default, no network) or ``llm``."""

from __future__ import annotations

from memory.llm import LlmConfig
from memory.sessions.extraction.base import Extractor
from memory.sessions.extraction.llm import LlmExtractor
from memory.sessions.extraction.rules import RulesExtractor

KINDS = ("rules", "llm")


def make_extractor(kind: str, llm: LlmConfig | None) -> Extractor:
    """The extractor ``kind`` names; ``llm`` needs its endpoint configured."""
    if kind == "rules":
        return RulesExtractor()
    if kind == "llm":
        if llm is None:
            raise ValueError("the llm extractor needs MNEMO_LLM_BASE_URL and MNEMO_LLM_MODEL (and MNEMO_LLM_API_KEY "
                             "if the endpoint wants a key)")
        return LlmExtractor(llm)
    raise ValueError(f"unknown extractor {kind!r}: choose one of {', '.join(KINDS)}")
