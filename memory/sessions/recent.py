"""The messages a window reads: backwards from the session's end, a page at a time, only as far as its budget.

Issue 23, finding 7: a window read the session's newest :data:`memory.sessions.store.WINDOW_LOOKBACK` messages
whatever its budget, so eight parallel windows over a 2,000-message CJK session (12.5 s each) took another
tenant's p95 to seconds. A window of ``budget_tokens`` can hold at most that many tokens of messages, so it
reads pages of :data:`WINDOW_PAGE` sequence numbers from the end (a range of the ``(tenant_id, session_id,
sequence_no)`` index) until what it read costs :data:`LOOKBACK_FACTOR` times the budget as rendered — the
slack lets an older message of higher priority (a correction, a message sharing the request's words) still
displace newer chit-chat — or the session's start, or the lookback. The state (task, entities, constraints,
pending questions, corrections) is derived from the messages read; older turns reach the model through the
summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from memory import offload
from memory.identity.auth import PrincipalContext
from memory.sessions import store
from memory.sessions.messages import StageMessage
from memory.sessions.state import derive_state
from memory.sessions.window import build_window, rendered_tokens

WINDOW_PAGE = 100
"""Sequence numbers read per statement."""
LOOKBACK_FACTOR = 2
"""A window reads messages costing up to this many times its budget (then stops at the page's end)."""

PageReader = Callable[[int, int], Sequence[StageMessage]]
"""The live messages with sequence numbers in ``[first, last]``, in order."""


def tail_for_budget(read: PageReader, last: int, budget_tokens: int, *, page: int = WINDOW_PAGE,
                    lookback: int = store.WINDOW_LOOKBACK) -> tuple[StageMessage, ...]:
    """The newest messages up to ``last``, read a page at a time from the end until they cost
    :data:`LOOKBACK_FACTOR` × ``budget_tokens`` (or the first message, or ``lookback`` numbers back), in order."""
    floor = max(1, last - lookback + 1)
    pages: list[Sequence[StageMessage]] = []
    tokens, upper = 0, last
    while upper >= floor and tokens < LOOKBACK_FACTOR * budget_tokens:
        lower = max(floor, upper - page + 1)
        messages = read(lower, upper)
        pages.append(messages)
        tokens += sum(rendered_tokens(message) for message in messages)
        upper = lower - 1
    return tuple(message for messages in reversed(pages) for message in messages)


OFFLOAD_FROM_TOKENS = 20_000
"""A window of at least this budget is read and assembled in the CPU pool (:mod:`memory.offload`): a 100,000-token
one costs ~0.2 s of CPU, which in the API's own interpreter slowed every other tenant's request (issue 23, finding
7). A smaller one is made in place: it would wait behind the large ones in the pool."""


def session_window(engine: Engine, principal: PrincipalContext, session_id: str, budget_tokens: int
                   ) -> dict[str, Any]:
    """The caller's session's window within ``budget_tokens``, as the API answers it: a large one whole (its reads
    too) in the CPU pool when the process has one."""
    return offload.in_tenant(engine, principal.tenant_id, window_of, principal, session_id, budget_tokens,
                             inline=budget_tokens < OFFLOAD_FROM_TOKENS)


def window_of(session: Session, principal: PrincipalContext, session_id: str, budget_tokens: int) -> dict[str, Any]:
    """The caller's session's window within ``budget_tokens``, as the API answers it (another user's session is a
    404)."""
    chat = store.get_session(session, principal, session_id)

    def read(first: int, last: int) -> Sequence[StageMessage]:
        return store.stage_messages(session, chat, first, last)

    messages = store.answered_only(tail_for_budget(read, chat.next_sequence - 1, budget_tokens))
    window = build_window(messages, budget_tokens=budget_tokens, state=derive_state(messages, task_id=chat.task_id),
                          profile=store.current_profile(session, principal, chat))
    return window.as_json()


OFFLOAD_FROM_MESSAGES = 500
"""A session this long has its state derived in the CPU pool: the state reads the newest
:data:`memory.sessions.store.WINDOW_LOOKBACK` messages (2,000 CJK messages: ~0.1 s of CPU), as a large window does."""


def session_state(engine: Engine, principal: PrincipalContext, session_id: str, length: int
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The state (task, entities, constraints, pending questions) of the caller's session of ``length`` messages, and
    its profile re-read, as the API answers them: for a long session in the CPU pool when the process has one."""
    return offload.in_tenant(engine, principal.tenant_id, state_of, principal, session_id,
                             inline=length < OFFLOAD_FROM_MESSAGES)


def state_of(session: Session, principal: PrincipalContext, session_id: str
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The session's state derived from its newest messages, and its profile, as JSON."""
    chat = store.get_session(session, principal, session_id)
    recent = max(1, chat.next_sequence - store.WINDOW_LOOKBACK)
    messages = store.answered_only(store.stage_messages(session, chat, recent))
    profile = store.current_profile(session, principal, chat)
    return derive_state(messages, task_id=chat.task_id).as_json(), [entry.as_json() for entry in profile]
