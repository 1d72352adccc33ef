"""handoff.strategy recreate on a cluster with one GPU (docs/capacity.md), over the emulated cluster, the engine
doubles and a GitHub double over a real bare repository, in fake time: each PostSync does one hop (the swap: drain
and free the source, start a target committed stopped; or free a source a Pending target waits on; then wait, prove
and switch within maxGap; then verify and say the gap); a hop killed anywhere and run again never commits twice; a
target not proven within maxGap, or failing, or a sync failing while the gap is open, gives the card back (the target
freed, the source restored exactly, a hold; exit 6 gap_exceeded); `cutover run` and `cutover rollback` take every hop
in one run, both directions on one GPU; `cutover plan` says where the handoff stands; the audit alerts on a free whose
sync failed while the source still serves, and on a gap a Terminate left open."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from cutover import plan
from cutover.core import milestones
from cutover.core.trailers import Trailers
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import Script, SimPod, World
from cutover.errors import CutoverError, GapExceeded, SyncTimeout, VerificationFailed
from cutover.flows import commands, explicit, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from helpers import named, told
from one_gpu import ENGINES, ENGINES_FILE, PATH, WORKLOADS, engines_follow_git, killed_at, reconcile

pytestmark = pytest.mark.looptime


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


async def test_a_plan_that_names_another_teams_deployment_frees_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    """The review's N4: vLLM's `workload` aimed at another team's Deployment in the Service's namespace, whose file
    cutover's token may write: the free would set it to zero. Its live pods do not carry vLLM's selector, so the
    hook refuses before draining or writing anything."""
    world.add_pod("coder", ready=True, name="team-b-api-7d9f8c6b5-x2x9z",
                  labels={"app": "team-b", "pod-template-hash": "7d9f8c6b5"})
    await world.settled()
    engines, _ = repo.read(ENGINES)  # type: ignore[misc]
    repo.commit({ENGINES: engines + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: team-b-api\n"
                                    "spec:\n  replicas: 3\n  template: {}\n"}, "Team B's API beside the engines\n")
    before, _ = repo.read(ENGINES)  # type: ignore[misc]
    aimed = dict(WORKLOADS, vllm=WORKLOADS["vllm"].replace("name: llm-reasoning", "name: team-b-api"))
    the_plan = make_plan(workloads=aimed, handoff="{strategy: recreate, maxGap: 30m, drainTimeout: 1m}")
    with pytest.raises(CutoverError) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    assert caught.value.cause == "workload_not_backend" and caught.value.exit_code == 2
    assert "Deployment team-b-api (team-b-api-7d9f8c6b5-x2x9z) do not carry the backend's selector" in \
        caught.value.message
    assert repo.read(ENGINES)[0] == before and cutover_commits(repo, ENGINES) == []  # type: ignore[index]
    assert not named(events, milestones.DRAINING)


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
    assert "verify.maxWait" not in caught.value.message  # the gap bound the wait, and is what is named
    after, _ = repo.read(ENGINES)  # type: ignore[misc]
    # vLLM exactly as it was; candle, which holds the card now, freed so that vLLM's pod can come back
    assert after == before.replace("name: candle-reasoning\nspec:\n  replicas: 1",
                                   "name: candle-reasoning\nspec:\n  replicas: 0")
    restore, free_candle, free_vllm = (Trailers.parse(text) for text in cutover_commits(repo, ENGINES))
    assert (restore.step, restore.backend, restore.hold) == ("restore", "vllm", "vllm")
    assert (free_candle.step, free_candle.backend, free_candle.previous) == ("free", "candle", "1")
    assert (free_vllm.step, free_vllm.backend) == ("free", "vllm")
    assert cutover_commits(repo, PATH) == []  # the Service never left vLLM

    # The next sync neither frees vLLM again nor waits: the restore holds until the plan's target changes.
    held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert held.data == {"held": "vllm"}
    assert len(cutover_commits(repo, ENGINES)) == 3


async def test_the_audit_waits_for_argocd_to_apply_a_restore_before_checking_the_source(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    """Between the restore's commit and ArgoCD's sync of it the source has no pod: the audit's CronJob firing then
    is told so and checks nothing (the real tier once saw it fail there, and ArgoCD 3.x then failed the sync of the
    restore itself on the Degraded CronJob); once a sync began after the restore, it checks the source again."""
    the_plan = recreate_plan(make_plan, max_gap="5m")
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    synced = sim_argocd.operation_state(world, "Succeeded", repo.head("main") or "")
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION,
                     {"status": {"operationState": synced}})  # ArgoCD's sync of the free
    applies_the_free(world, one_gpu, load=3600)
    with pytest.raises(GapExceeded):
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    restore = repo.head("main") or ""
    waited = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-1")), the_plan)
    assert waited.data["audit"] == "skipped" and f"ArgoCD has yet to apply {restore[:12]}" in waited.data["detail"]
    assert not named(events, milestones.FAILED)

    await asyncio.sleep(5)  # ArgoCD's sync of the restore: candle's pod goes, vLLM's comes back on the card
    reconcile(world, repo)
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION,
                     {"status": {"operationState": sim_argocd.operation_state(world, "Succeeded", restore)}})
    reconcile(world, repo)
    await asyncio.sleep(120)  # vLLM's pull and load
    checked = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-2")), the_plan)
    assert (checked.data["audit"], checked.data["backend"]) == ("checked", "vllm")


async def test_a_gap_nobody_is_finishing_is_what_the_audit_alerts_on(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod]) -> None:
    """A Terminate ends the sync of the free while its PostSync waits (no SyncFail runs after a Terminate): the
    source is freed, the Service still selects it, and nothing will finish the hop. The audit's alert says that,
    and how to go on, rather than only that the backend fails."""
    the_plan = recreate_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    free = repo.head("main") or ""
    applies_the_free(world, one_gpu, load=3600)
    await asyncio.sleep(5)
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION, {"status": {
        "operationState": sim_argocd.operation_state(world, "Failed", free, message="Operation terminated")}})
    with pytest.raises(VerificationFailed) as caught:
        await phases.audit(Run.create(kube, the_plan, host, identity="audit-1"))
    assert caught.value.cause == "live_backend_unproven"
    assert f"vllm was freed by {free[:12]} for candle" in caught.value.hint
    assert "cutover-run-llm-serving" in caught.value.hint


async def test_a_free_whose_sync_failed_is_an_alert_while_the_source_still_serves(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    """ArgoCD's sync of the hop's free ends Error before it freed anything (a health check timing out under load,
    as the tier saw for a switch): the source still serves, Git says it is freed, and ArgoCD does not sync a
    revision it failed again. The audit checks the source, then says the handoff waits on that sync (exit 7, an
    Event), at each run, rather than "OK"; while a person's sync runs it is ArgoCD's again."""
    the_plan = recreate_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    free = repo.head("main") or ""
    message = "ComparisonError: error setting app health: context deadline exceeded"
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION, {"status": {
        "operationState": sim_argocd.operation_state(world, "Error", free, message=message)}})
    for n in (1, 2):
        with pytest.raises(SyncTimeout) as caught:
            await phases.audit(Run.create(kube, the_plan, host, identity=f"audit-{n}"))
        assert (caught.value.cause, caught.value.exit_code) == ("argocd_sync_failed", 7)
        assert caught.value.message.startswith(f"ArgoCD's sync of {free[:12]} ended Error: {message}")
        assert f"sync llm-serving again: the cutover goes on from {free[:12]} (free vllm); vllm serves the Service " \
               f"meanwhile" in caught.value.hint
    assert [e["backend"] for e in named(events, milestones.PROVEN)][-2:] == ["vllm", "vllm"]  # checked first
    alerts = [e for e in world.kube.objects("/v1/events", "llm-serving") if e["reason"] == "CutoverSyncFailed"]
    assert len(alerts) >= 1 and all(e["type"] == "Warning" for e in alerts)
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION, {"status": {
        "operationState": sim_argocd.operation_state(world, "Running", free, finished=False)}})
    waited = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-3")), the_plan)
    assert waited.data["audit"] == "skipped" and f"ArgoCD is syncing {free[:12]}" in waited.data["detail"]


async def test_a_failed_sync_that_runs_on_holds_back_the_way_back_and_the_audit_says_to_end_it(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    """Found on the real tier: a cluster policy refused the free of vLLM while candle's Deployment, scaled up in the
    same sync, waits for the card vLLM still holds. ArgoCD runs SyncFail, which gives the card back by a commit,
    and then the operation runs on, waiting for candle's health, which never comes: no other sync starts, so the
    way back never syncs. The audit said "ArgoCD is syncing" at every run; it checks vLLM, then says the operation
    must be ended (exit 7, an Event)."""
    the_plan = recreate_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # vLLM freed, candle restored
    hop = repo.head("main") or ""
    started = world.kube.stamp()  # one operation throughout: SyncFail's commit comes after it began

    def running(message: str, syncfail: str) -> None:
        refused = sim_argocd.refused_beside_a_wait("llm-reasoning", "candle-reasoning", syncfail=syncfail)
        state = sim_argocd.operation_state(world, "Running", hop, message=message, finished=False, resources=refused)
        stored = world.kube.stored(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION)
        assert stored is not None
        world.kube.apply(sim_argocd.APPS, {**stored, "status": {**stored["status"], "operationState": {
            **state, "startedAt": started}}})  # replaced whole: a Running operation has no finishedAt

    await asyncio.sleep(3)  # the PreSync hook, the apply refused, SyncFail's Job started
    running("waiting for completion of hook batch/Job/cutover-syncfail-llm-serving", "Running")
    given = told(await phases.syncfail(Run.create(kube, the_plan, host, identity="job-syncfail")), the_plan)
    assert (given.data["rolledBack"], given.data["waiting"]) == (True, ["Deployment/candle-reasoning"])
    assert given.summary.endswith("; the operation runs on until Deployment/candle-reasoning is healthy, and no other "
                                  "sync starts meanwhile")
    (failed,) = named(events, milestones.FAILED)
    assert failed["hint"].endswith("if it cannot be, end it (argocd app terminate-op llm-serving), mend the cause and "
                                   "sync llm-serving again")
    back = repo.head("main") or ""
    waiting = "waiting for healthy state of apps/Deployment/candle-reasoning"
    running(waiting, "Succeeded")
    for n in (1, 2):
        with pytest.raises(SyncTimeout) as caught:
            await phases.audit(Run.create(kube, the_plan, host, identity=f"audit-{n}"))
        assert (caught.value.cause, caught.value.exit_code) == ("argocd_sync_failed", 7)
        assert caught.value.message.startswith(f"ArgoCD's sync of {hop[:12]} failed: Deployment/llm-reasoning: ")
        assert f"still waits on {waiting}, and ArgoCD starts no other sync while it runs" in caught.value.message
        assert "end the operation that runs on (argocd app terminate-op llm-serving)" in caught.value.hint
        assert f"the cutover goes on from {back[:12]} (restore vllm); vllm serves the Service meanwhile" in \
            caught.value.hint
    assert [e["backend"] for e in named(events, milestones.PROVEN)][-2:] == ["vllm", "vllm"]  # checked first
    assert [e for e in world.kube.objects("/v1/events", "llm-serving") if e["reason"] == "CutoverSyncFailed"]


async def test_a_freed_target_is_started_in_the_hop_that_frees_the_source(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """After a recreate the source stays freed in Git; a later switch back restores it exactly as it was (from the
    free commit's trailers), and under recreate drains and frees the backend serving now in the same hop, so that
    ArgoCD applies both at once: a target scaled up beside a source that holds its card would keep the sync
    Progressing, and no PostSync would ever run."""
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
    assert "replicas: 0  # vLLM" in content
    restore, free, _ = cutover_commits(repo, ENGINES)
    assert freed_by[:12] in restore and Trailers.parse(free).backend == "vllm"
    assert cutover_commits(repo, PATH) == []
    assert named(events, milestones.DRAINING) and named(events, milestones.RESTORED)


async def test_a_postsync_in_the_sync_of_a_hops_free_alone_waits_for_no_pod(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """The hop pushes its free, then its restore; ArgoCD may resolve the branch between the two and sync the free
    alone (the real tier, v3.5.3: the restore pushed 2 s before). That sync starts no pod of the target, and its
    PostSync holds the operation whose end lets ArgoCD sync the restore: it says so and ends at once, committing
    nothing, instead of waiting out maxWait and rolling the hop back."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines\n")
    world.add_pod("vllm", ready=True)
    the_plan = recreate_plan(make_plan)
    repo.commit({ENGINES: ENGINES_FILE.replace("replicas: 0", "replicas: 0  # freed")},
                "cutover(reasoning-long-predictor): free candle for vllm\n\nCutover-Id: x\nCutover-From: "
                "candle\nCutover-To: vllm\nCutover-Plan: reasoning-long\nCutover-Step: free\n"
                "Cutover-Backend: candle\nCutover-Previous: 2\n")
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # restores candle, frees vLLM
    restore, free = [entry.sha for entry in repo.log(ENGINES, limit=2)]
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION, {"status": {
        "operationState": sim_argocd.operation_state(world, "Running", free, finished=False)}})
    loop = asyncio.get_running_loop()
    began = loop.time()
    awaiting = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert loop.time() - began < 5  # no wait for candle's pods
    assert awaiting.data["restore"] == restore and f"which this sync ({free[:12]}) does not hold" in awaiting.summary
    (said,) = named(events, "handoff.restore_unsynced")
    assert (said["backend"], said["syncing"]) == ("candle", free[:12])
    assert len(cutover_commits(repo, ENGINES)) == 3 and cutover_commits(repo, PATH) == []  # nothing committed

    # ArgoCD's sync of the restore: its PostSync takes the hop (it waits for candle's pods, proves and switches)
    world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, sim_argocd.APPLICATION, {"status": {
        "operationState": sim_argocd.operation_state(world, "Running", restore, finished=False)}})
    world.add_pod("candle", ready=True)
    switched = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert switched.data["committed"] is True and switched.data["to"] == "candle"


