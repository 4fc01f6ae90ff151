"""The probe's tests reuse the session tests' API-with-worker fixture (one home for it)."""

from tests.sessions.conftest import sessions_api

__all__ = ["sessions_api"]
