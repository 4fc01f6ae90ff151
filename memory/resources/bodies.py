"""Long fields of a record (a transcript's text) live in the artifact store, addressed by sha256.

A declared long field whose value reaches :data:`LONG_CHARS` characters (a string's own length, any
other value's compact JSON) is stored as its JSON encoding under the sha256 of it; PostgreSQL keeps the
rest of the record and the field's metadata (:class:`memory.resources.models.ResourceArtifact`). The
store is not part of the database transaction: a write checks what it can first (the record's lock, its
tombstone, its version), then writes the bytes (idempotent by name) under their lock, before its transaction
names them, so a committed record never names bytes that are missing; a write that fails after that deletes
again the bytes it wrote that no record references (:func:`memory.resources.records.save_record`). Only a
crash between the two leaves unreferenced bytes behind, which a subject deletion sweeps.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from memory.artifact_store import ArtifactStore, ArtifactUnavailable, read
from memory.errors import MnemoError
from memory.resources import pointers
from memory.resources.declarations import Declaration

LONG_CHARS = 100_000


class BodyUnavailable(MnemoError):
    """A record names a long field whose bytes the store no longer has, or has corrupted: never served partly."""

    code = "record_body_unavailable"
    http_status = 500


@dataclass(frozen=True)
class Offloaded:
    path: str
    sha256: str
    size_bytes: int
    characters: int


NAMESPACE = "records"


def record_store(root: ArtifactStore, tenant_id: str) -> ArtifactStore:
    """Record bodies have a namespace of their own, apart from the report tasks' artifacts: deleting one never
    touches bytes a task still names. Each tenant has its own namespace (named by the sha256 of the tenant
    id, which may hold any character): whether a body is still referenced is asked of that tenant's rows
    only, which is all row-level security lets a deletion see, so the same bytes stored by two tenants are
    two artifacts, and forgetting one tenant's never removes the other's."""
    return root.within(f"{NAMESPACE}/{hashlib.sha256(tenant_id.encode()).hexdigest()}")


def encode(value: Any) -> str:
    """The canonical JSON of a value: what is hashed (replays) and what the store holds."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _length(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(encode(value))


@dataclass(frozen=True)
class Body:
    """A long value taken out of a record, with the bytes the store holds for it."""

    offloaded: Offloaded
    content: bytes


def split(declaration: Declaration, data: dict[str, Any]) -> tuple[dict[str, Any], list[Body]]:
    """A copy of ``data`` without its long values, and those values' bytes; nothing is written yet."""
    inline = copy.deepcopy(data)
    bodies: list[Body] = []
    for path in declaration.long_fields:
        found = [value for _, value in pointers.values_at(inline, path)]
        if not found or _length(found[0]) < LONG_CHARS:
            continue
        pointers.pop_at(inline, path)
        text = encode(found[0])
        content = text.encode("utf-8")
        bodies.append(Body(Offloaded(path, hashlib.sha256(content).hexdigest(), len(content), len(text)), content))
    return inline, bodies


def restore(store: ArtifactStore, inline: dict[str, Any], offloaded: list[Offloaded]) -> dict[str, Any]:
    """The whole data again: ``inline`` with each long value read back (checked against its sha256)."""
    data = copy.deepcopy(inline)
    for body in offloaded:
        try:
            value = json.loads(read(store, body.sha256).decode("utf-8"))
        except (ArtifactUnavailable, ValueError) as exc:
            raise BodyUnavailable(
                f"the long field {body.path} (artifact {body.sha256}) cannot be read from the artifact store: {exc}"
            ) from exc
        pointers.put_at(data, body.path, value)
    return data
