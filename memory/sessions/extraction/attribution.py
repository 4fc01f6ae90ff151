"""Whose words these are: only what the user says about themselves becomes theirs (issue 23, finding 6).

A user message often carries words that are not the user speaking about themselves: someone else's words
quoted or reported ("Bob told me: 'I live in Paris'", "我朋友说：我住在广州", "他让我转告…"), forwarded mail
(``>`` lines, "---------- Forwarded message", 转发), text handed over for a task (translate, proofread,
summarise, rewrite, "is this grammatical?", 翻译, 润色, 总结), hypotheticals ("suppose I live in…", 假如我),
examples (for example, 例如), role-play (pretend, 扮演), a transcript pasted inline (``User: …`` /
``Assistant: …`` lines), a line behind another speaker's label or a lead-in naming another source ("Alice: …",
"小王：…", "Tom's text: …", "Here's what Tom sent me: …", "他发来：…", 聊天记录; issue 23 item 4: a closed list of
labels the user writes for themselves, "Update:", "PS:", "补充一下：", "我：", keeps those lines the user's), a
creative task over text (write a story/poem/tweet where …, 写条微博), and an instruction not to remember
("don't remember that …", 别记住, 不要记).

:func:`regions` finds those stretches of one message, each with its :class:`Foreign` kind, from markers
alone (no model): every extractor's candidate is judged against them by one gate
(:func:`memory.sessions.extraction.gates.apply_gates`), and the ``llm`` extractor's prompt states the same rule.
A region runs from the start of the clause holding its marker: to the end of the message for what hands over
text (forwarded, handed over, role-play), to the end of the line for an example, to the end of the sentence
otherwise (to the end of the line, or of the message when the line ends there, once a colon follows the
marker: "Tom said: I live in Oslo."). A quote is someone else's words when it speaks in the first person or
asks to remember. A user talking about what they themselves said ("I told you, I live in Zurich", "我跟你说过")
keeps their words.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from memory.sessions.extraction.sentences import all_clauses, sentences

_I = re.IGNORECASE
_IM = re.IGNORECASE | re.MULTILINE


class Foreign(StrEnum):
    """What a stretch of a user's message is, when it is not the user speaking about themselves."""

    QUOTED = "quoted speech"
    REPORTED = "reported speech"
    FORWARDED = "forwarded text"
    HANDED_OVER = "text handed over for a task"
    HYPOTHETICAL = "a hypothetical"
    EXAMPLE = "an example"
    ROLE_PLAY = "role-play"
    TRANSCRIPT = "a transcript inside the message"
    LABELLED = "words behind another speaker's label"
    QUESTION = "a question about the user"
    FORGET = "an instruction not to remember"


@dataclass(frozen=True)
class Region:
    """``text[start:end]`` is :attr:`kind`; for :attr:`Foreign.FORGET`, what is not to be remembered starts at
    :attr:`body` (after the instruction itself)."""

    start: int
    end: int
    kind: Foreign
    body: int


class _Scope(StrEnum):
    SENTENCE = "sentence"
    LINE = "line"
    MESSAGE = "message"


_FIRST_PERSON = re.compile(r"我|\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b|记住|\bremember\b", _I)
_QUOTES = re.compile(
    r"“[^”]{0,2000}”|「[^」]{0,2000}」|『[^』]{0,2000}』|«[^»]{0,2000}»|"
    r"\"[^\"\n]{0,2000}\"|(?<![A-Za-z])'(?:[^'\n]|'(?=[A-Za-z])){0,300}'(?![A-Za-z])"
)
"""A quote: curly, corner, guillemet or straight (a single quote, curly ones folded to it by :func:`_folded`,
only between non-letters, so "I'm" and "don't" open nothing)."""