async def test_a_target_committed_stopped_is_started_at_min_ready_pods(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    """The way to start a recreate: the person commits the target's workload stopped (replicas: 0) with the plan's
    target; no cutover commit recorded a count for it, so it starts at verify.minReadyPods."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines, candle stopped\n")
    world.add_pod("vllm", ready=True)
    the_plan = recreate_plan(make_plan)
    started = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    assert started.data["restored"] == "candle" and started.data["value"] == "1"
    content, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert content == ENGINES_FILE.replace("replicas: 1  # vLLM", "replicas: 0  # vLLM").replace(
        "replicas: 0\n  template", "replicas: 1\n  template")
    (restore, _) = cutover_commits(repo, ENGINES)
    assert "started at verify.minReadyPods" in restore


async def test_run_takes_every_hop_and_a_rollback_on_one_gpu_takes_them_back(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod], events: list[dict[str, Any]]) -> None:
    """`cutover run` frees vLLM, waits for candle within maxGap, switches, waits for ArgoCD and verifies, in one
    run; `cutover rollback` back to vLLM on the same card drains and frees candle and restores vLLM's workload in
    one hop (vLLM was freed in Git), waits for vLLM within maxGap and switches back with a hold."""
    the_plan = recreate_plan(make_plan)
    async with engines_follow_git(world, repo):
        ran = told(await explicit.run(Run.create(kube, the_plan, host, identity="job-run")), the_plan)
        assert ran.data["to"] == "candle" and ran.data["verified"] is True and "gapSeconds" in ran.data
        back = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
    assert back.data["to"] == "vllm" and back.data["verified"] is True and "gapSeconds" in back.data
    steps = [(t.step, t.backend) for t in map(Trailers.parse, cutover_commits(repo, ENGINES))]
    assert steps == [("restore", "vllm"), ("free", "candle"), ("free", "vllm")]  # newest first
    switch_back, switch = (Trailers.parse(text) for text in cutover_commits(repo, PATH))
    assert (switch.to, switch_back.to, switch_back.hold) == ("candle", "vllm", "vllm")
    text, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert text == ENGINES_FILE  # vLLM back as it was, candle freed as it was before the person's commit
    assert len(named(events, milestones.GAP_CLOSED)) == 2


async def test_a_target_that_crashes_while_the_gap_is_open_gives_the_card_back_at_once(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod]) -> None:
    """Not a wait for maxGap: a crash loop is final, the source is restored with the target's own cause."""
    the_plan = recreate_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    world.delete_pod(one_gpu["vllm"].name)
    world.delete_pod(one_gpu["candle"].name)
    world.add_pod("candle", Script(pull=5, fault="crash_loop"), gpus=1, node="gpu-1")
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(CutoverError) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert caught.value.cause == "crash_loop" and "vllm restored in" in caught.value.message
    assert loop.time() - start < 300
    assert [Trailers.parse(text).step for text in cutover_commits(repo, ENGINES)] == ["restore", "free", "free"]


async def test_a_sync_that_fails_while_the_gap_is_open_gives_the_card_back(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    """ArgoCD waits for the target's health before PostSync: a target that never gets there fails the sync at its
    Deployment's progress deadline, and then SyncFail is the hook that runs. It frees the target and restores the
    source, with a hold, as PostSync would once maxGap passed."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines, candle stopped\n")
    world.add_pod("vllm", ready=True)
    the_plan = recreate_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # vLLM freed, candle started
    failed = told(await phases.syncfail(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert failed.data["rolledBack"] is True and "Git goes back to vllm (held)" in failed.summary
    content, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert content == ENGINES_FILE  # vLLM exactly as it was, candle stopped as the person committed it
    held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert held.data == {"held": "vllm"}


async def test_cutover_plan_says_where_the_handoff_stands(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    """`cutover plan` while the gap is open: what Git holds freed, the last step of each backend, and the time left of
    maxGap (docs/capacity.md)."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines, candle stopped\n")
    world.add_pod("vllm", ready=True)
    the_plan = recreate_plan(make_plan)
    before = told(await commands.show_plan(kube, the_plan, host=host), the_plan)
    assert before.data["handoff"] == {"strategy": "recreate", "freed": ["candle"], "steps": {}, "git": "vllm",
                                      "next": "restore candle, draining and freeing vllm in the same sync"}
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # vLLM freed, candle started
    await asyncio.sleep(60)
    shown = told(await commands.show_plan(kube, the_plan, host=host), the_plan)
    state = shown.data["handoff"]
    assert state["freed"] == ["vllm"] and state["steps"]["vllm"]["step"] == "free"
    assert state["steps"]["candle"]["step"] == "restore"
    assert state["gap"]["source"] == "vllm" and 60 <= state["gap"]["seconds"] <= 65
    assert state["gap"]["left"] == 1800 - state["gap"]["seconds"]
    (line,) = [line for line in shown.lines if line.startswith("  handoff: ")]
    assert "freed in Git: vllm" in line and "s of maxGap left" in line
    assert state["next"] == "wait for candle, prove it and switch to it"


@pytest.mark.parametrize("event", ["handoff.draining", "drain.done", "handoff.freed", "handoff.restored",
                                   "lock.released"])
@pytest.mark.parametrize("hard", [False, True], ids=["SIGTERM", "SIGKILL"])
async def test_a_hop_killed_anywhere_and_run_again_commits_each_step_once(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]], event: str, hard: bool) -> None:
    """docs/guarantees.md #5 for the hops: the swap's PostSync killed at any step (SIGTERM: it lets go of the
    Lease; SIGKILL: the Lease stays held until it expires) and run again by the Job's next pod frees vLLM once and
    starts candle once, whatever was in Git when it died."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines, candle stopped\n")
    world.add_pod("vllm", ready=True)
    the_plan = recreate_plan(make_plan)
    await killed_at(world, phases.postsync(Run.create(kube, the_plan, host, identity="job-0")), event, hard=hard)
    reconcile(world, repo, gpu=False)  # ArgoCD syncs what the killed hop left in Git before the next PostSync
    again = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    steps = [(t.step, t.backend) for t in map(Trailers.parse, cutover_commits(repo, ENGINES))]
    assert steps == [("restore", "candle"), ("free", "vllm")], steps  # newest first, each once
    assert again.data.get("restored") == "candle" or again.data.get("to") == "candle", again.data


async def test_a_switch_that_fails_verification_on_one_gpu_rolls_back_by_restoring_the_source_first(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        one_gpu: dict[str, SimPod]) -> None:
    """rollback.auto after a recreate: vLLM is freed in Git, so switching back to it first restores it (freeing
    candle, drained: it served), and the next PostSync waits for vLLM and switches back with a hold."""
    the_plan = recreate_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    candle = applies_the_free(world, one_gpu, load=60)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    sim_argocd.apply_git(world, repo, PATH)
    await candle.engine.unbind()  # candle stops answering once it has the Service
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
    assert caught.value.cause == "verification_failed_rolled_back"
    assert "rolling back to vllm: vllm restored in" in caught.value.message
    steps = [(t.step, t.backend, t.hold) for t in map(Trailers.parse, cutover_commits(repo, ENGINES))]
    assert steps[:2] == [("restore", "vllm", "vllm"), ("free", "candle", None)]
    reconcile(world, repo)  # ArgoCD applies it: candle goes, and vLLM comes back on the card it left
    reconcile(world, repo)
    back = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-4")), the_plan)
    assert back.data["to"] == "vllm" and back.data["committed"] is True
    assert Trailers.parse(cutover_commits(repo, PATH)[0]).hold == "vllm"
    sim_argocd.apply_git(world, repo, PATH)
    held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-5")), the_plan)
    assert held.data == {"held": "vllm"}


VALUES = "k8s/apps/llm-serving/values.yaml"
VALUES_FILE = "engines:\n  vllm:\n    replicas: 1  # one card\n    image: vllm/vllm-openai\n"
ISVC = "k8s/apps/llm-serving/candle-isvc.yaml"
ISVC_FILE = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: candle-reasoning
  annotations:
    serving.kserve.io/stop: "true"  # committed stopped with the target
spec:
  predictor: {model: {modelFormat: {name: candle}}}
"""


