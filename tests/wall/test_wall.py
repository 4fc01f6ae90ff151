"""The permanent wall (issue 23, Deliver 7): random sequences of writes, messages, commits, corrections,
deletions of every scope, squatting attempts, policy changes, backups and restores, over the real stack
(the real app, embedded PostgreSQL, Temporal and a real worker), with the four promises checked after every
step, each by a check of its own (its name starts the failure's message):

- ``deleted_unreadable``: nothing a deletion covered (from its 202 on) is returned by any read path;
- ``residue_empty``: no copy of a text a completed deletion covered is left in any text-bearing column of
  any table or in any file of the data dir (:mod:`tests.wall.residue`, independent of the product's code);
- ``nothing_crosses``: every answer holds only the reader's own texts, another's object is a 404, and a
  user's own live objects stay readable (no one else can hide them);
- ``ids_owned``: a deletion scope naming another's (or nobody's) session is a 404;
- ``request_ids_owned``: no one can take the request id of another's deletion (the owner's DELETE is a 202);
- ``withheld_fields_hidden``: two records differing only in fields the agent's policy withholds look the
  same to the agent (title, snippet, state, score, data, omitted);
- ``deletion_completes``: a user's deletion of their own data completes with ``fully_deleted`` (always on).

``MNEMO_WALL_SEED`` replays a run; ``MNEMO_WALL_EXAMPLES`` / ``MNEMO_WALL_STEPS`` change the budget;
``MNEMO_WALL_CHECKS`` (comma-separated invariant names) narrows the checks and ``MNEMO_WALL_SHRINK=1`` shrinks a
failure (minutes on the real stack), to find one invariant's minimal failing sequence.
"""

from __future__ import annotations

import functools
import os
import random
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, initialize, invariant, rule

from api.backup import backup, restore
from memory.db import tenant_session
from memory.identity.auth import create_api_key
from tests.conftest import auth, poll
from tests.wall.conftest import WallStack
from tests.wall.model import Event, Memory, Message, Owner, Record, Session, State, World
from tests.wall.reads import Answer, Reader, read_everything
from tests.wall.residue import scan_database, scan_files
from tests.wall.stats import STATS

AGENT = "wall-agent"
USERS: tuple[tuple[str, str], ...] = (("A", "alice"), ("A", "bob"), ("B", "carol"))
CHECKS = {name for name in os.environ.get("MNEMO_WALL_CHECKS", "").split(",") if name}
TERMINAL_COMMIT = {"completed", "completed_with_rejections", "failed_requires_action", "cancelled_by_deletion"}
# A user message of each kind the rules extractor reads (or ignores); {m} is the message's marker.
SAYINGS = (
    "I live in {m}.",
    "我住在{m}。",
    "I like {m} tea.",
    "Please remember that my locker word is {m}.",
    "请记住我喜欢{m}。",
    "We talked about {m} for a while.",
)
T = TypeVar("T")
POLICIES = (("/title",), ("/title", "/notes"), ("/title", "/status"), ("/title", "/notes", "/priority", "/status"))


def timed(method: Callable[..., None]) -> Callable[..., None]:
    """Count the seconds each rule and invariant takes (the summary names the slowest)."""

    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> None:
        started = time.monotonic()
        try:
            method(*args, **kwargs)
        finally:
            STATS.seconds[method.__name__] += time.monotonic() - started

    return run


class Picks:
    """An action's choices, taken from values drawn before it ran."""

    def __init__(self, values: list[int]) -> None:
        self.values = list(values)

    def index(self, size: int) -> int:
        return self.values.pop(0) % size

    def of(self, items: Sequence[T]) -> T:
        return items[self.index(len(items))]


def _check(name: str) -> bool:
    return not CHECKS or name in CHECKS