_EN_REPORT = re.compile(
    r"\b(?:said|says|saying|told me|tells me|tell me|wrote|writes|asked|asks|texted|emailed|messaged|"
    r"mentioned|claims|claimed|replied|replies|added|explained|thinks|believes|insists)\b",
    _I,
)
_EN_REPORT_ANY = re.compile(r"\baccording to\b|\bquote from\b|\bquoting\b|\bin (?:his|her|their) words\b", _I)
_ZH_REPORT = re.compile(
    r"(?:说|讲|写道|写着|问道|问我|提到|表示|声称)(?:过|道|着|了)?\s*(?:[:：，,\"“「『\u2018]|(?=\s*(?:[。！？!?.]|$)))"
)
"""A reporting verb before what it reports ("他说：…"), or closing its sentence ("…，他说。")."""
_ZH_REPORT_ANY = re.compile(
    r"告诉我|让我转告|转告|叫我告诉|让我告诉|托我|听说|据说|听\S{1,6}说|(?:跟|和|对)我(?:讲|说)"
)
_OWN_SUBJECT = re.compile(
    r"(?:^|(?<![\w'\u2019]))I(?:\s+(?:already|just|also|once|have|had|always|never|did|didn't|even|\w+ly))*$|"
    r"(?:^|(?<![\u3400-\u9fff]))我们?(?:之前|刚才|刚|也|早就|已经|曾经|上次|以前)?(?:(?:跟|和|对|给)(?:你|您))?(?:也|都)?$",
    _I,
)
"""A reporting verb right after the user as its subject ("I said…", "…, and I never asked", "我跟你说过，…")
leaves the words the user's."""
_IDIOM = re.compile(r"(?:老实|实话|坦白|来|比如|就是|句话|话|再|虽|听|小)$")
"""说 closing an idiom, not a report: 老实说, 说实话, 总的来说, 比如说, 也就是说, 换句话说, 小说."""

