"""activities.db.heartbeat_while: an async activity's long wait answers what it waited for, or its exception, however
many heartbeat periods it spans."""

from __future__ import annotations

import asyncio

import pytest

from activities.db import heartbeat_while


async def _late(value: int, seconds: float) -> int:
    await asyncio.sleep(seconds)
    return value


async def _fails(seconds: float) -> int:
    await asyncio.sleep(seconds)
    raise ValueError("the pool's work failed")


def test_a_wait_spanning_several_heartbeat_periods_answers_its_value() -> None:
    assert asyncio.run(heartbeat_while(_late(7, 0.35), every_seconds=0.1)) == 7


def test_a_wait_that_fails_raises_its_exception() -> None:
    with pytest.raises(ValueError, match="the pool's work failed"):
        asyncio.run(heartbeat_while(_fails(0.25), every_seconds=0.1))
