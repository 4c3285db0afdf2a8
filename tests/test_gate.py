"""The start gate: all handshakes at once while they succeed, fewer after timeouts; no processes."""

from __future__ import annotations

import anyio
import pytest

from mcpd.supervisor.gate import MIN_WINDOW, StartGate

pytestmark = pytest.mark.anyio


async def test_window_halves_on_timeouts_and_widens_on_success() -> None:
    """Each timed-out handshake halves the window (never below the minimum); each success adds one."""
    gate = StartGate(16)
    gate.timed_out()
    gate.timed_out()
    assert gate.window == 4
    for _ in range(10):
        gate.timed_out()
    assert gate.window == MIN_WINDOW
    gate.succeeded()
    assert gate.window == MIN_WINDOW + 1
    for _ in range(100):
        gate.succeeded()
    assert gate.window == 16


async def test_enter_waits_for_a_place_and_a_release_lets_the_next_in() -> None:
    """With the window full, the next server waits until one of those in flight is through."""
    gate = StartGate(2, hold=3600)
    first, _second = await gate.enter(), await gate.enter()
    entered = anyio.Event()

    async def third() -> None:
        await gate.enter()
        entered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(third)
        await anyio.wait_all_tasks_blocked()
        assert not entered.is_set()
        first.release()
        first.release()  # releasing twice frees one place only
        await entered.wait()
    assert gate.window == 2


async def test_a_hung_handshake_gives_up_its_place_after_hold() -> None:
    """A slot whose handshake never ends is freed by its expiry, so it cannot block the queue."""
    gate = StartGate(2, hold=0.0)
    slot = await gate.enter()
    await slot.expire()
    await gate.enter()
    await gate.enter()
