"""Tokens for the lexical projection: Chinese without spaces must still be searchable."""

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.text import MAX_LEXEME_CHARS, lexemes, normalize, search_terms, stem, tokens, tsquery_any


def test_cjk_runs_become_overlapping_bigrams() -> None:
    assert tokens("我住在上海") == ["我住", "住在", "在上", "上海"]


def test_single_cjk_character_is_kept() -> None:
    assert tokens("猫") == ["猫"]


def test_mixed_scripts_split_at_script_boundaries() -> None:
    assert tokens("用Markdown写报告") == ["用", "markdown", "写报", "报告"]


def test_nfkc_and_casefold_unify_width_and_case() -> None:
    # The full-width letters are the input under test, not look-alikes typed by mistake.
    assert normalize("ＭＡＲＫＤＯＷＮ Straße") == "markdown strasse"  # noqa: RUF001
    assert tokens("ＲＥＰＯＲＴ") == tokens("report")  # noqa: RUF001


def test_punctuation_is_not_a_token() -> None:
    assert tokens("，。！？ -- ...") == []


def test_a_non_word_character_inside_the_cjk_ranges_still_separates_words() -> None:
    # The katakana middle dot (U+30FB) sits in the CJK block but is punctuation.
    assert tokens("東京・大阪") == ["東京", "大阪"]
    assert tokens("foo・bar") == ["foo", "bar"]


def test_tsquery_quotes_each_lexeme_once() -> None:
    assert tsquery_any(["上海", "it's", "上海"]) == "'上海' | 'it''s'"


def test_lexemes_stem_english_words_only() -> None:
    expected = ["paint", "paint", "用", "markdown", "写报", "报告", "2023"]
    assert lexemes("Paintings painted 用Markdown写报告 2023") == expected
    assert search_terms("What did she paint?") == ["paint"]
    assert search_terms("what is it") == ["what", "is", "it"]  # only stop words: keep them


WORDS = ["Painting", "猫咪", "x" * 300, "ÉTÉ", "3.14", "\uff46\uff55\uff4c\uff4c", "ß", "İstanbul"]
"""English to stem, CJK, an overlong word, accented and full-width letters (NFKC and casefold change them)."""


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400) | st.lists(st.sampled_from(WORDS), max_size=30).map(" ".join))
def test_lexemes_are_every_token_stemmed_and_cut_whatever_the_text(text: str) -> None:
    """The fast path (a token that cannot be stemmed is only cut) gives what stemming every token gave."""
    assert lexemes(text) == [stem(token)[:MAX_LEXEME_CHARS] for token in tokens(text)]
