"""Chinese-aware normalisation and tokens for the lexical search projection.

PostgreSQL's ``simple`` parser splits on spaces, and Chinese has none, so a
sentence would become one unsearchable word. We tokenise in Python instead:
NFKC, casefold, then words for alphabetic scripts and overlapping character
bigrams for CJK runs (a single CJK character stays a unigram). Documents and
queries go through the same function, so a bigram of the query meets the
same bigram of the document.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]+"
)


def normalize(text: str) -> str:
    """NFKC (full-width to half-width, compatibility forms) then casefold."""
    return unicodedata.normalize("NFKC", text).casefold()


def _cjk_grams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokens(text: str) -> list[str]:
    """Search tokens in order of appearance (duplicates kept; callers dedupe if they need to)."""
    out: list[str] = []
    for word in _WORD.findall(normalize(text)):
        position = 0
        for cjk in _CJK.finditer(word):
            if cjk.start() > position:
                out.append(word[position : cjk.start()])
            out.extend(_cjk_grams(cjk.group()))
            position = cjk.end()
        if position < len(word):
            out.append(word[position:])
    return out


def tsquery_any(query_tokens: list[str]) -> str:
    """A ``to_tsquery('simple', ...)`` text matching any of the tokens (each quoted as a lexeme)."""
    unique = dict.fromkeys(query_tokens)
    return " | ".join("'" + token.replace("'", "''") + "'" for token in unique)