_FORWARDED = re.compile(
    r"-{3,}\s*(?:forwarded message|original message)|\bbegin forwarded message\b|^\s*(?:fwd?|fw)\s*:|"
    r"\bforward(?:ed|ing)\b|转发|原始邮件|原邮件",
    _IM,
)
_QUOTED_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
_CREATIVE = (
    r"(?:write|make|compose|draft|create|generate|come up with)(?:\s+(?:me|us))?\s+(?:(?:a|an|the|some|short|funny|"
    r"little|new|cute|\d+)\s+){0,3}(?:story|stories|poem|tweet|post|song|lyrics|essay|letter|caption|script|"
    r"dialogue|joke|bio|speech|scene|novel|limerick|haiku|rap|status|tiktok|ad)s?\b"
)
"""A creative task: what it is about is text the user hands over, not a fact about them (issue 23, item 4)."""
_TASK_VERB = (
    rf"{_CREATIVE}|translate|proof-?read|re-?write|rephrase|paraphrase|summari[sz]e|polish|reword|correct|spell-?check|edit|"
    r"improve|shorten|fix the (?:grammar|spelling|typos?)|check the (?:grammar|spelling)"
)
_HANDED_OVER = re.compile(
    rf"(?:^|(?<=[.!?:;,\n]))\s*(?:{_TASK_VERB})\b|"
    rf"\b(?:please|pls|can you|could you|would you|help me|kindly)\s+(?:{_TASK_VERB})\b|"
    r"\bis (?:this|that|it|the following)(?: \w+){0,3}? (?:grammatical|correct|right|natural|idiomatic)\b|"
    r"\bhow (?:do|would|can) (?:you|I|we) say\b|\bwhat does\b.{0,80}\bmean\b|\b(?:grammar|spelling) check\b|"
    r"(?:^|(?<=[。！？，,.!?:：\n]))\s*(?:请你?|帮我|给我|替我|你)?(?:写|编|创作|来)(?:一|个|一个|一篇|一首|一条|一段|条|篇|首|段)?"
    r"[\u3400-\u9fff]{0,4}?(?:故事|诗|微博|推文|文章|歌词|小说|文案|朋友圈|剧本|段子|对话|台词)|"
    r"(?<![是做当名个位在])翻译|润色|校对|改写|缩写|扩写|错别字|摘要|"
    r"(?:总结|概括|修改|检查)(?:一下|这|下面|以下)|帮我(?:总结|概括|修改|检查|看看这)|语法(?:对|正确|有问题|错)",
    _IM,
)
_HYPOTHETICAL = re.compile(
    r"\bif I(?: were| was| lived| live| worked| work| moved| became)\b|\bsuppos(?:e|ing)\b|"
    r"\bimagine\b|\bhypothetical(?:ly)?\b|\blet'?s say\b|\bwhat if\b|"
    r"假如|假设|如果我|如果说|要是|设想|想象一下|万一我|倘若",
    _I,
)
_EXAMPLE = re.compile(
    r"\bfor (?:example|instance)\b|\be\.g\.|\bexample\b|\bsample (?:sentence|text)\b|"
    r"例如|比如|举个例子|举例|例句|示例|样例|范例|示范|造句",
    _I,
)
_ROLE_PLAY = re.compile(
    r"\bpretend\b|\brole-?play(?:ing)?\b|\bact as\b|\bplay the (?:role|part)\b|\byou are now\b|\bin character\b|"
    r"\blet'?s play\b|扮演|假装|你现在是|模拟一下|我们来玩",
    _I,
)
_TRANSCRIPT = re.compile(
    r"(?:^|(?<=[.!?。！？]))[ \t]*"
    r"(?:user|assistant|human|ai|bot|chatbot|system|model|用户|助手|助理|系统|客服|机器人|人类)[ \t]*[:：].*$",
    _IM,
)
_LABEL = re.compile(
    r"(?:^|(?<=[.!?。！？]))[ \t]*(?P<label>[^\W\d_][\w'.\-]*(?:[ \t]+[\w'.\-]+){0,3}|[\u3400-\u9fff\w]{1,8})[ \t]*"
    r"[:：](?!//|\d)",
    re.MULTILINE,
)
"""A speaker label: a line (or sentence) that starts with a name or role of at most four words (eight CJK
characters) and a colon ("Alice:", "小王：", "Tom's text:", "Q:", "Lyrics:"); what follows on the line is that
speaker's, unless the label is :data:`_OWN_LABEL`. A colon before a digit (10:30, John 3:16) or ``//`` is none."""
_MY_THING = (
    r"city|name|job|occupation|employer|company|address|hometown|location|email|phone|birthday|age|role|title|"
    r"preferences?|goals?|plans?|background|situation|status|answer|take|thoughts|question|diet|allergies|schedule|"
    r"update|info|details|profile|bio"
)
_OWN_LABEL = re.compile(
    r"(?:(?:here(?:'s| is)|and|also|oh|ok|okay|so|just|one|more|another|quick|small|short|side|final|latest|"
    r"important|personal|probably|worth|an?)\s+)*"
    r"(?:update[sd]?|note|noting|p\.?s\.?|p\.?p\.?s\.?|fyi|btw|by the way|correction|corrected|addendum|"
    r"reminder|remember|please remember|actually|important|for the record|context|background|info|details|"
    r"heads up|to clarify|clarification|me|i|myself|about me|goal|plan|question|request|task|summary|tl;?dr|"
    r"(?:good|big|some|exciting|sad|bad)\s+news|news|fun fact|"
    rf"my\s+(?:(?:current|new|real|actual|home|work|full|first|last)\s+)?(?:{_MY_THING}))|"
    r"(?:hi|hey|hello|dear)\b.*|I\s+\w+(?:\s+\w+){0,2}|"
    r"我|本人|我自己|自己|关于我|个人信息|补充(?:一下|一点|说明)?|更正(?:一下)?|纠正(?:一下)?|更新(?:一下)?|"
    r"备注|注|注意|提醒(?:一下)?|请?记住|另外|还有|顺便(?:说一下|提一下|一提|说一句)?|对了|其实|说明|重要|"
    r"目标|计划|问题|总结|背景|近况|好消息|我(?:现在|目前|最近)?的?(?:情况|近况)(?:是这样|如下)?|"
    r"我(?:的|现在的|目前的|最近的)(?:城市|名字|职业|工作|公司|地址|家乡|住址|生日|年龄|邮箱|电话|偏好|目标|计划|情况|背景|"
    r"回答|想法|问题|近况|饮食|信息|资料)|"
    r"我(?:再|又|之前|刚才|已经)?(?:补充|更正|重申|强调|说过|说一遍|重复)\S{0,4}",
    re.IGNORECASE,
)
"""Labels under which the user goes on speaking for themselves ("Update:", "PS:", "My city:", "补充一下：",
"更正：", "我：", "I said it before:"); a closed list, so any other label is someone else's (issue 23, item 4):
a label the list misses costs recall, never a forged fact."""
_LEAD_IN = re.compile(
    r"\bhere(?:'s| is| are)\s+what\b(?!\s+I\b)|\bsent (?:me|us)\b|"
    r"'s\s+(?:message|text|email|e-mail|note|reply|post|words|dm|voicemail|letter|comment|answer|chat)\b|"
    r"\b(?:his|her|their)\s+(?:message|text|email|reply|post|words|dm)\b|"
    r"发来|发给我|发我|留言|回复我|回我|的消息|的留言|的原话|的微信|的短信|的邮件|的回复|聊天记录|对话记录|群聊",
    re.IGNORECASE,
)
"""A lead-in naming another source ("Here's what Tom sent me:", "Tom's message:", "小王发来：", "聊天记录："): with a
colon after it on its sentence, what follows is that source's text."""
_SELF_QUESTION = re.compile(
    r"(?:^|(?<=[.!?。！？\n]))[ \t]*(?:(?:do|did|am|was|should|shall|have|had)\s+I|is it (?:true|right|correct) that)\b"
    r"[^.!?。！？\n]*[?？]|"
    r"(?:^|(?<=[.!?。！？\n]))[^.!?。！？\n你您]*我[^.!?。！？\n你您]*(?:吗|么|嘛)\s*[?？]?(?=\s*(?:[.!?。！？\n]|$))",
    _I,
)
"""A question the user asks about themselves ("Do I live in Paris?", "Is it true that I …?", "我住在巴黎吗？"):
asked, not stated. A question to the assistant ("Could you …?", "你能…吗？") is a request, not this."""
_FORGET = re.compile(
    r"\b(?:don'?t|do not|never|no need to|stop)\s+(?:remember(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|keep(?:ing)?|"
    r"record(?:ing)?|memori[sz](?:e|ing)|note|noting)\b|"
    r"(?<!n't )(?<!not )(?<!never )(?<!n\u2019t )\bforget (?:that|about|this|it|what)\b|"
    r"(?:别|不要|不用|无需|不必)记(?:住|下|得)?|别存|不要存|不要保存|别保存|忘掉|请忘记|(?<![别要])忘了这",
    _I,
)
_FORGET_SUBJECT = re.compile(r"\bI(?:\s+(?:just|really|honestly|\w+ly))?\s*$", _I)
""""I don't remember much" is the user speaking about themselves, not an instruction."""
_BODY_LEAD = re.compile(r"(?:\s|[:：,，.。]|\bthat\b|\bthis\b|\bit\b|这个|这条|这句)*", _I)


