"""The gates every candidate passes, whichever extractor proposed it (seed 003 §6, issue 14 item 5).

Nothing an extractor claims is taken on trust (a model may lie): the evidence must lie inside the stage,
the source level is recomputed from the evidence, and what must never be stored (secrets, roles and
permissions, one-off clicks, personality labels, temporary constraints, recalled context, and anything
that is not the user speaking about themselves: :mod:`memory.sessions.extraction.attribution`) is refused
with its reason, so the commit counts each refusal. A refusal's ``detail`` names the kind, never the text: a
refused password must not reach the stats either.

A SKILL_EXECUTION is the one candidate not about the user: it is admitted only when it is, field for field, what
the rules make of the skill report it cites (:func:`~memory.sessions.extraction.rules.skill_execution`), at E2,
and refused otherwise, so no extractor can forge one; the user-statement gates do not apply to it.

An unknown category never reaches the gates: :class:`~memory.sessions.extraction.base.Candidate` holds a
:class:`~memory.enums.Category`, and the one place a category arrives as text (a model's answer) refuses
it with ``INVALID_CATEGORY`` before a candidate exists (:mod:`memory.sessions.extraction.llm`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from memory.enums import Category, SourceLevel
from memory.sessions.constraints import is_temporary, mentions_a_slot, slots_in
from memory.sessions.extraction.attribution import Foreign, forget_requests, own_text, views
from memory.sessions.extraction.base import Candidate, Extraction, Rejection, RejectionReason
from memory.sessions.extraction.rules import is_remember_request, skill_execution
from memory.sessions.extraction.sentences import clauses, sentences
from memory.sessions.messages import MessageRole, Stage, StageMessage
from memory.text import STOPWORDS, normalize, tokens

_I = re.IGNORECASE


@dataclass(frozen=True)
class GateResult:
    admitted: tuple[Candidate, ...]
    rejections: tuple[Rejection, ...]


_PASSWORD = re.compile(
    r"(?:密码|口令|验证码|\bpassword|\bpasswd|\bpwd|\bpasscode|\bpin)\s*(?:是|为|:|：|=|\bis\b)\s*\S", _I
)
_SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a password", _PASSWORD),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("an API token", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    ("an API token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("an API token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("an API token", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("an API token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{16,}", _I)),
    ("an API token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
)
_CODE_WORD = re.compile(
    r"密码|口令|验证码|安全码|卡号|pin码|\bpass(?:word|wd|code|phrase)|\bpwd\b|\bmy pin\b|\bpin (?:code|number)\b|"
    r"\bcvv\b|\bcvc\b|\bcard (?:number|no\.?)",
    _I,
)
"""A word naming a code whose value is a secret even when it is all digits ("my pin is 4821", "验证码 739201")."""
_KEY_WORD = re.compile(
    r"密钥|私钥|令牌|\bapi[ _-]?keys?\b|\baccess[ _-]?keys?\b|\bsecrets?\b|\btokens?\b", _I
)
"""A word naming a key whose value mixes letters and digits ("api key: sk-abc123")."""
_NEAR = 30
"""How far after such a word its value may start ("the root password for the db is Tr0ub4dor&3")."""
_VALUE_RUN = re.compile(r"[!-~]{4,}")
"""A run of printable ASCII without a blank: what a password, pin or key looks like."""
_HIGH_ENTROPY = re.compile(r"(?<![A-Za-z0-9/+_=-])[A-Za-z0-9/+_=-]{24,}")
_CARD_SHAPED = re.compile(r"(?<![\d.-])\d(?:[ .-]?\d){12,18}(?![\d-])")
_CARD_WORD = re.compile(r"卡号|信用卡|银行卡|借记卡|\bcard\b", _I)

_ZH_SPAN = r"[^，。！？,.!?；;\s]"
_ROLE = re.compile(
    rf"我是{_ZH_SPAN}{{0,12}}(?:管理员|所有者|超级用户|超管|root)|给我(?:开通|开|加|分配)?(?:\S{{0,6}})?权限|授予我|"
    r"我的角色是|我有\S{0,8}权限|管理员权限|"
    r"\bI(?:'m| am) (?:an?|the) (?:[\w-]+ ){0,3}(?:admin|administrator|sysadmin|superuser|root)\b|"
    r"\bI(?:'m| am) (?:an?|the) (?:[\w-]+ ){0,2}owner of\b|"
    r"\b(?:project|repo|repository|workspace|account|org|organization|team|tenant) owner\b|"
    r"\bI (?:have|got|hold) (?:[\w-]+ ){0,3}(?:access|permissions?|rights|privileges)\b|"
    r"\b(?:write|admin|root|sudo|owner) (?:access|permissions?|rights|privileges)\b|"
    r"\b(?:grant|give) me (?:\w+ )?(?:access|permissions?|rights|admin)\b|\bmy role is\b|"
    r"\bmake me (?:an? )?(?:admin|owner|superuser)\b",
    _I,
)
_ONE_OFF = re.compile(
    r"点击了|点了一下|点开了|单击了|(?:刚才|刚刚|刚)(?:选了|选择了|点了|按了)|选了第\S{1,3}个|"
    r"\bclicked\b|\btapped\b|\bpressed the\b|\bI (?:just )?(?:picked|chose|selected) (?:the )?"
    r"(?:option|first|second|third|last|\w+ option)\b",
    _I,
)
_PERSONALITY = re.compile(
    r"性格|急躁|内向|外向|懒(?!加载)|没(?:什么|有)?耐心|脾气|急性子|慢性子|完美主义|强迫症|拖延症|玻璃心|社恐|暴躁|"
    rf"我是(?:一个|一位|个)?{_ZH_SPAN}{{1,12}}的人|"
    r"\bimpatient\b|\bintrovert(?:ed)?\b|\bextrovert(?:ed)?\b|\blazy\b(?![- ](?:load|evaluat))|"
    r"\bperfectionists?\b|\bprocrastinators?\b|\bcontrol freak\b|\bhot-?headed\b|\bshort-tempered\b|"
    r"\b(?:you(?:'re| are)|I(?:'m| am)|the user is) (?:a|an) (?:[\w-]+ ){0,3}(?:person|guy|type)\b",
    _I,
)
_REFUSALS: tuple[tuple[RejectionReason, re.Pattern[str], str], ...] = (
    (RejectionReason.ROLE_OR_PERMISSION, _ROLE, "roles and permissions come from credentials, not conversation"),
    (RejectionReason.ONE_OFF_ACTION, _ONE_OFF, "a single click or action is not a stable preference"),
    (RejectionReason.PERSONALITY_LABEL, _PERSONALITY, "a label about the user's character is never stored"),
)

_STRENGTH = {SourceLevel.E1: 1, SourceLevel.E2: 2, SourceLevel.E3: 3, SourceLevel.E4: 4}


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _valued(word: re.Pattern[str], text: str, *, digits_alone: bool) -> bool:
    """Does a value follow ``word`` within :data:`_NEAR` characters: a run of 4+ holding a digit (and, unless
    ``digits_alone``, a letter too)?"""
    for named in word.finditer(text):
        window = text[named.end() : named.end() + _NEAR + 64]
        for run in _VALUE_RUN.finditer(window):
            if run.start() > _NEAR:
                break
            value = run.group().strip(".,;:!?\"'()")
            has_digit = any(char.isdigit() for char in value)
            if len(value) >= 4 and has_digit and (digits_alone or any(char.isalpha() for char in value)):
                return True
    return False


def _high_entropy(text: str) -> bool:
    """A long run mixing digits with upper- and lower-case letters: a key of some kind nobody named."""
    return any(
        any(c.isdigit() for c in run) and any(c.isupper() for c in run) and any(c.islower() for c in run)
        for run in _HIGH_ENTROPY.findall(text)
    )


def _card(text: str) -> bool:
    """13-19 digits (blanks, dots or dashes between them) passing Luhn, or any when a card word names them."""
    named = _CARD_WORD.search(text) is not None
    for match in _CARD_SHAPED.finditer(text):
        digits = re.sub(r"[ .-]", "", match.group())
        if 13 <= len(digits) <= 19 and (named or _luhn(digits)):
            return True
    return False


def secret_kind(text: str) -> str | None:
    """Which kind of secret ``text`` holds ("a password", "an API token", ...), or None.

    Full-width forms count as their ASCII selves (NFKC): a card number typed in full-width digits is one too."""
    text = unicodedata.normalize("NFKC", text)
    for kind, pattern in _SECRETS:
        if pattern.search(text):
            return kind
    if _card(text):
        return "a card number"
    if _valued(_CODE_WORD, text, digits_alone=True):
        return "a password or code"
    if _valued(_KEY_WORD, text, digits_alone=False) or _high_entropy(text):
        return "an API token"
    return None


def _texts(candidate: Candidate) -> str:
    return "\n".join((candidate.abstract, candidate.overview, candidate.content))


@lru_cache(maxsize=256)
def _slots_of(text: str) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
    """The response preferences one message names (stable, temporary). A temporary marker limits its own
    clause ("以后都用英文，这次先用中文"), or the whole sentence when its clause speaks of no slot ("For now,
    keep it brief"; "这次不要用英文" speaks of one, refused). Cached: every candidate citing the message asks."""
    stable: set[tuple[str, str]] = set()
    temporary: set[tuple[str, str]] = set()
    for sentence in sentences(text):
        parts = clauses(sentence)
        sentence_wide = any(is_temporary(c.text) and not mentions_a_slot(c.text) for c in parts)
        for clause in parts:
            named = set(slots_in(clause.text).items())
            (temporary if sentence_wide or is_temporary(clause.text) else stable).update(named)
    return frozenset(stable), frozenset(temporary)


def _slots_said(messages: Sequence[StageMessage]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The response preferences the messages name (stable, temporary)."""
    stable: set[tuple[str, str]] = set()
    temporary: set[tuple[str, str]] = set()
    for message in messages:
        said, limited = _slots_of(message.content)
        stable |= said
        temporary |= limited
    return stable, temporary


def _temporary_only(candidate: Candidate, cited: Sequence[StageMessage]) -> bool:
    """Is what the candidate states limited to now? Its own text says so, or the cited messages name the
    response preference it states only as temporary ("这次用英文" quoted without "这次" is still temporary)."""
    if is_temporary(candidate.content):
        return True
    stated = set(slots_in(candidate.content).items())
    if candidate.key is not None and candidate.value is not None:
        stated.add((candidate.key, candidate.value))
    stable, temporary = _slots_said(cited)
    return bool(stated & temporary) and not stated & stable


def _recalled(candidate: Candidate, cited: Sequence[StageMessage], stage: Stage) -> bool:
    if any(message.context_refs for message in cited):
        return True
    content = " ".join(normalize(candidate.content).split())
    return any(content in " ".join(normalize(m.content).split()) for m in stage.messages if m.context_refs)


def _refusal(candidate: Candidate, cited: Sequence[StageMessage], stage: Stage) -> Rejection | None:
    """The first reason this candidate may not be stored at all, or None."""
    evidence = candidate.evidence_event_ids

    def refuse(reason: RejectionReason, detail: str) -> Rejection:
        """The refusal cites the stage's events the candidate rested on (never an id that is not one)."""
        inside = tuple(message.event_id for message in cited)
        return Rejection(reason, f"{candidate.category.value} candidate refused: {detail}", inside)

    if not evidence:
        return refuse(RejectionReason.MISSING_FIELD, "it cites no evidence")
    outside = sorted(set(evidence) - stage.event_ids())
    if outside:
        return refuse(RejectionReason.EVIDENCE_OUTSIDE_STAGE, f"it cites events outside the stage: {outside}")
    secret = secret_kind(_texts(candidate))
    if secret is not None:
        return refuse(RejectionReason.SECRET, f"its text holds {secret}, which is never stored")
    if _recalled(candidate, cited, stage):
        return refuse(RejectionReason.RECALLED_CONTEXT, "its text reached the agent as recalled context")
    foreign = _not_the_users(candidate, cited)
    if foreign is Foreign.FORGET:
        return refuse(RejectionReason.FORGET_INSTRUCTION, "the user asked for it not to be remembered")
    if foreign is not None:
        return refuse(RejectionReason.NOT_SELF_STATEMENT,
                      f"it rests on {foreign.value}, not on the user speaking about themselves")
    if _forgotten_after(candidate, cited, stage):
        return refuse(RejectionReason.FORGET_INSTRUCTION, "the user asked afterwards for it not to be remembered")
    for reason, pattern, why in _REFUSALS:
        if pattern.search(_texts(candidate)):
            return refuse(reason, why)
    if _temporary_only(candidate, cited):
        return refuse(RejectionReason.TEMPORARY_CONSTRAINT, "a constraint for this time only is session state")
    return None


@lru_cache(maxsize=256)
def _flat(text: str) -> str:
    """Normalised, blanks collapsed; cached, as the gates read one message (and its views) once per candidate."""
    return " ".join(normalize(text).split())


@lru_cache(maxsize=256)
def _words(text: str) -> frozenset[str]:
    return frozenset(tokens(text))


@lru_cache(maxsize=256)
def _slots(text: str) -> dict[str, str]:
    return slots_in(text)


def _quoted_by(content: str, messages: Sequence[StageMessage]) -> bool:
    """Is every sentence of ``content`` copied from one of ``messages``?"""
    said = [_flat(message.content) for message in messages]
    pieces = [_flat(sentence.text) for sentence in sentences(content)]
    return bool(pieces) and all(any(piece in text for text in said) for piece in pieces)


def _value_said(candidate: Candidate, messages: Sequence[StageMessage]) -> bool:
    """Does one of ``messages`` state the candidate's slot value ("上海" verbatim, "英文" for ``en``)?"""
    key, value = candidate.key, candidate.value
    if key is None or value is None:
        return False
    if key.startswith("response."):
        return any(_slots(message.content).get(key) == value for message in messages)
    return any(_flat(value) in _flat(message.content) for message in messages)


def _echoes(candidate: Candidate, message: StageMessage) -> bool:
    """Does ``message`` say what the candidate says: its slot value, a sentence of it, or half its words?"""
    if _value_said(candidate, [message]) or _quoted_by(candidate.content, [message]):
        return True
    words = {token for token in tokens(candidate.content) if token not in STOPWORDS}
    return bool(words) and len(words & _words(message.content)) * 2 >= len(words)


def _not_the_users(candidate: Candidate, cited: Sequence[StageMessage]) -> Foreign | None:
    """Does the candidate rest only on what is not the user speaking about themselves (quoted, reported,
    forwarded or handed-over text, a hypothetical, an example, role-play, a transcript, "don't remember …")?
    The kind of the first such region it rests on, or None when the user's own words say it (its slot value,
    when it has one, and a sentence or half the words of its content) or when no cited user message has such
    a region (a candidate resting on no user text is the level gate's: E4)."""
    said = [(m, views(m.content)) for m in cited if m.role is MessageRole.USER]
    if not any(alone for _, (_, alone) in said):
        return None
    own = [replace(m, content=own) for m, (own, _) in said]
    parts = [(kind, replace(m, content=text)) for m, (_, alone) in said for kind, text in alone]

    def first(test: Callable[[StageMessage], bool]) -> Foreign | None:
        return next((kind for kind, part in parts if test(part)), None)

    keyed = candidate.key is not None and candidate.value is not None
    if keyed and not _value_said(candidate, own):
        return first(lambda part: _value_said(candidate, [part])) or first(lambda part: _echoes(candidate, part))
    if _quoted_by(candidate.content, own):
        return None
    copied = first(lambda part: _quoted_by(candidate.content, [part]))
    if copied is not None or keyed or any(_echoes(candidate, m) for m in own):
        return copied
    return first(lambda part: _echoes(candidate, part))


def _forgotten_after(candidate: Candidate, cited: Sequence[StageMessage], stage: Stage) -> bool:
    """Does a user message of the stage, from the candidate's evidence on, ask not to remember what it says
    ("I live in Berlin." … "Don't remember that I live in Berlin.")?"""
    since = max((m.sequence_no for m in cited), default=0)
    asked = [replace(m, content=body) for m in stage.messages
             if m.role is MessageRole.USER and not m.context_refs and m.sequence_no >= since
             for body in forget_requests(m.content)]
    if candidate.key is not None and candidate.value is not None:
        return _value_said(candidate, asked)
    return _quoted_by(candidate.content, asked) or any(_echoes(candidate, m) for m in asked)


@lru_cache(maxsize=256)
def _asks_to_remember(text: str) -> bool:
    """Does the user, in their own words (not in a quote or a forwarded text), ask to remember something?"""
    return is_remember_request(own_text(text))


def _ceiling(candidate: Candidate, cited: Sequence[StageMessage]) -> SourceLevel:
    """The strongest level the evidence supports: E1 only for a remember request, E1 and E2 only for what a
    cited user message says. The content copied from a user message is the user's; a content only the slot
    value of which a user gave is the user's only if no cited assistant or tool message says it too (a tool
    result "the user's employer is EvilCorp" and the user's "ok" are not the user saying so). Anything else
    is E4, an inference."""
    said = [m for m in cited if m.role is MessageRole.USER]
    others = [m for m in cited if m.role is not MessageRole.USER]
    quoted = _quoted_by(candidate.content, said)
    valued = _value_said(candidate, said) and not any(_echoes(candidate, m) for m in others)
    if not said or not (quoted or valued):
        return SourceLevel.E4
    return SourceLevel.E1 if any(_asks_to_remember(m.content) for m in said) else SourceLevel.E2


def _level(candidate: Candidate, cited: Sequence[StageMessage]) -> SourceLevel:
    """The claimed level, never stronger than the evidence allows; E3 is the commit's to give (three sessions)."""
    claimed = SourceLevel.E2 if candidate.source_level is SourceLevel.E3 else candidate.source_level
    return max(claimed, _ceiling(candidate, cited), key=_STRENGTH.__getitem__)


def _report_refusal(candidate: Candidate, cited: Sequence[StageMessage], stage: Stage) -> Rejection | None:
    """Why a SKILL_EXECUTION candidate may not be stored: it must be exactly one cited report's (whatever level it
    claims: the level is the gates' to give), free of secrets."""
    inside = tuple(message.event_id for message in cited)
    reported = skill_execution(cited[0]) if len(cited) == 1 else None
    outside = not set(candidate.evidence_event_ids) <= stage.event_ids()
    if reported is None or outside or replace(candidate, source_level=reported.source_level) != reported:
        return Rejection(RejectionReason.NOT_A_SKILL_REPORT, "SKILL_EXECUTION candidate refused: it is not what a "
                         "skill report of the stage says", inside)
    secret = secret_kind(_texts(candidate))
    if secret is not None:
        return Rejection(RejectionReason.SECRET, f"SKILL_EXECUTION candidate refused: its note holds {secret}, "
                         "which is never stored", inside)
    return None


def apply_gates(stage: Stage, extraction: Extraction) -> GateResult:
    """Admit what may be stored, at the level its evidence supports; refuse the rest with a reason.

    The extraction's own rejections (a model answer the parser refused) come first in the result."""
    by_id = {message.event_id: message for message in stage.messages}
    admitted: list[Candidate] = []
    rejections = list(extraction.rejections)
    for candidate in extraction.candidates:
        cited = [by_id[event_id] for event_id in dict.fromkeys(candidate.evidence_event_ids) if event_id in by_id]
        report = candidate.category is Category.SKILL_EXECUTION
        refusal = (_report_refusal if report else _refusal)(candidate, cited, stage)
        if refusal is not None:
            rejections.append(refusal)
            continue
        level = SourceLevel.E2 if report else _level(candidate, cited)
        admitted.append(replace(candidate, source_level=level))
    return GateResult(tuple(admitted), tuple(rejections))
