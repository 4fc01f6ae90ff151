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
import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_PIECE = re.compile(f"((?:(?=\\w)[{_CJK_CHARS}])+)|[^\\W{_CJK_CHARS}]+")
"""A run of CJK word characters (group 1) or of other word characters: one pass splits words and scripts.

The look-ahead keeps what is not a word character out of a CJK run (``・`` in ``東京・大阪``, combining
marks), exactly as splitting on ``\\w+`` first did."""


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
    for piece in _PIECE.finditer(normalize(text)):
        cjk = piece.group(1)
        if cjk is None:
            out.append(piece.group())
        else:
            out.extend(_cjk_grams(cjk))
    return out


def tsquery_any(query_tokens: list[str]) -> str:
    """A ``to_tsquery('simple', ...)`` text matching any of the tokens (each quoted as a lexeme)."""
    unique = dict.fromkeys(query_tokens)
    return " | ".join("'" + token.replace("'", "''") + "'" for token in unique)


STOPWORDS = frozenset(
    [
        "a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "about", "against", "between",
        "into", "through", "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out", "on",
        "off", "over", "under", "again", "further", "then", "once", "here", "there", "when", "where", "why", "how",
        "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not", "only", "own",
        "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don", "should", "now", "i", "me", "my",
        "myself", "we", "our", "ours", "you", "your", "yours", "he", "him", "his", "she", "her", "hers", "it", "its",
        "they", "them", "their", "what", "which", "who", "whom", "this", "that", "these", "those", "am", "is", "are",
        "was", "were", "be", "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "would",
        "could", "ever",
    ]
)
"""English function words carry no topic; dropping them from a query keeps full-text candidates about it."""

_english = threading.local()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Snowball English stem of an ASCII word ("painting", "paints" → "paint"); anything else unchanged.

    A question and the memory that answers it rarely use the same inflection; on LoCoMo stemming
    alone moved recall@5 from 58 to 61 %. The stemmer object keeps state while it works, so each
    thread has its own.
    """
    if not (word.isascii() and word.isalpha()):
        return word
    stemmer = getattr(_english, "stemmer", None)
    if stemmer is None:
        stemmer = _english.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


MAX_LEXEME_CHARS = 256
"""A lexeme is cut to this many characters (at most 1,024 UTF-8 bytes), in documents and queries alike.

A posting's B-tree key holds the lexeme beside its audience (a session id of up to 1,024 bytes):
one random "word" of 2,000 letters made that key overflow the page limit (2,704 bytes) and the
write fail. Cut the same way on both sides, a long word still matches itself."""


def _lexeme(token: str) -> str:
    return stem(token)[:MAX_LEXEME_CHARS]


def lexemes(text: str) -> list[str]:
    """What the full-text index holds and queries match: :func:`tokens`, English words stemmed, cut to
    :data:`MAX_LEXEME_CHARS`. Only an ASCII token can be stemmed, so any other is only cut, without a call: a
    window's relevance check runs this over every message it reads (4x faster on CJK text)."""
    return [_lexeme(token) if token.isascii() else token[:MAX_LEXEME_CHARS] for token in tokens(text)]


def search_terms(query: str) -> list[str]:
    """Unique query lexemes in order, without stop words (all of them when the query is only stop words)."""
    unique = list(dict.fromkeys(tokens(query)))
    informative = [term for term in unique if term not in STOPWORDS] or unique
    return list(dict.fromkeys(_lexeme(term) for term in informative))


STOP_LEXEMES = frozenset(stem(word) for word in STOPWORDS)
