"""A deterministic, bilingual personal-assistant corpus for bench/resource_eval.py (seed 000 §6).

Meetings come whole: a calendar event, an episode (summary, topics, decisions, participants, refs to the
event, the transcript and its todos), a 30k–120k-character transcript, and two or three todos — one of them
already done. Around them: contacts, voice memos, more calendar events and todos. Every meeting has a topic
of its own (an area and a subject no other meeting has), every transcript holds one sentence said nowhere
else (the "original quote" a case reads page by page to find), and some todos keep a keyword in ``/notes``
only (the field an agent may not read). The filler text draws from a vocabulary that shares no word with
the topics, so what a case expects to find is decided here, not by chance.

Every record is valid against its built-in declaration (memory/resources/builtin/); the same seed gives the
same corpus, byte for byte.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

AREAS_ZH = ["移动端", "网页端", "小程序", "车机", "手表", "平板", "电视端", "桌面端", "语音助手", "开放平台"]
SUBJECTS_ZH = ["提醒", "推送", "账单导出", "夜间模式", "离线缓存", "权限弹窗", "搜索联想", "会员续费", "日程同步",
               "录音转写", "通知兜底", "数据迁移"]
AREAS_EN = ["mobile", "web", "kiosk", "car", "watch", "tablet", "television", "desktop", "speaker", "partner"]
SUBJECTS_EN = ["reminders", "notifications", "invoice export", "dark mode", "offline cache", "consent dialog",
               "search suggestions", "renewal flow", "calendar sync", "transcription", "fallback alerts",
               "data migration"]
FILLER_ZH = list("我们先看一下这个情况然后大家再补充意见好的没问题可以的对吧这边还需要确认时间安排资源")
FILLER_EN = ["so", "basically", "we", "should", "look", "at", "this", "again", "next", "week", "okay", "right",
             "I", "think", "that", "makes", "sense", "maybe", "later", "anyway", "the", "team", "agreed", "fine"]
GIVEN = ["Lin", "Wei", "Mei", "Jun", "Hao", "Yan", "Ana", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Ivy"]
FAMILY = ["Chen", "Wang", "Li", "Zhao", "Smith", "Garcia", "Kim", "Okafor", "Novak", "Rossi", "Sato", "Haas"]
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Record:
    resource: str
    record_id: str
    data: dict[str, Any]

    @property
    def ref(self) -> str:
        return f"{self.resource}:{self.record_id}"


@dataclass(frozen=True)
class Meeting:
    """What the cases of one meeting expect: the refs that answer them and the words that ask them."""

    topic: str
    """The meeting's own topic (``移动端提醒``, ``mobile reminders``): a search for it finds the meeting."""
    language: str
    episode: str
    calendar: str
    transcript: str
    open_todos: tuple[str, ...]
    done_todos: tuple[str, ...]
    quote: str
    """A sentence of the transcript said nowhere else, placed past its first page."""
    quote_offset: int
    secret_todo: str
    """A todo of this meeting whose ``/notes`` alone hold :attr:`secret_word`."""
    secret_word: str


@dataclass
class Corpus:
    records: list[Record] = field(default_factory=list)
    meetings: list[Meeting] = field(default_factory=list)

    def count(self, resource: str) -> int:
        return sum(1 for record in self.records if record.resource == resource)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _filler(rng: random.Random, language: str, characters: int) -> str:
    words: list[str] = []
    size = 0
    while size < characters:
        if language == "zh":
            sentence = "".join(rng.choice(FILLER_ZH) for _ in range(rng.randint(8, 24))) + "。"
        else:
            sentence = " ".join(rng.choice(FILLER_EN) for _ in range(rng.randint(6, 16))).capitalize() + ". "
        if rng.random() < 0.01:
            sentence += "🙂"
        words.append(sentence)
        size += len(sentence)
    return "".join(words)[:characters]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(GIVEN)} {rng.choice(FAMILY)}"


