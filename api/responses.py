"""HTTP responses the API and the console send alike (the console adds its own headers on top)."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.responses import StreamingResponse

from memory.tasks.models import TaskArtifact


def artifact_response(sha256: str, artifact: TaskArtifact, chunks: Iterator[bytes]) -> StreamingResponse:
    """A task artifact's bytes, streamed from the artifact store under its name, type, size and sha256 (ETag)."""
    return StreamingResponse(
        chunks,  # a sync iterator: Starlette pulls each chunk in its threadpool
        media_type=artifact.media_type,
        headers={"Content-Disposition": f'inline; filename="{artifact.name}"', "ETag": f'"{sha256}"',
                 "Content-Length": str(artifact.size_bytes)},
    )
