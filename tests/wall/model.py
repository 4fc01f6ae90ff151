"""What the wall expects: who owns each text, which texts a completed deletion covered, what is alive.

Every text the wall writes carries a marker of its own (:func:`new_marker`), so where a marker shows up says
whose text it is, and whether it may be there, without asking the product how it derived or selected it.
"""

from __future__ import annotations

import copy
import re
import uuid
from dataclasses import dataclass, field
from enum import StrEnum

MARKER = re.compile(r"zq[0-9a-f]{10}7")


def new_marker() -> str:
    """A word no stemmer, tokenizer or case folding changes, unique across every run."""
    return f"zq{uuid.uuid4().hex[:10]}7"


Owner = tuple[str, str]  # (tenant, user)


class State(StrEnum):
    LIVE = "live"
    BARRED = "barred"  # its deletion's 202 came back: no read may return it any more
    PURGED = "purged"  # its deletion job completed: no copy may remain at rest either
    LOST = "lost"  # written after the backup a restore went back to: gone, but not by a deletion


@dataclass
class Memory:
    memory_id: str
    owner: Owner
    markers: list[str]
    version: int
    explicit: bool  # written through /memory-candidates (else extracted by a commit or a remember request)
    alive: bool = True


@dataclass
class Message:
    event_id: str
    marker: str
    alive: bool = True


@dataclass
class Session:
    session_id: str
    owner: Owner
    messages: list[Message] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    uncommitted: int = 0
    alive: bool = True


@dataclass
class Event:
    event_id: str
    owner: Owner
    marker: str
    alive: bool = True


@dataclass
class Record:
    record_id: str
    owner: Owner
    markers: list[str]
    twin: str | None = None  # the record differing from this one only in /status and /priority
    alive: bool = True


@dataclass
class World:
    markers: dict[str, tuple[Owner, State]] = field(default_factory=dict)
    memories: dict[str, Memory] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    deleted_memory_ids: set[str] = field(default_factory=set)
    policy_fields: tuple[str, ...] = ("/title",)

    def mark(self, owner: Owner) -> str:
        marker = new_marker()
        self.markers[marker] = (owner, State.LIVE)
        return marker

    def set_state(self, markers: list[str], state: State) -> None:
        for marker in markers:
            owner, _ = self.markers[marker]
            self.markers[marker] = (owner, state)

    def in_state(self, *states: State) -> list[str]:
        return [marker for marker, (_, state) in self.markers.items() if state in states]

    def snapshot(self) -> World:
        return copy.deepcopy(self)

    def restored_from(self, backup: World) -> World:
        """The world after restoring ``backup``: its objects, minus what was deleted since; markers written
        after it are lost, deletions stay deleted."""
        world = backup.snapshot()
        world.markers = {marker: (owner, State.LOST if marker not in backup.markers and state is State.LIVE
                                  else state)
                         for marker, (owner, state) in self.markers.items()}
        world.deleted_memory_ids = set(self.deleted_memory_ids)
        gone = set(self.in_state(State.BARRED, State.PURGED))
        # A deletion since the backup still holds: what is dead now stays dead, whatever the backup held.
        for memory in world.memories.values():
            now = self.memories.get(memory.memory_id)
            memory.alive = memory.alive and (now is None or now.alive) and not (memory.explicit and
                                                                                 gone & set(memory.markers))
        for session in world.sessions.values():
            session.alive = session.alive and self.sessions[session.session_id].alive
            for message in session.messages:
                message.alive = message.alive and message.marker not in gone
        for event in world.events.values():
            event.alive = event.alive and self.events[event.event_id].alive
        for record in world.records.values():
            now_record = self.records[record.record_id]
            record.alive = record.alive and now_record.alive
            record.twin = record.twin if now_record.twin is not None else None
        return world
