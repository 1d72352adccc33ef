"""Draining a backend (docs/capacity.md) over the engine doubles, in fake time: vLLM's in-flight gauge read each
second until it reads 0 twice in a row, candle-vllm waited on for the drain timeout, both bounded by it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from cutover.demo.world import NAMESPACE, World
from cutover.engines import api
from cutover.flows import drain
from cutover.kube import cluster
from cutover.plan import Plan
from helpers import named

pytestmark = pytest.mark.looptime


async def pods_of(kube: cluster.Cluster, plan: Plan, backend: str) -> list[Any]:
    pods, _ = await kube.pods(NAMESPACE, plan.backends[backend].selector)
    return pods


async def generate(world: World, backend: str) -> None:
    (pod,) = [p for p in world.pods.values() if p.backend == backend]
    async with httpx.AsyncClient(timeout=120) as client:
        await client.post(f"http://{pod.ip}:{world.port}/v1/completions",
                          json={"model": "reasoning", "prompt": "hi", "max_tokens": 1})


async def test_an_idle_vllm_drains_on_its_second_idle_read(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    await world.settled()
    plan = make_plan()
    async with api.new_client(timeout=5) as client:
        drained = await drain.drain_backend(client, plan.backends["vllm"], await pods_of(kube, plan, "vllm"),
                                            within=300)
    assert (drained.complete, drained.by, drained.running) == (True, "metrics", {})
    assert drained.seconds == pytest.approx(1.0, abs=0.1)  # read at 0 s and at 1 s
    assert named(events, "drain.done")[0]["seconds"] == 1.0


async def test_a_request_in_flight_is_waited_for(world: World, kube: cluster.Cluster,
                                                 make_plan: Callable[..., Plan]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    await world.settled()
    vllm.engine.latency = 20.0  # a long answer, still running when the drain begins
    plan = make_plan()
    request = asyncio.create_task(generate(world, "vllm"))
    await asyncio.sleep(0.5)
    assert vllm.engine.in_flight == 1
    async with api.new_client(timeout=5) as client:
        drained = await drain.drain_backend(client, plan.backends["vllm"], await pods_of(kube, plan, "vllm"),
                                            within=300)
    await request
    assert drained.complete and drained.by == "metrics"
    assert drained.seconds == pytest.approx(20.5, abs=1.1)  # its end, then a second idle read a second later


async def test_the_timeout_bounds_a_drain_and_names_what_still_runs(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    await world.settled()
    vllm.engine.latency = 100.0
    plan = make_plan()
    request = asyncio.create_task(generate(world, "vllm"))
    await asyncio.sleep(0.5)
    async with api.new_client(timeout=5) as client:
        drained = await drain.drain_backend(client, plan.backends["vllm"], await pods_of(kube, plan, "vllm"),
                                            within=30)
    assert not drained.complete and drained.seconds == pytest.approx(30, abs=0.1)
    assert drained.running == {vllm.name: 1.0}
    (warning,) = named(events, "drain.timed_out")
    assert f"{vllm.name} 1" in warning["message"] and "handoff.drainTimeout" in warning["hint"]
    request.cancel()
    await asyncio.gather(request, return_exceptions=True)


async def test_candle_vllm_has_no_gauge_and_is_waited_on_for_the_timeout(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    world.add_pod("candle", ready=True)
    await world.settled()
    plan = make_plan()
    async with api.new_client(timeout=5) as client:
        drained = await drain.drain_backend(client, plan.backends["candle"], await pods_of(kube, plan, "candle"),
                                            within=300)
    assert (drained.complete, drained.by) == (True, "timeout")
    assert drained.seconds == pytest.approx(300, abs=0.1)


async def test_a_pod_that_no_longer_answers_has_nothing_in_flight(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    await world.settled()
    plan = make_plan()
    pods = await pods_of(kube, plan, "vllm")
    await vllm.engine.unbind()
    async with api.new_client(timeout=5) as client:
        drained = await drain.drain_backend(client, plan.backends["vllm"], pods, within=300)
    assert drained.complete and drained.seconds == pytest.approx(1.0, abs=0.1)