@dataclass(frozen=True)
class _Layout:
    """Where the clauses, sentences, lines and colons of one message are, found once: every marker's region is
    then a few binary searches, so a long message with many markers costs what reading it once costs."""

    length: int
    clause_starts: list[int]
    sentence_starts: list[int]
    sentence_ends: list[int]
    line_ends: list[int]
    colons: list[int]

    @classmethod
    def of(cls, text: str) -> _Layout:
        spans = sentences(text)
        return cls(
            length=len(text),
            clause_starts=[clause.start for clause in all_clauses(text)],
            sentence_starts=[sentence.start for sentence in spans],
            sentence_ends=[sentence.end for sentence in spans],
            line_ends=[m.start() for m in re.finditer("\n", text)] + [len(text)],
            colons=[m.start() for m in re.finditer("[:：]", text)],
        )

    def clause_start(self, position: int) -> int:
        index = bisect_right(self.clause_starts, position) - 1
        return self.clause_starts[index] if index >= 0 else 0

    def sentence_start(self, position: int) -> int:
        index = bisect_right(self.sentence_starts, position) - 1
        return self.sentence_starts[index] if index >= 0 else 0

    def sentence_end(self, position: int) -> int:
        index = bisect_left(self.sentence_ends, position)
        return self.sentence_ends[index] if index < len(self.sentence_ends) else self.length

    def line_end(self, position: int) -> int:
        return self.line_ends[bisect_left(self.line_ends, position)]

    def colon(self, position: int) -> int | None:
        index = bisect_left(self.colons, position)
        return self.colons[index] if index < len(self.colons) else None