class Wall(RuleBasedStateMachine):
    stack: ClassVar[WallStack]

    def __init__(self) -> None:
        super().__init__()
        STATS.started = STATS.started or time.monotonic()
        STATS.sequences += 1
        self.world = World()
        self.tenants = {label: f"wall{label.lower()}-{uuid.uuid4().hex[:10]}" for label in ("A", "B")}
        self.keys: dict[Owner, str] = {}
        self.admin: dict[str, str] = {}
        self.agent_key = ""
        self.backup: tuple[Path, World] | None = None
        self.restored = False
        self.preclaimed: list[tuple[Owner, str]] = []
        self.trace: list[str] = []  # the actions of this sequence, for the failure's note
        self._reads_at, self._reads = -1, dict[Owner, list[Answer]]()  # what each user read at that step
        self._agent_reads_at, self._agent_answers = -1, list[Answer]()
        for label, user in USERS:
            self.keys[(self.tenants[label], user)] = self._key(self.tenants[label], user, ["memory_writer"])
        for label, tenant in self.tenants.items():
            self.admin[label] = self._key(tenant, f"admin-{label.lower()}", ["admin"])
        self.alice: Owner = (self.tenants["A"], "alice")
        self.agent_key = self._key(*self.alice, ["memory_writer"], agent=AGENT)

    # -- plumbing ------------------------------------------------------------------------------------------

    @property
    def api(self) -> Any:
        return self.stack.api

    def _key(self, tenant: str, user: str, roles: list[str], agent: str | None = None) -> str:
        with tenant_session(self.stack.engine, tenant) as session:
            return create_api_key(session, tenant_id=tenant, user_id=user, roles=roles, agent_id=agent)

    def _owner(self, index: int) -> Owner:
        label, user = USERS[index]
        return (self.tenants[label], user)

    def _step(self, name: str) -> None:
        STATS.steps += 1
        STATS.rules[name] += 1
        self.trace.append(name)
        STATS.trace = self.trace

    def _job(self, owner: Owner, accepted: Any) -> dict[str, Any]:
        """The deletion job once it completed or stopped for an operator."""
        assert accepted.status_code == 202, accepted.text
        return poll(self.api, self.keys[owner], f"/memory-deletions/{accepted.json()['job_id']}",
                    lambda job: job["status"] in ("completed", "failed_requires_action"), 90)

    def _wait_deletion(self, owner: Owner, accepted: Any) -> None:
        job = self._job(owner, accepted)
        assert job["status"] == "completed" and job["fully_deleted"] is True, \
            f"[deletion_completes] a deletion of the caller's own data did not complete: {job}"

    def _forget(self, owner: Owner, scope: dict[str, Any]) -> Any:
        return self.api.post("/deletion-requests", json={"deletion_request_id": f"wall-{uuid.uuid4().hex}",
                                                         "scope": scope}, headers=auth(self.keys[owner]))

    def _renew_keys(self) -> None:
        """New keys for everyone (a restore loses keys made after its backup; a subject deletion revokes)."""
        for owner in self.keys:
            self.keys[owner] = self._key(*owner, ["memory_writer"])
        for label, tenant in self.tenants.items():
            self.admin[label] = self._key(tenant, f"admin-{label.lower()}", ["admin"])
        self.agent_key = self._key(*self.alice, ["memory_writer"], agent=AGENT)

    def _set_policy(self, fields: tuple[str, ...]) -> None:
        answer = self.api.put(f"/policies/{AGENT}/todo", json={"operations": ["list", "search", "read"],
                                                               "fields": list(fields)}, headers=auth(self.admin["A"]))
        assert answer.status_code == 200, answer.text
        self.world.policy_fields = fields

    @initialize()
    def agent_policy(self) -> None:
        self._set_policy(("/title",))

    # -- writes --------------------------------------------------------------------------------------------

    @timed
    def write_memory(self, pick: Picks) -> None:
        who = pick.index(3)
        self._step("write_memory")
        self._write_memory(self._owner(who))

    def _write_memory(self, owner: Owner) -> Memory:
        marker = self.world.mark(owner)
        body = {"category": "PROFILE", "space": "USER", "content": f"wall note {marker}", "source_level": "E2",
                "source": {"source_id": "wall", "source_type": "EXPLICIT_USER_STATEMENT",
                           "captured_at": "2026-06-01T09:00:00Z"}}
        answer = self.api.post("/memory-candidates", json=body, headers=auth(self.keys[owner]))
        assert answer.status_code == 201, answer.text
        written = answer.json()
        memory = Memory(written["memory_id"], owner, [marker], written["version"], explicit=True)
        self.world.memories[memory.memory_id] = memory
        return memory

    def _live_memories(self, explicit: bool | None = None) -> list[Memory]:
        return [m for m in self.world.memories.values()
                if m.alive and (explicit is None or m.explicit == explicit)]

    @timed
    def correct_memory(self, pick: Picks) -> None:
        self._step("correct_memory")
        memory = pick.of(self._live_memories(explicit=True))
        marker = self.world.mark(memory.owner)
        answer = self.api.patch(f"/memories/{memory.memory_id}",
                                json={"expected_version": memory.version, "content": f"wall note {marker}"},
                                headers=auth(self.keys[memory.owner]))
        assert answer.status_code == 200, answer.text
        memory.version = answer.json()["version"]
        memory.markers.append(marker)

    @timed
    def post_event(self, pick: Picks) -> None:
        who = pick.index(3)
        self._step("post_event")
        owner = self._owner(who)
        marker = self.world.mark(owner)
        body = {"idempotency_key": f"wall-{uuid.uuid4().hex}", "kind": "MESSAGE",
                "payload": {"role": "user", "text": f"A note about {marker}."},
                "occurred_at": "2026-06-01T09:00:00+08:00"}
        answer = self.api.post("/memory-events", json=body, headers=auth(self.keys[owner]))
        assert answer.status_code == 201, answer.text
        event_id = answer.json()["event_id"]
        self.world.events[event_id] = Event(event_id, owner, marker)

    @timed
    def say(self, pick: Picks) -> None:
        """A user message in one of the user's sessions (a new one, possibly under an id someone named)."""
        who, saying = pick.index(3), pick.of(SAYINGS)
        self._step("say")
        owner = self._owner(who)
        own = [s for s in self.world.sessions.values() if s.owner == owner and s.alive]
        claimed = [sid for victim, sid in self.preclaimed if victim == owner and sid not in self.world.sessions]
        choice = pick.of([*own, *claimed, None])
        if isinstance(choice, Session):
            session = choice
        else:
            session_id = choice or f"ws-{uuid.uuid4().hex[:12]}"
            opened = self.api.post("/sessions", json={"session_id": session_id}, headers=auth(self.keys[owner]))
            assert opened.status_code == 201, f"opening {session_id}: {opened.status_code} {opened.text}"
            session = self.world.sessions[session_id] = Session(session_id, owner)
        marker = self.world.mark(owner)
        message = {"idempotency_key": f"wall-{uuid.uuid4().hex}", "role": "user",
                   "content": saying.format(m=marker), "created_at": "2026-07-14T14:00:00+08:00"}
        answer = self.api.post(f"/sessions/{session.session_id}/messages", json={"messages": [message]},
                               headers=auth(self.keys[owner]))
        assert answer.status_code == 201, answer.text
        body = answer.json()
        session.messages.append(Message(body["events"][0]["event_id"], marker))
        session.uncommitted += 1
        for remembered in body["remembered"]:
            self._derived(remembered["memory_id"], owner)

    def _derived(self, memory_id: str, owner: Owner) -> None:
        if memory_id not in self.world.memories:
            self.world.memories[memory_id] = Memory(memory_id, owner, [], 0, explicit=False)

    @timed
    def commit(self, pick: Picks) -> None:
        self._step("commit")
        session = pick.of([s for s in self.world.sessions.values() if s.alive and s.uncommitted])
        key = self.keys[session.owner]
        commit_id = f"wc-{uuid.uuid4().hex[:12]}"
        accepted = self.api.post(f"/sessions/{session.session_id}/commit", json={"commit_id": commit_id},
                                 headers=auth(key))
        assert accepted.status_code == 202, accepted.text
        session.commits.append(commit_id)
        session.uncommitted = 0
        body = poll(self.api, key, f"/sessions/{session.session_id}/commits/{commit_id}",
                    lambda commit: commit["status"] in TERMINAL_COMMIT, 90)
        assert body.get("status") in ("completed", "completed_with_rejections"), body
        for decision in ("created", "merged"):
            for memory in body["memories"][decision]:
                self._derived(memory["memory_id"], session.owner)

    @timed
    def put_record(self, pick: Picks) -> None:
        who = pick.index(3)
        status = pick.of(["open", "done", "cancelled"])
        self._step("put_record")
        owner = self._owner(who)
        record_id = f"wr-{uuid.uuid4().hex[:12]}"
        title, notes = self.world.mark(owner), self.world.mark(owner)
        self._put_todo(owner, record_id, {"title": f"todo {title}", "notes": f"notes {notes}", "status": status})
        self.world.records[record_id] = Record(record_id, owner, [title, notes])

    def _put_todo(self, owner: Owner, record_id: str, data: dict[str, Any]) -> None:
        answer = self.api.put(f"/records/todo/{record_id}", json={"data": data}, headers=auth(self.keys[owner]))
        assert answer.status_code == 201, answer.text

    @timed
    def put_twins(self, pick: Picks) -> None:
        """Two of alice's todos, the same but for /status and /priority (withheld unless the policy grants them)."""
        self._step("put_twins")
        title, notes = self.world.mark(self.alice), self.world.mark(self.alice)
        ids = (f"wt-{uuid.uuid4().hex[:12]}", f"wt-{uuid.uuid4().hex[:12]}")
        for record_id, (status, priority) in zip(ids, (("open", "high"), ("done", "low")), strict=True):
            self._put_todo(self.alice, record_id, {"title": f"twin {title}", "notes": f"twin notes {notes}",
                                                   "status": status, "priority": priority})
        self.world.records[ids[0]] = Record(ids[0], self.alice, [title, notes], twin=ids[1])
        self.world.records[ids[1]] = Record(ids[1], self.alice, [title, notes], twin=ids[0])

    @timed
    def change_policy(self, pick: Picks) -> None:
        fields = pick.of(POLICIES)
        self._step("change_policy")
        self._set_policy(fields)

    # -- deletions -----------------------------------------------------------------------------------------

    def _barred(self, markers: list[str]) -> None:
        self.world.set_state(markers, State.BARRED)

    def _purged(self, markers: list[str]) -> None:
        self.world.set_state(markers, State.PURGED)

    @timed
    def delete_memory(self, pick: Picks) -> None:
        """DELETE /memories/{id} with the default request id (someone may have tried to squat it)."""
        self._step("delete_memory")
        self._delete_memory(pick.of(self._live_memories()))

    def _delete_memory(self, memory: Memory) -> None:
        accepted = self.api.delete(f"/memories/{memory.memory_id}", headers=auth(self.keys[memory.owner]))
        if accepted.status_code == 404 and not memory.explicit:  # a deletion's lineage took it already, rightly
            memory.alive = False
            return
        if accepted.status_code == 409 and not _check("request_ids_owned"):
            return  # its default request id was taken by someone else (issue 23, finding 4): not judged here
        assert accepted.status_code == 202, \
            f"[request_ids_owned] the owner's DELETE /memories/{memory.memory_id}: {accepted.status_code} " \
            f"{accepted.text}"
        memory.alive = False
        self.world.deleted_memory_ids.add(memory.memory_id)
        self._barred(memory.markers)
        self._wait_deletion(memory.owner, accepted)
        self._purged(memory.markers)

    def _messages(self) -> list[tuple[Owner, Message | Event]]:
        messages: list[tuple[Owner, Message | Event]] = [
            (s.owner, m) for s in self.world.sessions.values() if s.alive for m in s.messages if m.alive]
        return [*messages, *((e.owner, e) for e in self.world.events.values() if e.alive)]

    @timed
    def delete_event(self, pick: Picks) -> None:
        """An event scope: a session message (with what was derived from it) or a standalone event."""
        self._step("delete_event")
        owner, event = pick.of(self._messages())
        accepted = self._forget(owner, {"type": "event", "event_id": event.event_id})
        event.alive = False
        self._barred([event.marker])
        self._wait_deletion(owner, accepted)
        self._purged([event.marker])

    @timed
    def delete_session(self, pick: Picks) -> None:
        self._step("delete_session")
        session = pick.of([s for s in self.world.sessions.values() if s.alive])
        accepted = self._forget(session.owner, {"type": "session", "session_id": session.session_id})
        session.alive = False
        markers = [m.marker for m in session.messages if m.alive]
        self._barred(markers)
        self._wait_deletion(session.owner, accepted)
        self._purged(markers)

    @timed
    def delete_record(self, pick: Picks) -> None:
        self._step("delete_record")
        record = pick.of([r for r in self.world.records.values() if r.alive])
        accepted = self.api.delete(f"/records/todo/{record.record_id}", headers=auth(self.keys[record.owner]))
        record.alive = False
        if record.twin is not None:  # the pair no longer differs only in withheld fields: compare no more
            twin = self.world.records[record.twin]
            twin.twin, record.twin = None, None
            # Its twin shares the title and notes: the markers stay alive in it.
            self._wait_deletion(record.owner, accepted)
            return
        self._barred(record.markers)
        self._wait_deletion(record.owner, accepted)
        self._purged(record.markers)

    @timed
    def delete_subject(self, pick: Picks) -> None:
        """A user forgets themselves: everything they ever wrote."""
        who = pick.index(3)
        self._step("delete_subject")
        owner = self._owner(who)
        accepted = self._forget(owner, {"type": "subject"})
        markers = [m for m, (o, state) in self.world.markers.items() if o == owner and state is State.LIVE]
        things: list[Memory | Session | Event | Record] = [
            *self.world.memories.values(), *self.world.sessions.values(), *self.world.events.values(),
            *self.world.records.values()]
        for thing in things:
            if thing.owner == owner:
                thing.alive = False
        self.world.deleted_memory_ids |= {m.memory_id for m in self.world.memories.values() if m.owner == owner}
        for session in self.world.sessions.values():
            if session.owner == owner:
                for message in session.messages:
                    message.alive = False
        self._barred(markers)
        self._wait_deletion(owner, accepted)
        self._purged(markers)
        if owner == self.alice:  # her agent's key was revoked with her other keys
            self.agent_key = self._key(*self.alice, ["memory_writer"], agent=AGENT)

    # -- attacks -------------------------------------------------------------------------------------------

    @timed
    def claim_foreign_session(self, pick: Picks) -> None:
        """A session-scope deletion naming a session the caller does not own (another's, or nobody's yet):
        the 404 of a missing one, writing nothing (issue 23, Deliver 2)."""
        attacker = pick.index(3)
        self._step("claim_foreign_session")
        thief = self._owner(attacker)
        others = [s for s in self.world.sessions.values() if s.owner != thief]
        others += [s for s in others if s.owner[0] == thief[0]]  # another tenant's is out of reach anyway
        victim_index = pick.of([i for i in range(3) if i != attacker])
        target = pick.of([*others, None])
        session_id = target.session_id if target is not None else f"ws-{uuid.uuid4().hex[:12]}"
        if target is None:
            self.preclaimed.append((self._owner(victim_index), session_id))
        answer = self._forget(thief, {"type": "session", "session_id": session_id})
        if answer.status_code == 202:  # whatever it hid stays the owner's in the model: nothing_crosses judges
            self._job(thief, answer)  # done before the next step
        assert not _check("ids_owned") or answer.status_code == 404, (
            f"[ids_owned] a session-scope deletion of {session_id}, not the caller's: {answer.status_code} "
            f"{answer.text}")

    @timed
    def squat_deletion_id(self, pick: Picks) -> None:
        """Another user takes the default id of a victim's memory deletion for a deletion of their own."""
        self._step("squat_deletion_id")
        # Request ids are per tenant: the victim is alice or bob, the thief the other one.
        victim = pick.of([m for m in self._live_memories(explicit=True) if m.owner[0] == self.tenants["A"]])
        thief = next(owner for owner in self.keys if owner[0] == victim.owner[0] and owner != victim.owner)
        own = self._write_memory(thief)
        squat = f"memory-{victim.memory_id}-{victim.owner[1]}"
        accepted = self.api.post("/deletion-requests", headers=auth(self.keys[thief]), json={
            "deletion_request_id": squat, "scope": {"type": "memory", "memory_id": own.memory_id}})
        if accepted.status_code == 409:  # an earlier squat took this id already (the victim's DELETE failed)
            return
        own.alive = False
        self.world.deleted_memory_ids.add(own.memory_id)
        self._barred(own.markers)
        self._wait_deletion(thief, accepted)
        self._purged(own.markers)
        self._delete_memory(victim)  # the owner's DELETE, under the default id

    # -- backup and restore --------------------------------------------------------------------------------

    # What `mnemo backup` / `mnemo restore` run (api/cli/backup.py only parses and prints around them; their
    # commands are tested in tests/deletion/test_backup.py), in this process: a CLI start costs seconds.

    @timed
    def take_backup(self, pick: Picks) -> None:
        self._step("take_backup")
        archive = self.stack.archives / f"{uuid.uuid4().hex}.dump"
        backup(self.stack.settings.require_database_url(), archive)
        self.backup = (archive, self.world.snapshot())

    @timed
    def restore_backup(self, pick: Picks) -> None:
        self._step("restore_backup")
        assert self.backup is not None
        archive, then = self.backup
        restore(self.stack.settings.require_database_url(), archive)
        self.restored = True
        self.world = self.world.restored_from(then)
        self._renew_keys()
        self._set_policy(self.world.policy_fields)

    # -- the one rule ---------------------------------------------------------------------------------------

    def _actions(self) -> list[tuple[int, Callable[[Picks], None]]]:
        """Each action with its weight, those that can run now. One rule picks among them (Hypothesis draws
        rules with no arguments first, and far more often than the rest: one per step would be put_twins)."""
        world, live = self.world, self._live_memories
        table: list[tuple[int, bool, Callable[[Picks], None]]] = [
            (6, True, self.say),
            (4, any(s.alive and s.uncommitted for s in world.sessions.values()), self.commit),
            (3, True, self.write_memory),
            (2, bool(live(explicit=True)), self.correct_memory),
            (2, True, self.post_event),
            (3, True, self.put_record),
            (2, True, self.put_twins),
            (2, True, self.change_policy),
            (3, bool(live()), self.delete_memory),
            (3, bool(self._messages()), self.delete_event),
            (3, any(s.alive for s in world.sessions.values()), self.delete_session),
            (2, any(r.alive for r in world.records.values()), self.delete_record),
            (1, True, self.delete_subject),
            (3 if any(s.owner[0] == self.tenants["A"] for s in world.sessions.values()) else 1, True,
             self.claim_foreign_session),
            (3, any(m.owner[0] == self.tenants["A"] for m in live(explicit=True)), self.squat_deletion_id),
            (3, self.backup is None, self.take_backup),
            # A restore is what the finding 2 broke: once a backup exists, weigh it so most sequences run one.
            (10, self.backup is not None and not self.restored, self.restore_backup),
        ]
        return [(weight, action) for weight, enabled, action in table if enabled]

    @rule(choice=st.integers(0, 2**16), values=st.lists(st.integers(0, 2**16), min_size=4, max_size=4))
    def act(self, choice: int, values: list[int]) -> None:
        """Every step draws the same: what the product answers (what a commit extracted, say) never changes
        how many values a step takes, which Hypothesis requires of a replayed prefix."""
        actions = self._actions()
        # Hypothesis draws 0 far more often than any other value: the step's index spreads it over the actions.
        point = (choice + 7 * len(self.trace)) % sum(weight for weight, _ in actions)
        for weight, action in actions:
            if point < weight:
                action(Picks(values))
                return
            point -= weight

    # -- invariants ----------------------------------------------------------------------------------------

    def _read_all(self) -> dict[Owner, list[Answer]]:
        """What each user (and alice's agent) reads now, once per step for every invariant that needs it."""
        if self._reads_at == STATS.steps:
            return self._reads
        started = time.monotonic()
        gone = self.world.in_state(State.BARRED, State.PURGED)
        reads: dict[Owner, list[Answer]] = {}
        searcher = list(self.keys)[STATS.steps % len(self.keys)]  # searches cost ~0.2 s: one user a step
        for owner, key in self.keys.items():
            others = [m for m, (o, state) in self.world.markers.items() if o != owner and state is State.LIVE]
            probes = [*gone[-20:], *random.Random(STATS.steps).sample(others, min(4, len(others)))]
            reader = Reader(self.api, key)
            read_everything(reader, self.world, owner, probes, random.Random(f"{STATS.steps}-{owner}"),
                            searches=owner == searcher)
            reads[owner] = reader.answers
        self._reads_at, self._reads = STATS.steps, reads
        STATS.seconds["(reads)"] += time.monotonic() - started
        return reads

    def _object_reads(self, answers: list[Answer]) -> list[tuple[str, Owner, bool | None, int]]:
        """(path, whose, alive, status) of each object read: memories, sessions, records. ``alive`` is None
        for a memory a commit extracted and no one deleted (a deletion's lineage may take it, rightly)."""
        objects: dict[str, tuple[Owner, bool | None]] = {}
        for memory in self.world.memories.values():
            alive = memory.alive if memory.explicit or not memory.alive else None
            objects[f"GET /memories/{memory.memory_id}"] = (memory.owner, alive)
        objects.update({f"GET /sessions/{s.session_id}": (s.owner, s.alive) for s in self.world.sessions.values()})
        objects.update({f"GET /records/todo/{r.record_id}": (r.owner, r.alive) for r in self.world.records.values()})
        return [(a.path, *objects[a.path], a.status) for a in answers if a.path in objects]

    def _agent_reads(self) -> list[Answer]:
        if self._agent_reads_at == STATS.steps:
            return self._agent_answers
        reader = Reader(self.api, self.agent_key)
        reader.get("/resources/todo")
        twins = [record.markers[0] for record in self.world.records.values() if record.twin is not None]
        if twins:  # one search for every pair: any of the words matches
            reader.post("/resources/search", {"query": " ".join(sorted(set(twins))[-20:]), "top_k": 50})
        self._agent_reads_at, self._agent_answers = STATS.steps, reader.answers
        return reader.answers

    @invariant()
    @timed
    def deleted_unreadable(self) -> None:
        if not _check("deleted_unreadable"):
            return
        STATS.checks += 1
        gone = set(self.world.in_state(State.BARRED, State.PURGED))
        for owner, answers in self._read_all().items():
            for answer in answers:
                leaked = answer.markers & gone
                assert not leaked, f"[deleted_unreadable] {owner} read deleted {sorted(leaked)} at {answer.path}: " \
                                   f"{answer.body}"
            for path, whose, alive, status in self._object_reads(answers):
                if whose == owner and alive is False:
                    assert status == 404, f"[deleted_unreadable] {owner} {path}: {status}, deleted"
        for answer in self._agent_reads():
            assert not answer.markers & gone, f"[deleted_unreadable] the agent read {answer.path}: {answer.body}"

    @invariant()
    @timed
    def residue_empty(self) -> None:
        if not _check("residue_empty"):
            return
        STATS.checks += 1
        purged = self.world.in_state(State.PURGED)
        copies = [*scan_database(self.stack.conninfo, purged), *scan_files(self.stack.data_dir, purged)]
        assert not copies, "[residue_empty] completed deletions left copies:\n" + "\n".join(map(str, copies))

    @invariant()
    @timed
    def nothing_crosses(self) -> None:
        if not _check("nothing_crosses"):
            return
        STATS.checks += 1
        for owner, answers in self._read_all().items():
            for answer in answers:
                foreign = {m for m in answer.markers if m in self.world.markers and self.world.markers[m][0] != owner}
                assert not foreign, f"[nothing_crosses] {owner} read {sorted(foreign)} (owned by " \
                                    f"{[self.world.markers[m][0] for m in foreign]}) at {answer.path}: {answer.body}"
            for path, whose, alive, status in self._object_reads(answers):
                if whose != owner:
                    assert status == 404, f"[nothing_crosses] {owner} {path}: {status}, another's object"
                elif alive:
                    assert status == 200, f"[nothing_crosses] {owner}'s own live object is hidden: {path} {status}"
        for answer in self._agent_reads():
            foreign = {m for m in answer.markers if self.world.markers[m][0] != self.alice}
            assert not foreign, f"[nothing_crosses] alice's agent read {sorted(foreign)} at {answer.path}"

    @invariant()
    @timed
    def withheld_fields_hidden(self) -> None:
        if not _check("withheld_fields_hidden"):
            return
        if {"/status", "/priority"} & set(self.world.policy_fields):
            return  # the twins may differ in what the agent reads
        STATS.checks += 1
        answers = self._agent_reads()
        listed = {item["ref"]: item for a in answers if a.path.startswith("GET") and a.status == 200
                  for item in a.body["items"]}
        for record in self.world.records.values():
            if record.twin is None or not record.alive:
                continue
            mine, twin = f"todo:{record.record_id}", f"todo:{record.twin}"
            if mine in listed and twin in listed:
                assert _seen(listed[mine]) == _seen(listed[twin]), \
                    f"[withheld_fields_hidden] list: {listed[mine]} vs {listed[twin]} under {self.world.policy_fields}"
            search = next(a for a in answers if a.path.startswith("POST"))
            hits = {hit["ref"]: hit for hit in search.body.get("items", [])}
            assert (mine in hits) == (twin in hits), f"[withheld_fields_hidden] search: {search.body}"
            if mine in hits:
                a, b = hits[mine], hits[twin]
                assert _seen(a, "score") == _seen(b, "score") and abs(a["score"] - b["score"]) < 2e-6, \
                    f"[withheld_fields_hidden] search under {self.world.policy_fields}: {a} vs {b}"