def helm_and_kserve(repo: BareRepo) -> dict[str, int]:
    """What runs as Git holds it: vLLM's replicas in the chart's values, candle's InferenceService unless stopped."""
    values, _ = repo.read(VALUES)  # type: ignore[misc]
    isvc, _ = repo.read(ISVC)  # type: ignore[misc]
    found = re.search(r"replicas: (\d+)", values)
    assert found is not None
    return {"vllm": int(found.group(1)), "candle": 0 if 'serving.kserve.io/stop: "true"' in isvc else 1}


async def test_recreate_through_a_helm_values_key_and_an_inference_service_both_ways(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    """The same hops when vLLM's replicas are a Helm values key and candle is a KServe InferenceService: the free
    writes the key 0 and starts candle by its stop annotation in one commit each file; the way back writes both
    back exactly as they were."""
    sim_argocd.seed_application(world)
    repo.commit({VALUES: VALUES_FILE, ISVC: ISVC_FILE}, "vLLM from the chart; candle's InferenceService, stopped\n")
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    workloads = {"vllm": f"{{kind: Deployment, name: llm-reasoning, path: {VALUES}, valuesKey: engines.vllm.replicas}}",
                 "candle": f"{{kind: InferenceService, name: candle-reasoning, path: {ISVC}}}"}
    the_plan = make_plan(workloads=workloads, handoff="{strategy: recreate, maxGap: 30m, drainTimeout: 1m}")
    async with engines_follow_git(world, repo, wanted=helm_and_kserve):
        ran = told(await explicit.run(Run.create(kube, the_plan, host, identity="job-run")), the_plan)
        assert ran.data["to"] == "candle" and ran.data["verified"] is True
        assert helm_and_kserve(repo) == {"vllm": 0, "candle": 1}
        freed = Trailers.parse(cutover_commits(repo, VALUES)[0])
        assert (freed.step, freed.backend, freed.previous) == ("free", "vllm", "1")
        back = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
    assert back.data["to"] == "vllm" and back.data["verified"] is True
    assert [Trailers.parse(t).step for t in cutover_commits(repo, VALUES)] == ["restore", "free"]
    assert [Trailers.parse(t).step for t in cutover_commits(repo, ISVC)] == ["free", "restore"]
    assert repo.read(VALUES)[0] == VALUES_FILE and repo.read(ISVC)[0] == ISVC_FILE  # type: ignore[index]
