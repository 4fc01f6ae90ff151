"""Signed continuation cursors of list and read (seed 000 §5).

A cursor is ``<key id>.<payload>.<signature>``: the payload (base64url of compact JSON) says who may use
it (digests of tenant+user and of caller+audience, never the ids themselves), for what (operation,
type, ref, a digest of the filters), under which readable field set (its fingerprint), at which
position, and of which source version; the signature is HMAC-SHA256 of ``<key id>.<payload>`` under
that key. Several keys verify (rotation: old cursors keep working while the new first key signs).

Each misuse is its own typed error, checked in this order: a garbled or tampered cursor
(``cursor_invalid``), another user's (``cursor_other_user``), another caller's or audience's
(``cursor_other_caller``), one of another operation, type, ref or filters (``cursor_mismatch``), a
field set changed since it was issued (``permissions_changed``), then — by the reader, which knows the
source — a source changed between pages (``source_changed``) and a position past the end
(``cursor_past_end``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.errors import Conflict, InvalidInput
from memory.resources.access import Access, Grant
from memory.resources.declarations import Operation

KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
MIN_SECRET_BYTES = 32
MAX_CURSOR_CHARS = 2_048
"""A cursor we issue is far shorter (≈ 400 characters); anything longer is not ours."""


class CursorInvalid(InvalidInput):
    code = "cursor_invalid"


class CursorOtherUser(InvalidInput):
    code = "cursor_other_user"


class CursorOtherCaller(InvalidInput):
    code = "cursor_other_caller"


class CursorMismatch(InvalidInput):
    code = "cursor_mismatch"


class CursorPastEnd(InvalidInput):
    code = "cursor_past_end"


class SourceChanged(Conflict):
    code = "source_changed"


class PermissionsChanged(Conflict):
    code = "permissions_changed"


class CursorKeyError(ValueError):
    """``MNEMO_CURSOR_KEYS`` cannot be used: the process refuses to start."""


@dataclass(frozen=True)
class CursorKeys:
    """Signing keys, by id; the first signs, every one verifies."""

    keys: tuple[tuple[str, bytes], ...]

    @classmethod
    def parse(cls, spec: str) -> CursorKeys:
        """``id:secret[,id:secret...]``, each secret base64url of at least 32 random bytes."""
        keys: list[tuple[str, bytes]] = []
        for item in spec.split(","):
            key_id, sep, encoded = item.strip().partition(":")
            if not sep or not KEY_ID.fullmatch(key_id):
                raise CursorKeyError("MNEMO_CURSOR_KEYS is `id:secret,...`; an id is 1-32 letters, digits, '_' or '-'")
            try:
                secret = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (binascii.Error, ValueError) as exc:
                raise CursorKeyError(f"MNEMO_CURSOR_KEYS: the secret of key {key_id!r} is not base64url") from exc
            if len(secret) < MIN_SECRET_BYTES:
                raise CursorKeyError(f"MNEMO_CURSOR_KEYS: the secret of key {key_id!r} has fewer than 32 bytes")
            if any(key_id == known for known, _ in keys):
                raise CursorKeyError(f"MNEMO_CURSOR_KEYS: key id {key_id!r} is given twice")
            keys.append((key_id, secret))
        return cls(tuple(keys))

    @classmethod
    def of_data_dir(cls, data_dir: Path) -> CursorKeys:
        """For ``mnemo dev`` and tests: one key generated once per data directory and kept in it (mode 0600)."""
        path = data_dir / "cursor.key"
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            encoded = base64.urlsafe_b64encode(secrets.token_bytes(MIN_SECRET_BYTES)).decode().rstrip("=")
            try:
                with open(path, "x", encoding="ascii", opener=lambda name, flags: os.open(name, flags, 0o600)) as file:
                    file.write(f"dev:{encoded}\n")
            except FileExistsError:  # another process of the same data directory made it first
                pass
        return cls.parse(path.read_text(encoding="ascii").strip())

    def sign(self, payload: Mapping[str, Any]) -> str:
        key_id, secret = self.keys[0]
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        signed = f"{key_id}.{body.decode().rstrip('=')}"
        return f"{signed}.{_mac(secret, signed)}"

    def verify(self, cursor: str) -> dict[str, Any]:
        """The payload of a cursor one of the keys signed; anything else is :class:`CursorInvalid`."""
        parts = cursor.split(".") if len(cursor) <= MAX_CURSOR_CHARS else []
        if len(parts) != 3:
            raise CursorInvalid("the cursor is not one this service issued: pass back next_cursor unchanged")
        key_id, body, mac = parts
        secret = dict(self.keys).get(key_id)
        if secret is None or not hmac.compare_digest(mac, _mac(secret, f"{key_id}.{body}")):
            raise CursorInvalid("the cursor's signature does not verify: it was altered, or its key was retired")
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (binascii.Error, ValueError) as exc:  # signed by us, so only a retired format could get here
            raise CursorInvalid("the cursor cannot be read") from exc
        if not isinstance(payload, dict):
            raise CursorInvalid("the cursor cannot be read")
        return payload


def _mac(secret: bytes, signed: str) -> str:
    digest = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _digest(*parts: str | None) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Binding:
    """What a cursor is for: checked whole against the request presenting it."""

    operation: Operation
    resource: str
    ref: str | None
    filters: Mapping[str, str]


def issue(keys: CursorKeys, access: Access, grant: Grant, binding: Binding, position: Any,
          source_version: int | str | None) -> str:
    return keys.sign({
        "u": _digest(access.principal.tenant_id, access.principal.user_id),
        "c": _digest(access.agent_id, access.run_id, access.audience.value),
        "op": binding.operation.value, "t": binding.resource, "r": binding.ref,
        "f": _digest(json.dumps(sorted(binding.filters.items()))),
        "fp": grant.fingerprint(), "p": position, "v": source_version,
    })


def redeem(keys: CursorKeys, cursor: str, access: Access, grant: Grant, binding: Binding
           ) -> tuple[Any, int | str | None]:
    """The position and source version of a cursor issued to this caller for this binding and field set (for a
    caller who may not know the version, a digest of the data it reads: :meth:`memory.resources.derived.Shown.mark`)."""
    payload = keys.verify(cursor)
    if payload.get("u") != _digest(access.principal.tenant_id, access.principal.user_id):
        raise CursorOtherUser("this cursor was issued to another user")
    if payload.get("c") != _digest(access.agent_id, access.run_id, access.audience.value):
        raise CursorOtherCaller("this cursor was issued to another caller (agent, run or audience)")
    same_filters = payload.get("f") == _digest(json.dumps(sorted(binding.filters.items())))
    continues = {"cursor": {"operation": payload.get("op"), "resource": payload.get("t"), "ref": payload.get("r"),
                            "same_filters": same_filters}}
    expected = {"op": binding.operation.value, "t": binding.resource, "r": binding.ref}
    for key, value in expected.items():
        if payload.get(key) != value:
            raise CursorMismatch(
                f"this cursor continues {payload.get('op')} of {payload.get('r') or payload.get('t')}, not"
                f" {binding.operation.value} of {binding.ref or binding.resource}",
                details=continues,
            )
    if not same_filters:
        raise CursorMismatch("this cursor continues a list with other filters: send the same filters with it",
                             details=continues)
    if payload.get("fp") != grant.fingerprint():
        raise PermissionsChanged("the fields you may read changed since this cursor was issued: start again")
    version = payload.get("v")
    return payload.get("p"), version if isinstance(version, int | str) and not isinstance(version, bool) else None
