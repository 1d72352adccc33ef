"""handoff.strategy recreate on a cluster with one GPU (docs/capacity.md), over the emulated cluster, the engine
doubles and a GitHub double over a real bare repository, in fake time: each PostSync does one hop (free the
source, then wait, prove and switch within maxGap, then verify and say the gap); a re-run never commits twice; a
target not proven within maxGap restores the source exactly and holds the Service on it (exit 6 gap_exceeded)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cutover import plan
from cutover.core import milestones
from cutover.core.trailers import Trailers
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import Script, SimPod, World
from cutover.errors import GapExceeded
from cutover.flows import phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from helpers import named, told

pytestmark = pytest.mark.looptime

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
ENGINES = "k8s/apps/llm-serving/engines.yaml"
ENGINES_FILE = """\
# one card each: the node has one (4 of 4 GPUs allocated)
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-reasoning
spec:
  replicas: 1  # vLLM
  template: {}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: candle-reasoning
spec:
  replicas: 0
  template: {}
"""
WORKLOADS = {"vllm": f"{{kind: Deployment, name: llm-reasoning, path: {ENGINES}}}",
             "candle": f"{{kind: Deployment, name: candle-reasoning, path: {ENGINES}}}"}


@pytest.fixture
async def one_gpu(world: World, repo: BareRepo) -> dict[str, SimPod]:
    """The reference cluster's case: vLLM holds the only card; candle's pod waits for it. Its Deployment starts at
    one replica in Git, as a person's commit of the target leaves it."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE.replace("replicas: 0", "replicas: 1")}, "Add the engines\n")
    world.add_node("gpu-1", gpus=1)
    return {"vllm": world.add_pod("vllm", ready=True, gpus=1, node="gpu-1"),
            "candle": world.add_pod("candle", Script(fault="unschedulable"), gpus=1)}


def recreate_plan(make_plan: Any, *, max_gap: str = "30m") -> plan.Plan:
    built: plan.Plan = make_plan(workloads=WORKLOADS, handoff=f"{{strategy: recreate, maxGap: {max_gap}, "
                                                              "drainTimeout: 1m}")
    return built


def applies_the_free(world: World, pods: dict[str, SimPod], *, load: float) -> SimPod:
    """What ArgoCD and the scheduler do with the free: vLLM's pod goes, candle's is bound to the card it left."""
    world.delete_pod(pods["vllm"].name)
    world.delete_pod(pods["candle"].name)
    return world.add_pod("candle", Script(pull=20, load=load), gpus=1, node="gpu-1")


def cutover_commits(repo: BareRepo, path: str) -> list[str]:
    return [entry.message for entry in repo.log(path) if entry.message.startswith("cutover(")]


async def test_recreate_frees_the_source_then_switches_and_says_the_gap(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    the_plan = recreate_plan(make_plan)
    loop = asyncio.get_running_loop()

    freed = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    assert freed.data["freed"] == "vllm" and freed.data["committed"] is True
    assert freed.data["drain"]["complete"] is True and freed.data["drain"]["by"] == "metrics"
    (free,) = cutover_commits(repo, ENGINES)
    trailers = Trailers.parse(free)
    assert (trailers.step, trailers.backend, trailers.previous, trailers.source, trailers.to) == (
        "free", "vllm", "1", "vllm", "candle")
    content, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert content == ENGINES_FILE.replace("replicas: 1  # vLLM", "replicas: 0  # vLLM").replace(
        "replicas: 0\n  template", "replicas: 1\n  template")  # only vLLM's field changed
    assert cutover_commits(repo, PATH) == []  # the Service still selects vLLM: no switch yet
    assert named(events, milestones.DRAINING) and named(events, milestones.FREED)

    # Killed after its commit and run again: Git holds the free, nothing is freed twice; it waits for candle.
    candle = applies_the_free(world, one_gpu, load=300)
    opened = loop.time()
    switched = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert switched.data["committed"] is True and switched.data["to"] == "candle"
    assert len(cutover_commits(repo, ENGINES)) == 1 and len(cutover_commits(repo, PATH)) == 1

    sim_argocd.apply_git(world, repo, PATH)
    verified = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert verified.data["verified"] is True and verified.data["endpoints"] == [candle.ip]
    (closed,) = named(events, milestones.GAP_CLOSED)
    assert 320 <= closed["seconds"] <= loop.time() - opened + 10  # the candle pod's pull + load, and the proof
    assert "gap in service lasted" in verified.summary
    again = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-4")), the_plan)
    assert "gapSeconds" not in again.data and len(named(events, milestones.GAP_CLOSED)) == 1  # said once
    reasons = [event["reason"] for event in world.kube.objects("/v1/events", "llm-serving")]
    assert {"CutoverFreed", "CutoverCommitted", "CutoverGapClosed"} <= set(reasons)
    assert reasons.count("CutoverFreed") == 1 and reasons.count("CutoverGapClosed") == 1


async def test_a_target_not_proven_within_max_gap_restores_the_source_and_holds(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    the_plan = recreate_plan(make_plan, max_gap="5m")
    before, _ = repo.read(ENGINES)  # type: ignore[misc]
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    applies_the_free(world, one_gpu, load=3600)  # loads for an hour: far past the 5 minutes consented to
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(GapExceeded) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert caught.value.cause == "gap_exceeded" and caught.value.exit_code == 6
    assert loop.time() - start <= 300 + 15
    assert "handoff.maxGap (300s" in caught.value.message and "vllm restored in" in caught.value.message
    after, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert after == before  # exactly what was there
    restore, free = cutover_commits(repo, ENGINES)
    assert (Trailers.parse(restore).step, Trailers.parse(restore).hold) == ("restore", "vllm")
    assert Trailers.parse(free).step == "free"
    assert cutover_commits(repo, PATH) == []  # the Service never left vLLM

    # The next sync neither frees vLLM again nor waits: the restore holds until the plan's target changes.
    held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert held.data == {"held": "vllm"}
    assert len(cutover_commits(repo, ENGINES)) == 2


async def test_a_freed_target_is_restored_before_it_is_waited_for(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """After a recreate the source stays freed in Git; a later switch back restores it first, exactly as it was
    (from the free commit's trailers), by its own commit, before any wait."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines\n")
    world.add_pod("vllm", ready=True)
    the_plan = recreate_plan(make_plan)
    freed_by = repo.commit({ENGINES: ENGINES_FILE.replace("replicas: 0", "replicas: 0  # freed")},
                           "cutover(reasoning-long-predictor): free candle for vllm\n\nCutover-Id: x\nCutover-From: "
                           "candle\nCutover-To: vllm\nCutover-Plan: reasoning-long\nCutover-Step: free\n"
                           "Cutover-Backend: candle\nCutover-Previous: 2\n")
    restored = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    assert restored.data["restored"] == "candle" and restored.data["value"] == "2"
    content, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert "name: candle-reasoning\nspec:\n  replicas: 2  # freed" in content
    assert freed_by[:12] in cutover_commits(repo, ENGINES)[0]
    assert cutover_commits(repo, PATH) == []
