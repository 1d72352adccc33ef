"""Fifty cutovers in one process (a plan with 50 entries under `cutovers:`), each Service with its own pods and
its own startup time, against one emulated cluster and one GitHub double, in fake time: the whole PostSync
takes no longer than twice the slowest Service alone, and asks the Kubernetes API no more per Service."""

from __future__ import annotations

from pathlib import Path

import pytest

from doubles import fleet

COUNT = 50


@pytest.mark.looptime
@pytest.mark.timeout(180)  # fifty cutovers' real CPU: about 20 s idle, 43 s beside a cold CI's Go builds
async def test_fifty_services_take_no_longer_than_twice_the_slowest_alone(tmp_path: Path) -> None:
    starts = fleet.startups(COUNT)
    slowest = max(starts, key=lambda script: script.pull + script.load)
    one = await fleet.cutover([slowest], tmp_path / "one")
    many = await fleet.cutover(starts, tmp_path / "fifty")
    assert (one.code, one.commits) == (0, 1)
    assert (many.code, many.commits) == (0, COUNT)
    assert many.seconds <= 2 * one.seconds, (many.seconds, one.seconds)
    assert many.requests / COUNT <= one.requests, (many.requests / COUNT, one.requests)