def build(meetings: int = 60, seed: int = 20261201) -> Corpus:
    """``meetings`` meetings (at most 120: one topic each) and the records around them (≥ 2,000 at 60)."""
    topics = [(AREAS_ZH[i % 10] + SUBJECTS_ZH[i // 10], "zh") if i % 2 == 0 else
              (f"{AREAS_EN[i % 10]} {SUBJECTS_EN[i // 10]}", "en") for i in range(120)]
    if meetings > len(topics):
        raise ValueError(f"at most {len(topics)} meetings have topics of their own")
    rng = random.Random(seed)
    corpus = Corpus()
    contacts = [_contact(rng, index) for index in range(150)]
    corpus.records.extend(contacts)
    for index in range(meetings):
        topic, language = topics[index]
        corpus.meetings.append(_meeting(rng, corpus, index, topic, language, contacts))
    for index in range(900):
        corpus.records.append(_loose_todo(rng, index))
    for index in range(500):
        corpus.records.append(_loose_event(rng, index))
    for index in range(300):
        corpus.records.append(_voice_memo(rng, index))
    return corpus


def _contact(rng: random.Random, index: int) -> Record:
    name = _name(rng)
    return Record("contact", f"c{index:04d}", {
        "display_name": name, "aliases": [name.split()[0]], "organization": rng.choice(["Acme", "Globex", "Initech"]),
        "job_title": rng.choice(["designer", "engineer", "product manager", "researcher"]),
        "email": f"{name.lower().replace(' ', '.')}.{index}@example.com",
    })


def _meeting(rng: random.Random, corpus: Corpus, index: int, topic: str, language: str,
             contacts: list[Record]) -> Meeting:
    key = f"m{index:03d}"
    started = START + timedelta(days=index, hours=rng.randint(0, 6))
    people = rng.sample(contacts, 3)
    zh = language == "zh"
    decision = f"{topic}方案改为分阶段上线" if zh else f"ship the {topic} change in stages"
    quote = (f"关于{topic}，第{index}号会议上我说过先灰度百分之五再看数据。" if zh else
             f"On {topic}, in meeting {index}, I said we roll out to five percent first and watch the data.")
    characters = rng.randint(30_000, 120_000)
    offset = rng.randint(70_000, characters - 1_000) if characters > 71_000 else characters // 2
    text = _filler(rng, language, characters)
    text = text[:offset] + quote + text[offset:]
    secret = f"kw{index:03d}zx"
    todos = [
        Record("todo", f"{key}-t1", {"title": f"{topic}：整理灰度计划" if zh else f"{topic}: write the rollout plan",
                                      "status": "open", "episode": f"episode:{key}",
                                      "notes": f"内部联系 {secret}" if zh else f"internal contact {secret}"}),
        Record("todo", f"{key}-t2", {"title": f"{topic}：确认文案" if zh else f"{topic}: confirm the copy",
                                      "status": "open", "episode": f"episode:{key}",
                                      "due_at": _iso(started + timedelta(days=7))}),
        Record("todo", f"{key}-t3", {"title": f"{topic}：约评审" if zh else f"{topic}: book the review",
                                      "status": "done", "episode": f"episode:{key}",
                                      "completed_at": _iso(started + timedelta(days=1))}),
    ]
    corpus.records.extend([
        Record("calendar", key, {
            "title": f"{topic}讨论会" if zh else f"{topic} sync", "starts_at": _iso(started),
            "ends_at": _iso(started + timedelta(hours=1)), "status": "confirmed", "episode": f"episode:{key}",
            "attendees": [{"contact": person.ref, "display_name": person.data["display_name"]} for person in people],
        }),
        Record("transcript", key, {
            "title": f"{topic}讨论会录音" if zh else f"{topic} sync recording", "language": language,
            "recorded_at": _iso(started), "duration_seconds": float(characters // 4), "episode": f"episode:{key}",
            "text": text,
        }),
        Record("episode", key, {
            "title": f"{topic}讨论会" if zh else f"{topic} sync",
            "summary": f"讨论了{topic}，结论：{decision}。" if zh else f"We discussed {topic}; decided to {decision}.",
            "topics": [topic], "decisions": [decision],
            "participants": [{"contact": person.ref, "display_name": person.data["display_name"]} for person in people],
            "started_at": _iso(started), "ended_at": _iso(started + timedelta(hours=1)),
            "calendar": f"calendar:{key}", "transcript": f"transcript:{key}",
            "todos": [todo.ref for todo in todos], "analysis_status": "done",
        }),
        *todos,
    ])
    return Meeting(topic=topic, language=language, episode=f"episode:{key}", calendar=f"calendar:{key}",
                   transcript=f"transcript:{key}", open_todos=(todos[0].ref, todos[1].ref),
                   done_todos=(todos[2].ref,), quote=quote, quote_offset=offset, secret_todo=todos[0].ref,
                   secret_word=secret)


def _loose_todo(rng: random.Random, index: int) -> Record:
    words = " ".join(rng.choice(FILLER_EN) for _ in range(4))
    return Record("todo", f"t{index:04d}", {"title": f"errand {index}: {words}",
                                            "status": rng.choice(["open", "done", "cancelled"])})


def _loose_event(rng: random.Random, index: int) -> Record:
    starts = START + timedelta(days=rng.randint(0, 200), hours=rng.randint(0, 10))
    return Record("calendar", f"e{index:04d}", {"title": f"appointment {index}", "starts_at": _iso(starts),
                                                "status": rng.choice(["confirmed", "tentative", "cancelled"])})


def _voice_memo(rng: random.Random, index: int) -> Record:
    language = "zh" if index % 2 == 0 else "en"
    recorded = START + timedelta(days=rng.randint(0, 200))
    return Record("voice_memo", f"v{index:04d}", {
        "title": f"语音笔记 {index}" if language == "zh" else f"voice note {index}", "recorded_at": _iso(recorded),
        "duration_seconds": float(rng.randint(5, 300)), "text": _filler(rng, language, rng.randint(200, 2_000)),
    })