_BLANK_TO_LINE_END = re.compile(r"[^\S\n]*(?:\n|$)")


def _end(text: str, layout: _Layout, marker: re.Match[str], scope: _Scope) -> int:
    if scope is _Scope.MESSAGE:
        return len(text)
    sentence_end = layout.sentence_end(marker.end())
    colon = layout.colon(marker.end())
    if colon is not None and colon >= sentence_end:
        colon = None
    if scope is _Scope.LINE or colon is not None:
        after = marker.end() if colon is None else colon + 1
        return len(text) if _BLANK_TO_LINE_END.match(text, after) else layout.line_end(after)
    return max(sentence_end, marker.end())


def _region(text: str, layout: _Layout, marker: re.Match[str], kind: Foreign, scope: _Scope) -> Region:
    start = layout.clause_start(marker.start() + len(marker.group()) - len(marker.group().lstrip()))
    end = _end(text, layout, marker, scope)
    lead = _BODY_LEAD.match(text, marker.end(), end)
    body = lead.end() if lead is not None else marker.end()
    return Region(start, end, kind, min(body, end))


_TAIL_WORDS = re.compile(r"[\u3400-\u9fff]|[^\W_]+")
_TAIL_UNITS = 6
"""At most this many words (a CJK character each) may follow a reporting verb that closes its sentence: "…, Bob
said.", "…, according to my friend Tom.", "…，他说。", "…, or so Tom says."."""
_PRONOUNS = frozenset({"i", "he", "she", "they", "we", "you", "it", "我", "你", "他", "她", "它"})
"""A subject after the reporting verb starts what is reported ("…, and my boss said he lives in Paris"): the
verb then reports what follows it, not the clauses before it."""


def _trailing(text: str, layout: _Layout, marker: re.Match[str]) -> bool:
    """Does the reporting ``marker`` close a sentence whose earlier clauses it reports ("I live in Paris, Bob
    said.")? Then the region is the whole sentence, not the marker's clause alone (issue 23 re-probe)."""
    start = layout.sentence_start(marker.start())
    if layout.clause_start(marker.start()) <= start:
        return False
    rest = _TAIL_WORDS.findall(text[marker.end() : layout.sentence_end(marker.end())])
    return len(rest) <= _TAIL_UNITS and not _PRONOUNS.intersection(word.casefold() for word in rest)


def _reported(text: str, layout: _Layout) -> Iterator[re.Match[str]]:
    """Reporting verbs whose subject is not the user, and markers that always report ("according to", 转告)."""
    for pattern in (_EN_REPORT_ANY, _ZH_REPORT_ANY):
        yield from pattern.finditer(text)
    for pattern in (_EN_REPORT, _ZH_REPORT):
        for marker in pattern.finditer(text):
            subject = text[layout.clause_start(marker.start()) : marker.start()].strip()
            if pattern is _ZH_REPORT and _IDIOM.search(subject):
                continue
            if _OWN_SUBJECT.search(subject):
                continue
            yield marker


def _labels(text: str, layout: _Layout) -> Iterator[re.Match[str]]:
    """Speaker labels not the user's own, and lead-ins naming another source that a colon closes: each
    hands the rest of its line (of the message, when nothing follows the colon on it) to someone else."""
    for label in _LABEL.finditer(text):
        if not _OWN_LABEL.fullmatch(label.group("label")):
            yield label
    for lead_in in _LEAD_IN.finditer(text):
        colon = layout.colon(lead_in.end())
        if colon is not None and colon < layout.sentence_end(lead_in.end()):
            yield lead_in


def _forget_markers(text: str, layout: _Layout) -> Iterator[re.Match[str]]:
    for marker in _FORGET.finditer(text):
        if not _FORGET_SUBJECT.search(text[layout.clause_start(marker.start()) : marker.start()]):
            yield marker


_FOLD = str.maketrans(
    {**{chr(code): chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)}, "\u2018": "'", "\u2019": "'", "\u02bc": "'",
     "\u2032": "'", "\u3000": " "}
)
"""Full-width ASCII as ASCII, and the apostrophes a phone or word processor types ("Don\u2019t") as ``'``:
one character for one, so every offset found in the folded text is an offset in the message. Without it the
markers, written in ASCII, missed "Don\u2019t remember that I live in Berlin" and stored Berlin (issue 23 probe)."""


