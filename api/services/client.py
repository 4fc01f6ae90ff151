"""How a service reaches Temporal: through a lazy client source, and a 503 when it cannot.

A service is handed a :data:`ClientSource` rather than a client so that it can answer its 404s and 409s from
the database before it connects (issue 12, finding 11): a colleague's task is refused as fast as a missing
one, whether or not Temporal is up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio.client import Client

from memory.errors import MnemoError

ClientSource = Callable[[], Awaitable[Client]]
"""Connects (or returns the connected client) when first awaited; raises :class:`TemporalUnavailable`."""


class TemporalUnavailable(MnemoError):
    """Temporal could not be reached for a route that needs it."""

    code = "temporal_unavailable"
    http_status = 503