def _seen(item: dict[str, Any], *also: str) -> dict[str, Any]:
    """What an item says beyond which record it is and when it changed (recency: the score within 2e-6)."""
    return {k: v for k, v in item.items() if k not in {"ref", "version", "updated_at", *also}}


def test_the_wall(wall_stack: WallStack) -> None:
    Wall.stack = wall_stack
    run_seed = int(os.environ.get("MNEMO_WALL_SEED") or random.getrandbits(32))
    budget = settings(
        max_examples=int(os.environ.get("MNEMO_WALL_EXAMPLES", "8")),
        stateful_step_count=int(os.environ.get("MNEMO_WALL_STEPS", "12")),
        deadline=None, derandomize=False, database=None, print_blob=True,
        # Shrinking replays sequences on the real stack (minutes): on when looking for a minimal sequence.
        phases=[Phase.generate, *([Phase.shrink] if os.environ.get("MNEMO_WALL_SHRINK") else [])],
        suppress_health_check=list(HealthCheck),
    )
    test = seed(run_seed)(get_state_machine_test(Wall, settings=budget, _min_steps=budget.stateful_step_count // 2))
    try:
        test()
    except BaseException as failure:
        failure.add_note(f"wall seed: MNEMO_WALL_SEED={run_seed}; {STATS.line()}")
        failure.add_note(f"the last sequence's actions: {' -> '.join(STATS.trace)}")
        raise
    finally:
        print(f"\nwall seed {run_seed}: {STATS.line()}")


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
