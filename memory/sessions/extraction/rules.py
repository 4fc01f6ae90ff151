"""The ``rules`` extractor: deterministic, network-free, Chinese and English.

It reads *user* messages (no ``context_refs``) clause by clause. A clause that names a statement (a
preference, a negated preference, a profile fact, a dated event of the user's, or a response preference
limited to this time) opens a statement; the clauses after it that name none continue it ("我喜欢咖啡，
尤其是拿铁" is one statement). A remember request (E1) or a correction marker modifies the statement it
stands in. Assistant and tool sentences about the user ("看起来你更喜欢…", "you seem to prefer …") become
E4 candidates; ``system`` messages and recalled context never yield anything. A message carrying a verified skill
execution report yields that execution's SKILL_EXECUTION candidate (:func:`skill_executions`), whichever extractor
the tenant runs.

Keys: a response preference takes its slot from :func:`memory.sessions.constraints.slots_in`; profile facts
take ``profile.city`` / ``profile.employer`` / ``profile.occupation`` / ``profile.name``. Other preferences,
negated preferences and events have no key: a key means "one value, the newer supersedes", and likes,
dislikes and trips are sets (a second "我不吃香菜" must not supersede "我不吃辣"). A negated response
preference ("不要用 markdown") has no key either: its slot would claim the very value it refuses.

The candidate proposes; the gates decide. A temporary constraint ("这次用英文") is proposed as a keyed
PREFERENCE so that the gates refuse it with ``TEMPORARY_CONSTRAINT`` and the commit counts it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from memory.enums import Category, SourceLevel
from memory.sessions.constraints import is_temporary, mentions_a_slot, slots_in
from memory.sessions.extraction.base import Candidate, Extraction
from memory.sessions.extraction.sentences import Span, clauses, sentences
from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.store.memories import abstract_for

_I = re.IGNORECASE

_REMEMBER = re.compile(
    r"请记住|(?<!别)(?<!不要)(?<!不用)(?<!不必)(?<!无需)记住(?!了)|帮我记一下|帮我记住|记一下|别忘了|不要忘了|"
    r"(?:^|[,.;:!?]\s*|\bplease\s+)remember\b|\b(?:can|could|would) you (?:please )?remember\b|"
    r"\bdon'?t forget\b|\bdo not forget\b",
    _I,
)
_CORRECTION = re.compile(
    r"其实|不对|更正|纠正一下|我说错了|\bactually\b|\bcorrection\b|\bI meant\b|\bsorry,? I meant\b", _I
)
_AVOID = re.compile(
    r"我不喜欢|我讨厌|我不吃|我不喝|我从不|不要给我|别给我|别再|不要再|不要用|别用|以后不要|以后别|都不要|都别|"
    r"\bI (?:don'?t|do not) (?:like|eat|drink|want)\b|\bI never\b|\bI hate\b|\bplease (?:don'?t|do not|never)\b|"
    r"\bstop (?:using|sending|giving)\b",
    _I,
)
_PREFER = re.compile(
    r"我喜欢|我更喜欢|我比较喜欢|我偏好|我习惯|以后都|以后请|以后一律|默认|请一直|"
    r"\bI (?:prefer|like|love|always)\b|\bI(?:'d| would) (?:prefer|rather)\b|\bfrom now on\b|\bby default\b|"
    r"\bplease always\b|\bgoing forward\b",
    _I,
)

_ZH_VALUE = r"(?P<v>[^，。！？,.!?；;\s]+?)(?=了|啦|呢|啊|吧|已经|$|[，。！？,.!?；;\s])"
_EN_VALUE = r"(?P<v>[^,.;!?]+?)(?=\s+(?:and|but|since|now|because|with|for)\b|[,.;!?]|$)"
_PROFILE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("profile.city", re.compile(r"我(?:现在)?(?:住在|家在)" + _ZH_VALUE)),
    ("profile.city", re.compile(r"我(?:已经)?搬(?:到|去)了?" + _ZH_VALUE)),
    ("profile.employer", re.compile(r"我(?:现在)?在(?P<v>[^，。！？,.!?；;\s]+?)(?:工作|上班|任职)")),
    ("profile.name", re.compile(r"(?:我叫|我的名字是|我的名字叫|我名字叫)" + _ZH_VALUE)),
    (
        "profile.occupation",
        re.compile(r"我是(?!说|不是|不|在|想|觉得|因为|为了|来|从|要|会)(?:一名|一个|一位|个)?" + _ZH_VALUE),
    ),
    ("profile.city", re.compile(r"\bI(?:'m| am)? (?:now )?(?:live|living|based) in " + _EN_VALUE, _I)),
    ("profile.city", re.compile(r"\bI(?:'ve| have)? (?:just )?moved to " + _EN_VALUE, _I)),
    ("profile.employer", re.compile(r"\bI (?:now )?work (?:at|for) " + _EN_VALUE, _I)),
    ("profile.name", re.compile(r"\b(?:my name is|I'm called|call me) " + _EN_VALUE, _I)),
    ("profile.occupation", re.compile(r"\bI(?:'m| am) (?:a|an) (?!bit\b|little\b|big fan\b|fan\b)" + _EN_VALUE, _I)),
)

_ZH_TIME = re.compile(
    r"今天|明天|后天|今晚|明晚|明早|下周[一二三四五六日天]?|下个?星期[一二三四五六日天]?|(?:这|本)周[一二三四五六日天末]|"
    r"周[一二三四五六日天末]|星期[一二三四五六日天]|下个月|月底|月初|\d{1,2}月\d{1,2}[日号]"
)
_ZH_ACTION = re.compile(r"去|出差|飞|开会|面试|参加|考试|见面|约了|回国|回家|搬家|休假|请假|出发")
_ZH_OTHER_SUBJECT = re.compile(r"^(?:他|她|它|你|他们|她们)")
_DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = r"january|february|march|april|may|june|july|august|september|october|november|december"
_EN_SUBJECT = re.compile(r"\b(?:I|I'm|I am|I'll|I will|I have|I've got|we|we're|we'll)\b", _I)
_EN_ACTION = re.compile(
    r"\b(?:fly|flying|go|going|travel|travell?ing|meet|meeting|visit|visiting|leave|leaving|head|heading|"
    r"attend|attending|move|moving|appointment|interview|exam|flight|trip)\b",
    _I,
)
_EN_TIME = re.compile(
    r"\b(?:today|tomorrow|tonight|this (?:morning|afternoon|evening|weekend|week)|"
    rf"next (?:week|month|year|{_DAYS})|on (?:{_DAYS}|\d{{1,2}})|in (?:{_MONTHS})|"
    r"at \d{1,2}(?::\d{2})?\s*(?:am|pm)?)\b",
    _I,
)
"""An event is a subject, an action and a time in one clause, in any order: three searches, each linear."""


def _is_event(text: str) -> bool:
    if _ZH_TIME.search(text) and _ZH_ACTION.search(text) and not _ZH_OTHER_SUBJECT.search(text):
        return True
    return all(pattern.search(text) for pattern in (_EN_SUBJECT, _EN_ACTION, _EN_TIME))


_FIRST_PERSON = re.compile(r"我|\b(?:I|I'm|I've|my|me|mine)\b", _I)

_ABOUT_USER = re.compile(
    r"看起来你|看来你|你似乎|你好像|你应该更?喜欢|你可能更?喜欢|你大概|你一般|你通常|"
    r"\byou seem\b|\bit seems (?:that )?you\b|\byou appear to\b|\blooks like you\b|\byou probably\b|"
    r"\byou might prefer\b|\byou (?:usually|tend to)\b",
    _I,
)
_PREFERENCE_WORDS = re.compile(r"喜欢|偏好|习惯|\bprefer|\blike|\bwant", _I)



def is_remember_request(text: str) -> bool:
    """Does ``text`` ask, in so many words, to remember something ("记住", "please remember", "don't forget")?
    "别记住" / "不要记住" asks the opposite (:mod:`memory.sessions.extraction.attribution`)."""
    return _REMEMBER.search(text) is not None


_LEAD_IN = re.compile(
    r"^\s*(?:(?:(?:请|麻烦)?你?(?:帮我)?(?:记住|记一下|记下|记好|记着))|别忘了|不要忘了)(?!了)[，,：:、\s]*"
    r"|^\s*(?:(?:please|(?:can|could|would) you(?: please)?)\s+)?(?:remember|don'?t forget|do not forget)"
    r"(?!\s+to\b)(?:\s+that\b)?\s*[,:：-]?\s*",
    _I,
)
_TRAILER = re.compile(
    r"[，,、；;\s]*(?:(?:请|麻烦)?你?(?:帮我)?(?:记住|记一下|记下来?|记好)|别忘了)(?:哦|啊|吧|呀)?[。！!.\s]*$"
    r"|[,;\s]+(?:please\s+)?(?:remember|don'?t forget|do not forget)(?:\s+(?:that|this|it))?(?:,?\s*please)?"
    r"[.!\s]*$",
    _I,
)
"""The request around a fact ("请记住，…", "…，帮我记住", "Remember that …", "…, remember that."): the memory keeps
the fact, its evidence (the message) keeps the request, and the source level (E1) says it was asked for."""


def strip_remember_request(text: str) -> str:
    """``text`` without a remember request leading or closing it; unchanged if nothing else would be left. Both
    extractors store what this returns, so "请记住我对花生过敏" and "我对花生过敏" are the same memory."""
    stripped = _TRAILER.sub("", _LEAD_IN.sub("", text, count=1), count=1).strip()
    if not any(ch.isalnum() for ch in stripped):
        return text
    if stripped != text.strip() and stripped[0].isascii() and stripped[0].islower():
        stripped = stripped[0].upper() + stripped[1:]
    return stripped


class _Kind(StrEnum):
    AVOID = "avoid"
    PREFER = "prefer"
    PROFILE = "profile"
    EVENT = "event"
    TEMPORARY = "temporary"
    """A response preference limited to now: proposed so the gates refuse and count it."""


@dataclass(frozen=True)
class _Reading:
    """What one clause states; a profile fact carries its slot (key, value) read from that clause."""

    kind: _Kind
    slot: tuple[str, str] | None = None


def _profile_slot(text: str) -> tuple[str, str] | None:
    for key, pattern in _PROFILE:
        match = pattern.search(text)
        if match:
            return key, match.group("v").strip()
    return None


def _read(text: str) -> _Reading | None:
    if _AVOID.search(text):
        return _Reading(_Kind.AVOID)
    if _PREFER.search(text):
        return _Reading(_Kind.PREFER)
    slot = _profile_slot(text)
    if slot is not None:
        return _Reading(_Kind.PROFILE, slot)
    if _is_event(text):
        return _Reading(_Kind.EVENT)
    if mentions_a_slot(text) and is_temporary(text):  # "这次不用markdown" too: refused and counted
        return _Reading(_Kind.TEMPORARY)
    return None


@dataclass
class _Statement:
    parts: list[Span]
    reading: _Reading | None

    def text(self, message: StageMessage) -> str:
        """Verbatim from the first clause to the last, commas included."""
        return message.content[self.parts[0].start : self.parts[-1].end]


def _statements(sentence: Span) -> Iterator[_Statement]:
    """Group a sentence's clauses: a clause stating something opens a statement unless the open one states
    nothing yet; clauses stating nothing continue the open statement, or wait for one if they carry a
    modifier (a remember request, a correction or temporary marker), and are dropped otherwise ("好的" before a
    fact)."""
    current: _Statement | None = None
    for clause in clauses(sentence):
        reading = _read(clause.text)
        if current is not None and current.reading is not None and reading is not None:
            yield current
            current = _Statement([clause], reading)
        elif current is not None and (current.reading is not None or _is_modifier(current)):
            current.parts.append(clause)
            current.reading = current.reading or reading
        else:
            current = _Statement([clause], reading)
    if current is None:
        return
    joined = " ".join(part.text for part in current.parts)
    current.reading = current.reading or _read(joined)  # "For now, keep it brief": the marker was a clause before
    if current.reading is not None or is_remember_request(joined):
        yield current


def _is_modifier(statement: _Statement) -> bool:
    """Clauses that shape the statement after them: a remember request, a correction, a temporary marker."""
    text = " ".join(part.text for part in statement.parts)
    return is_remember_request(text) or _CORRECTION.search(text) is not None or is_temporary(text)


def _candidate(
    message: StageMessage,
    content: str,
    category: Category,
    level: SourceLevel,
    slot: tuple[str, str] | None = None,
    *,
    correction: bool = False,
    note: str | None = None,
) -> Candidate:
    """L0 the statement on one line (behind its slot), L1 category, slot and source, L2 the text verbatim."""
    named = f"{slot[0]} = {slot[1]}" if slot else None
    head = f"{category.value} {named}" if named else category.value
    lines = [head + (f" ({note})" if note else ""), f"source: {message.role.value}, {message.created_at.isoformat()}"]
    if correction:
        lines.append("correction: supersedes the earlier value")
    return Candidate(
        category=category,
        abstract=abstract_for(f"{named}: {content}" if named else content, None),
        overview="\n".join(lines),
        content=content,
        source_level=level,
        evidence_event_ids=(message.event_id,),
        key=slot[0] if slot else None,
        value=slot[1] if slot else None,
        correction=correction,
    )


def _remembered_category(text: str) -> Category:
    """A remember request naming no known statement: dated → EVENT, about the speaker → PROFILE, else ENTITY."""
    if _ZH_TIME.search(text) or _EN_TIME.search(text):
        return Category.EVENT
    return Category.PROFILE if _FIRST_PERSON.search(text) else Category.ENTITY


def _from_user(message: StageMessage) -> Iterator[Candidate]:
    for sentence in sentences(message.content):
        level = SourceLevel.E1 if is_remember_request(sentence.text) else SourceLevel.E2
        found = list(_statements(sentence))
        for statement in found:
            content = statement.text(message)
            if len(found) == 1 and statement.reading is None:
                content = sentence.text  # "我对花生过敏，帮我记住": the request names what came before it
            content = strip_remember_request(content)
            correction = _CORRECTION.search(content) is not None
            for category, slot, note in _proposals(content, statement.reading):
                yield _candidate(message, content, category, level, slot, correction=correction, note=note)


def _proposals(
    content: str, reading: _Reading | None
) -> Iterator[tuple[Category, tuple[str, str] | None, str | None]]:
    """(category, slot, note) of each candidate a statement yields: one per response slot it names."""
    if reading is None:
        yield _remembered_category(content), None, "asked to remember"
    elif reading.kind is _Kind.AVOID:
        yield Category.PREFERENCE, None, "negated"
    elif reading.kind is _Kind.PROFILE:
        yield Category.PROFILE, reading.slot, None
    elif reading.kind is _Kind.EVENT:
        yield Category.EVENT, None, None
    else:
        slots = slots_in(content)
        note = "temporary" if reading.kind is _Kind.TEMPORARY else None
        if not slots:
            yield Category.PREFERENCE, None, note
        for slot in slots.items():
            yield Category.PREFERENCE, slot, note


def _about_user(message: StageMessage) -> Iterator[Candidate]:
    for sentence in sentences(message.content):
        if not _ABOUT_USER.search(sentence.text):
            continue
        if not _PREFERENCE_WORDS.search(sentence.text):
            yield _candidate(message, sentence.text, Category.PROFILE, SourceLevel.E4, note="inferred")
            continue
        slots = slots_in(sentence.text)
        if not slots:
            yield _candidate(message, sentence.text, Category.PREFERENCE, SourceLevel.E4, note="inferred")
        for slot in slots.items():
            yield _candidate(message, sentence.text, Category.PREFERENCE, SourceLevel.E4, slot, note="inferred")


def skill_execution(message: StageMessage) -> Candidate | None:
    """The SKILL_EXECUTION candidate of a message's verified report: the outcome, the note and the layers it
    resolved to, never the skill's text (seed 004 P10). E2: mnemo recorded, when the agent posted it, what the
    agent says it did; nobody inferred it. Keyed by what makes a run the same again (skill, trees, outcome)."""
    report = message.skill_execution
    if report is None or not report.layers or message.context_refs or message.role is MessageRole.SYSTEM:
        return None
    content = f"skill {report.skill} {report.version} {report.outcome.value}: {report.note}"
    layers = "; ".join(f"{layer.space}{' ' + layer.agent_id if layer.agent_id else ''}"
                       f"{' v' + str(layer.version) if layer.version is not None else ''} "
                       f"{layer.declared_version} tree {layer.tree_sha256}" for layer in report.layers)
    overview = "\n".join((f"{Category.SKILL_EXECUTION.value} {report.skill} {report.outcome.value}",
                          f"layers: {layers}", f"source: skill report, {message.created_at.isoformat()}"))
    return Candidate(category=Category.SKILL_EXECUTION, abstract=abstract_for(content, None), overview=overview,
                     content=content, source_level=SourceLevel.E2, evidence_event_ids=(message.event_id,),
                     key=report.key)


def skill_executions(stage: Stage) -> tuple[Candidate, ...]:
    """One candidate per skill execution the stage's messages report."""
    return tuple(found for message in stage.messages if (found := skill_execution(message)) is not None)


class RulesExtractor:
    """Deterministic candidates from a stage: the same stage always yields the same extraction."""

    name: str = "rules"

    def extract(self, stage: Stage) -> Extraction:
        found: list[Candidate] = []
        for message in stage.messages:
            if message.context_refs or message.role is MessageRole.SYSTEM:
                continue
            if message.role is MessageRole.USER:
                found.extend(_from_user(message))
            else:
                found.extend(_about_user(message))
        return Extraction(candidates=(*found, *skill_executions(stage)), extractor=self.name)
