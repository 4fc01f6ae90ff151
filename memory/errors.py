"""Typed domain errors: a machine code, a human sentence and the HTTP status they map to."""

from __future__ import annotations

from typing import Any


class MnemoError(Exception):
    """Base of every error mnemo reports to a caller."""

    code: str = "error"
    http_status: int = 400

    def __init__(self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details or {}


class NotFound(MnemoError):
    """Missing, or not visible to the caller: the two are deliberately indistinguishable."""

    code = "not_found"
    http_status = 404


class Unauthorized(MnemoError):
    code = "unauthorized"
    http_status = 401


class Forbidden(MnemoError):
    """The caller can see the object but lacks the role for this action."""

    code = "forbidden"
    http_status = 403


class Conflict(MnemoError):
    code = "conflict"
    http_status = 409


class VersionConflict(Conflict):
    code = "version_conflict"


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"


class InvalidInput(MnemoError):
    code = "invalid_input"
    http_status = 422
