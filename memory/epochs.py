"""Per-subject deletion epochs: the fence between a deletion barrier and late writers.

Every write about a user takes a share lock on that user's epoch row; a deletion
barrier bumps it under an exclusive lock. So writes and barriers serialise, and a
writer that captured the epoch earlier (an activity running in a workflow) finds
out, at write time, that a deletion happened in between.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import Conflict
from memory.models import SubjectEpoch


class StaleEpoch(Conflict):
    code = "stale_deletion_epoch"


def current_epoch(session: Session, tenant_id: str, user_id: str) -> int:
    """The epoch now, share-locked until the transaction ends (a barrier waits for us)."""
    session.execute(
        insert(SubjectEpoch).values(tenant_id=tenant_id, user_id=user_id, deletion_epoch=0).on_conflict_do_nothing()
    )
    return int(
        session.execute(
            select(SubjectEpoch.deletion_epoch)
            .where(SubjectEpoch.tenant_id == tenant_id, SubjectEpoch.user_id == user_id)
            .with_for_update(read=True)
        ).scalar_one()
    )


def guard_write(session: Session, tenant_id: str, user_id: str, held_epoch: int | None) -> None:
    """Refuse a write by someone holding an epoch older than the subject's current one."""
    epoch = current_epoch(session, tenant_id, user_id)
    if held_epoch is not None and held_epoch != epoch:
        raise StaleEpoch(
            f"data of {user_id} was deleted after this writer started (epoch {held_epoch}, now {epoch}); "
            "the write is refused so deleted data cannot come back",
            details={"held_epoch": held_epoch, "current_epoch": epoch},
        )


def bump_epoch(session: Session, tenant_id: str, user_id: str) -> int:
    """Increment the subject's epoch (exclusive row lock) and return the new value."""
    statement = (
        insert(SubjectEpoch)
        .values(tenant_id=tenant_id, user_id=user_id, deletion_epoch=1)
        .on_conflict_do_update(
            index_elements=["tenant_id", "user_id"], set_={"deletion_epoch": SubjectEpoch.deletion_epoch + 1}
        )
        .returning(SubjectEpoch.deletion_epoch)
    )
    return int(session.execute(statement).scalar_one())
