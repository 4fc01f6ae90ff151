"""``mnemo import-artifacts`` and ``mnemo dev``'s start: an older data directory's files move into the artifact store.

Task artifacts and record bodies (:mod:`memory.legacy_artifacts`) and the publications of each directory
destination (:meth:`activities.stores.StoredDestination.import_directory`): nothing reads those directories
any more, so leaving them behind would lose drafts, bodies and the record of what was published.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from activities.stores import StoredDestination
from memory.artifact_store import ArtifactStore
from memory.legacy_artifacts import Imported, import_data_dir

PUBLICATIONS_DIR = "publications"


@dataclass(frozen=True)
class Report:
    files: Imported
    publications: int

    def summary(self, source: Path) -> str:
        left = (f"; {len(self.files.left)} file(s) whose bytes do not match their name left in place"
                if self.files.left else "")
        return (f"moved {self.files.moved} artifact file(s) ({self.files.bytes} bytes) and {self.publications} "
                f"publication(s) of {source} into the artifact store{left}")


def pending(data_dir: Path) -> bool:
    """Whether ``data_dir`` still holds anything to import."""
    from memory.legacy_artifacts import pending as files_pending

    return files_pending(data_dir) or (data_dir / PUBLICATIONS_DIR).is_dir()


def import_all(data_dir: Path, engine: Engine, root: ArtifactStore) -> Report:
    files = import_data_dir(data_dir, root)
    publications = 0
    folder = data_dir / PUBLICATIONS_DIR
    for destination in sorted(folder.iterdir()) if folder.is_dir() else []:
        if destination.is_dir():
            publications += StoredDestination(destination.name, engine, root).import_directory(destination)
            if not any(destination.rglob("*")):
                destination.rmdir()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return Report(files, publications)


__all__ = ["Report", "import_all", "pending"]