def _folded(text: str) -> str:
    return text.translate(_FOLD)


@lru_cache(maxsize=64)
def regions(text: str) -> tuple[Region, ...]:
    """The stretches of a user's message that are not the user speaking about themselves, in the order of
    :class:`Foreign` (an instruction not to remember first, so it names itself); each once. Markers are
    looked for in the :func:`_folded` text, which has the same offsets."""
    text = _folded(text)
    layout = _Layout.of(text)

    def spanning(pattern: re.Pattern[str] | Iterator[re.Match[str]], kind: Foreign, scope: _Scope) -> list[Region]:
        markers = pattern.finditer(text) if isinstance(pattern, re.Pattern) else pattern
        return [_region(text, layout, m, kind, scope) for m in markers]

    found: list[Region] = []
    found += spanning(_forget_markers(text, layout), Foreign.FORGET, _Scope.SENTENCE)
    found += spanning(_FORWARDED, Foreign.FORWARDED, _Scope.MESSAGE)
    found += [Region(m.start(), m.end(), Foreign.FORWARDED, m.start()) for m in _QUOTED_LINE.finditer(text)]
    found += [Region(m.start(), m.end(), Foreign.TRANSCRIPT, m.start()) for m in _TRANSCRIPT.finditer(text)]
    found += [Region(m.start(), m.end(), Foreign.QUESTION, m.start()) for m in _SELF_QUESTION.finditer(text)]
    found += spanning(_labels(text, layout), Foreign.LABELLED, _Scope.LINE)
    found += spanning(_HANDED_OVER, Foreign.HANDED_OVER, _Scope.MESSAGE)
    found += spanning(_ROLE_PLAY, Foreign.ROLE_PLAY, _Scope.MESSAGE)
    for marker in _reported(text, layout):
        region = _region(text, layout, marker, Foreign.REPORTED, _Scope.SENTENCE)
        if _trailing(text, layout, marker):
            region = Region(layout.sentence_start(marker.start()), region.end, region.kind, region.body)
        found.append(region)
    found += spanning(_HYPOTHETICAL, Foreign.HYPOTHETICAL, _Scope.SENTENCE)
    found += spanning(_EXAMPLE, Foreign.EXAMPLE, _Scope.LINE)
    found += [
        Region(m.start(), m.end(), Foreign.QUOTED, m.start())
        for m in _QUOTES.finditer(text) if _FIRST_PERSON.search(m.group())
    ]
    return tuple(dict.fromkeys(found))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping or touching ones joined: each character at most once."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the (merged, sorted) ``spans`` blanked, same length."""
    pieces: list[str] = []
    done = 0
    for start, end in spans:
        pieces += [text[done:start], " " * (end - start)]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _outside(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """The gaps between the (merged, sorted) ``spans`` in ``range(length)``."""
    bounds = [0] + [edge for span in spans for edge in span] + [length]
    return [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2) if bounds[i] < bounds[i + 1]]


@lru_cache(maxsize=64)
def views(text: str) -> tuple[str, tuple[tuple[Foreign, str], ...]]:
    """(the user's own text, and per foreign kind found the text of that kind alone), each as long as ``text``
    with everything else blanked: what the gate reads a candidate against."""
    found = regions(text)
    own = _blanked(text, _merged([(region.start, region.end) for region in found]))
    alone = []
    for kind in dict.fromkeys(region.kind for region in found):
        mine = _merged([(region.start, region.end) for region in found if region.kind is kind])
        alone.append((kind, _blanked(text, _outside(mine, len(text)))))
    return own, tuple(alone)


def own_text(text: str) -> str:
    """``text`` with every foreign region blanked (same length, same offsets): what the user says themselves."""
    return views(text)[0]


def forget_requests(text: str) -> tuple[str, ...]:
    """What the user asks not to remember ("that I live in Berlin" → "I live in Berlin"), one per instruction."""
    return tuple(
        body for region in regions(text) if region.kind is Foreign.FORGET
        if (body := text[region.body : region.end].strip().rstrip("。！？!?；;.").strip())
    )
