"""Time as the event loop tells it: wall-clock instants that fake time (looptime) moves too. No I/O.

Every wait, deadline and timestamp in cutover reads this clock, never `time.time()`, so that a 30-minute
startup runs in milliseconds under test and elapsed times are exact. Used by the phases, the wait, the Lease.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "Now"]

Now = Callable[[], datetime]  # a source of wall-clock instants, e.g. Clock().now

_ANCHORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[datetime, float]] = \
    weakref.WeakKeyDictionary()


class Clock:
    """Wall-clock instants derived from the event loop's clock, so that fake time moves both.

    Anchored once per loop: every Clock of a process agrees, also when fake time has run ahead of
    the real clock (two anchors taken at different loop times would disagree by that much)."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._loop not in _ANCHORS:
            _ANCHORS[self._loop] = (datetime.now(UTC), self._loop.time())
        self._wall0, self._loop0 = _ANCHORS[self._loop]

    def now(self) -> datetime:
        return self._wall0 + timedelta(seconds=self._loop.time() - self._loop0)

    @staticmethod
    def anchored() -> datetime | None:
        """What a Clock of the running loop would say now, if one was made already (else None): for clocks kept
        elsewhere (the simulated cluster's) that must agree with it."""
        loop = asyncio.get_running_loop()
        return Clock().now() if loop in _ANCHORS else None

    def monotonic(self) -> float:
        return self._loop.time()
