"""What a batch write may hold: one limit for every route that writes many items in one transaction."""

from __future__ import annotations

MAX_BATCH_ITEMS = 500
"""Items (events, memories, a session's messages) one request writes at most, in one transaction: past it a
request is refused whole (a 422), so one caller's transaction stays short beside everyone else's."""
