"""HTTP responses the API and the console send alike (the console adds its own headers on top)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

from fastapi.responses import StreamingResponse

from memory.tasks.models import TaskArtifact


def disposition(name: str) -> str:
    """``inline`` under the artifact's name, any name (RFC 6266): an ASCII fallback and the exact name encoded
    (RFC 5987), since a header carries Latin-1 only — a name in another script made every download a 500."""
    fallback = re.sub(r'[^ -~]|["\\]', "_", name)
    return f"inline; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def artifact_response(sha256: str, artifact: TaskArtifact, chunks: Iterator[bytes]) -> StreamingResponse:
    """A task artifact's bytes, streamed from the artifact store under its name, type, size and sha256 (ETag)."""
    return StreamingResponse(
        chunks,  # a sync iterator: Starlette pulls each chunk in its threadpool
        media_type=artifact.media_type,
        headers={"Content-Disposition": disposition(artifact.name), "ETag": f'"{sha256}"',
                 "Content-Length": str(artifact.size_bytes)},
    )
