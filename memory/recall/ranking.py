"""Stable rank: score first, then explicit tie-breakers ending in the memory id.

Totals are rounded before comparing so floating-point noise from a different
summation order can never swap two memories; the same input always gives the
same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Rankable(Protocol):
    @property
    def rank_key(self) -> tuple[float, float, float, int, str]: ...


T = TypeVar("T", bound=Rankable)


def rank_key(
    total: float, relevance: float, authority: float, revision: int, memory_id: str
) -> tuple[float, float, float, int, str]:
    """Higher total, then higher relevance, then higher authority, then newer revision, then memory id ascending."""
    return (-round(total, 9), -round(relevance, 9), -round(authority, 9), -revision, memory_id)


def stable_rank(items: Sequence[T]) -> list[T]:
    return sorted(items, key=lambda item: item.rank_key)
