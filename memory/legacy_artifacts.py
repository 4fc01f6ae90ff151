"""Moving a data directory's artifact files (mnemo before issue 24) into the artifact store, once.

Before, task artifacts were files under ``<data dir>/artifacts/<sha[:2]>/<sha>`` and record bodies under
``<data dir>/record-artifacts/<tenant hash>/<sha[:2]>/<sha>``, on the disk of whichever process wrote them.
Nothing reads those directories any more, so on upgrade their files are moved in: each is checked against its
name, stored, and only then deleted (a deleted subject's bytes must not linger where no residue scan looks).
A file whose bytes do not match its name (a write that stopped midway, a corrupted one) is not imported and
stays, counted, for the operator to look at. Running it again moves what is left: it is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memory.artifact_store import ArtifactStore, sha256_hex
from memory.resources.bodies import NAMESPACE as RECORDS
from memory.tasks.artifacts import task_store

TASKS_DIR = "artifacts"
RECORDS_DIR = "record-artifacts"


@dataclass
class Imported:
    moved: int = 0
    bytes: int = 0
    left: list[Path] = field(default_factory=list)
    """Files not imported (their bytes do not match their name)."""


def _folders(data_dir: Path, root: ArtifactStore) -> Iterator[tuple[Path, ArtifactStore]]:
    yield data_dir / TASKS_DIR, task_store(root)
    records = data_dir / RECORDS_DIR
    for tenant in sorted(records.iterdir()) if records.is_dir() else []:
        if tenant.is_dir():
            yield tenant, root.within(f"{RECORDS}/{tenant.name}")


def pending(data_dir: Path) -> bool:
    """Whether the data directory still holds artifact files to import."""
    return any(path.is_file() for folder in (data_dir / TASKS_DIR, data_dir / RECORDS_DIR) if folder.is_dir()
               for path in folder.rglob("*"))


def import_data_dir(data_dir: Path, root: ArtifactStore) -> Imported:
    """Move every artifact file of ``data_dir`` into ``root``; empty directories are removed after."""
    done = Imported()
    for folder, store in _folders(data_dir, root):
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            content = path.read_bytes()
            if sha256_hex(content) != path.name:
                done.left.append(path)
                continue
            store.put(content)
            path.unlink()
            done.moved += 1
            done.bytes += len(content)
        for directory in [*sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True), folder]:
            if not any(directory.iterdir()):
                directory.rmdir()
    for folder in (data_dir / RECORDS_DIR, data_dir / TASKS_DIR):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return done


__all__ = ["Imported", "import_data_dir", "pending"]
