"""Shared fixtures: the simulated world over real HTTP, a Cluster on it through a kubeconfig, and logs.

Tests that wait on startup timelines carry `@pytest.mark.looptime`: the event loop's clock is fake and
jumps over idle time, so a 30-minute startup takes milliseconds and elapsed times are exact.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

from cutover import cluster, plan
from cutover.sim.world import World


@pytest.fixture(autouse=True)
def _no_implicit_loop_for_sync_tests(request: pytest.FixtureRequest) -> None:
    # looptime's plugin asks the policy for a loop around every test; for a sync test that makes a
    # loop nobody closes (a ResourceWarning, an error here). Saying "no loop" makes it step aside.
    if not inspect.iscoroutinefunction(request.function):
        asyncio.get_event_loop_policy().set_event_loop(None)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with World() as sim:
        sim.admit_jobs()
        yield sim


@pytest.fixture
async def kube(world: World, tmp_path: Path) -> AsyncIterator[cluster.Cluster]:
    connected = cluster.connect(kubeconfig=str(world.kubeconfig(tmp_path / "kubeconfig")), environ={})
    yield connected
    await connected.aclose()


@pytest.fixture
def make_plan(world: World) -> Any:
    def build(**overrides: Any) -> plan.Plan:
        (one,) = plan.parse(world.plan_text(**overrides))
        return one

    return build


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Structured log events of the test, as dicts (structlog's own capture)."""
    capture = LogCapture()
    structlog.configure(processors=[structlog.processors.add_log_level, capture])
    yield capture.entries
    structlog.reset_defaults()
