"""A fleet's later step, started by RollingSync before the step before it synced the fleet's commit (argo-cd#29410):
its gate waits for that step, refuses when that step's sync failed, and goes on judging its own cluster when it may
not read the ApplicationSet. The emulated cluster holds ArgoCD's objects as its API would (tests/rollouts.py); fake
time."""

from __future__ import annotations

import asyncio
from typing import Any

import kmock
import pytest

from cutover import plan
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.errors import TargetNotReady
from cutover.flows import phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from helpers import fail_first, named
from rollouts import CANARY, application, fleet_commit, fleet_plan, rollout

pytestmark = pytest.mark.looptime

def gate(kube: cluster.Cluster, the_plan: plan.Plan, host: GitHub, fleet: str) -> Any:
    return phases.presync(Run.create(kube, the_plan, host), job_name=f"cutover-presync-{fleet[:7]}-presync-1")


def arranged(world: World, repo: BareRepo, **overrides: Any) -> tuple[str, str, plan.Plan, Any]:
    """Both engines Ready on this cluster and the fleet's commit to candle on top of the seed: the seed, the commit,
    the fleet's plan and candle's pod (its engine counts the proof's requests)."""
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    seed, the_plan = repo.head() or "", fleet_plan(world, **overrides)
    return seed, fleet_commit(repo, the_plan), the_plan, candle


async def test_a_step_started_early_switches_only_after_the_step_before_it_synced_the_commit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, events: list[dict[str, Any]]) -> None:
    seed, fleet, the_plan, candle = arranged(world, repo)
    rollout(world, seed=seed, fleet=fleet, canary=application(CANARY, sync="Synced", revision=seed, history=(seed,)))

    async def canary_syncs() -> float:  # ArgoCD's look at the canary, then its sync (gate, verifier, mark): done
        await asyncio.sleep(20)
        world.kube.apply(sim_argocd.APPS, application(CANARY, sync="OutOfSync", revision=fleet, operation="Running",
                                                      history=(seed,)))
        await asyncio.sleep(25)
        world.kube.apply(sim_argocd.APPS, application(CANARY, sync="Synced", revision=fleet, operation="Succeeded",
                                                      history=(seed, fleet)))
        return asyncio.get_running_loop().time()

    started = asyncio.get_running_loop().time()
    gated, synced_at = await asyncio.gather(gate(kube, the_plan, host, fleet), canary_syncs())
    assert gated.changed and gated.backend == "candle"
    (done,) = named(events, "fleet.earlier_steps_done")
    assert done["applications"] == [CANARY] and 45 <= done["waited"] <= 45 + 5  # one look every 5 s
    waiting = named(events, "fleet.earlier_steps_waiting")
    assert [event["waiting"] for event in waiting] == [
        [f"{CANARY} (Synced at {seed[:7]}, Healthy)"],  # what RollingSync took for done: the revision before
        [f"{CANARY} (OutOfSync at {fleet[:7]}, Healthy; its sync of {fleet[:7]} runs)"]]
    order = [event["event"] for event in events]
    assert order.index("fleet.earlier_steps_done") < order.index("names.proven")  # proven once the canary synced
    assert candle.engine.requests and synced_at - started == 45


async def test_a_step_started_early_is_refused_when_the_step_before_it_failed_the_commit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, events: list[dict[str, Any]]) -> None:
    """The canary's gate refused the commit: this cluster does not switch, and says whose sync failed."""
    seed, fleet, the_plan, candle = arranged(world, repo)
    rollout(world, seed=seed, fleet=fleet, canary=application(CANARY, sync="OutOfSync", revision=fleet,
                                                              operation="Failed", history=(seed,)))
    with pytest.raises(TargetNotReady) as refused:
        await gate(kube, the_plan, host, fleet)
    assert refused.value.cause == "earlier_step_failed" and CANARY in refused.value.message
    assert "argo-cd#29410" in refused.value.hint
    assert candle.engine.requests == []  # not proven: refused before


async def test_the_steps_before_are_waited_for_within_verify_max_wait(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, events: list[dict[str, Any]]) -> None:
    seed, fleet, the_plan, _ = arranged(world, repo, max_wait="60s")
    rollout(world, seed=seed, fleet=fleet, canary=application(CANARY, sync="Synced", revision=seed, history=(seed,)))
    started = asyncio.get_running_loop().time()
    with pytest.raises(TargetNotReady) as refused:
        await gate(kube, the_plan, host, fleet)
    assert refused.value.cause == "earlier_step_unfinished" and "verify.maxWait (60s)" in refused.value.message
    assert 60 <= asyncio.get_running_loop().time() - started < 61


async def test_a_commit_that_changes_nothing_in_the_step_before_needs_no_sync_there(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, events: list[dict[str, Any]]) -> None:
    """Synced and Healthy at the commit with no sync of it in its history (nothing changed there): done."""
    seed, fleet, the_plan, _ = arranged(world, repo)
    rollout(world, seed=seed, fleet=fleet, canary=application(CANARY, sync="Synced", revision=fleet, history=(seed,)))
    gated = await gate(kube, the_plan, host, fleet)
    assert gated.changed and not named(events, "fleet.earlier_steps_waiting")


@pytest.mark.parametrize("unreadable", ["applicationsets", "applications"])
async def test_a_gate_that_may_not_read_the_rollout_judges_its_own_cluster_and_says_so(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, events: list[dict[str, Any]],
        unreadable: str) -> None:
    seed, fleet, the_plan, _ = arranged(world, repo)
    rollout(world, seed=seed, fleet=fleet, canary=application(CANARY, sync="Synced", revision=seed, history=(seed,)))
    if unreadable == "applicationsets":
        world.kube["get", kmock.resource("argoproj.io", "v1alpha1", "applicationsets")] << fail_first(9, 403)
    else:  # its own Application only (the Role names it): the canary's is forbidden
        world.kube["get", kmock.resource("argoproj.io", "v1alpha1", "applications"), kmock.name(CANARY)] \
            << fail_first(9, 403)
    gated = await gate(kube, the_plan, host, fleet)
    assert gated.changed and gated.backend == "candle"
    (unread,) = named(events, "fleet.order_unread")
    assert unread["cause"] == "cluster_forbidden" and "get on the ApplicationSet and on its Applications" in \
        unread["hint"]


async def test_an_application_no_rolling_sync_steps_waits_for_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, events: list[dict[str, Any]]) -> None:
    seed, fleet, the_plan, _ = arranged(world, repo)
    rollout(world, seed=seed, fleet=fleet, strategy=False,
            canary=application(CANARY, sync="OutOfSync", revision=seed, history=(seed,)))
    gated = await gate(kube, the_plan, host, fleet)
    assert gated.changed and not named(events, "fleet.earlier_steps_waiting") and not named(events,
                                                                                          "fleet.order_unread")
