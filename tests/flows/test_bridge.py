"""handoff.strategy bridge on a cluster with one GPU (docs/capacity.md), over the emulated cluster, the engine doubles
and a GitHub double over a real bare repository, in fake time: `coder` (a vLLM that also answers `reasoning`) carries
the bridged name while vLLM is freed and candle starts on its card. Each PostSync does one hop (switch to the bridge,
proven on the bridged names; check the bridge through the Service, drain and free vLLM starting candle; switch to
candle; verify); a client sending the bridged name through the Service meanwhile sees no failed request; `cutover run`
and `cutover rollback` take every hop in one run, both ways; a bridge that fails its check goes back to vLLM, which
still runs; a target that fails after the source was freed leaves the bridge serving."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import structlog

from cutover import plan
from cutover.core import milestones
from cutover.core.trailers import Trailers
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import BRIDGE_NAMES, Script, World
from cutover.errors import CutoverError, GapExceeded, SyncTimeout, VerificationFailed
from cutover.flows import commands, explicit, phases, sync
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from helpers import named, told
from one_gpu import ENGINES, ENGINES_FILE, PATH, WORKLOADS, engines_follow_git, killed_at, reconcile

pytestmark = pytest.mark.looptime


@pytest.fixture
async def one_gpu(world: World, repo: BareRepo) -> None:
    """vLLM holds the only card; candle is committed stopped with the plan's target; coder runs on cards of its
    own (no card of this node)."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE}, "Add the engines, candle stopped\n")
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    world.add_pod("coder", ready=True)
    await world.settled()


def bridge_plan(make_plan: Any, *, max_gap: str = "45m") -> plan.Plan:
    """coder answers `reasoning`, not `reasoning-long`: the bridged names leave one dark, consented to by maxGap."""
    built: plan.Plan = make_plan(workloads=WORKLOADS, coder=True, handoff="{strategy: bridge, bridge: coder, "
                                 f"bridgeNames: [reasoning], maxGap: {max_gap}, drainTimeout: 1m}}")
    return built


def whole_bridge_plan(make_plan: Any) -> plan.Plan:
    """The Service serves `reasoning` only, which coder answers: no name goes dark, no maxGap."""
    built: plan.Plan = make_plan(workloads=WORKLOADS, coder=True, names=BRIDGE_NAMES,
                                 handoff="{strategy: bridge, bridge: coder, drainTimeout: 1m}")
    return built


def commits(repo: BareRepo, path: str) -> list[Trailers]:
    """The cutover commits of a file, newest first, by their trailers."""
    return [Trailers.parse(entry.message) for entry in repo.log(path) if entry.message.startswith("cutover(")]


@contextlib.asynccontextmanager
async def probing(world: World, every: float = 2.0) -> AsyncIterator[list[str]]:
    """A client sending the bridged name through the Service's ClusterIP every `every` s; yields its failures (and
    asserts, when it stops, that it kept asking: answers for at least half of its rounds)."""
    began = asyncio.get_running_loop().time()
    async with world.client(BRIDGE_NAMES[0], every=every) as asked:
        yield asked.failed
    assert asked.answered >= (asyncio.get_running_loop().time() - began) / every / 2, asked


async def test_each_postsync_takes_one_hop_and_the_bridged_name_never_fails(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]]) -> None:
    the_plan = bridge_plan(make_plan)
    async with probing(world) as failures:
        bridged = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
        assert bridged.data["to"] == "coder" and bridged.data["committed"] is True
        assert bridged.data["toward"] == "candle" and "(the bridge, for reasoning)" in bridged.summary
        (hop,) = commits(repo, PATH)
        assert (hop.source, hop.to, hop.bridge, hop.toward) == ("vllm", "coder", "coder", "candle")
        assert "answered reasoning (" in repo.log(PATH)[0].message  # proven on the bridged names only
        assert commits(repo, ENGINES) == []  # nothing freed before the bridge carries the Service

        # PreSync gates the bridge on its names: coder answers `reasoning`, not `reasoning-long`
        world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
            "operationState": sim_argocd.operation_state(world, "Running", repo.head() or "", finished=False)}})
        gated = told(await phases.presync(Run.create(kube, the_plan, host), job_name="cutover-presync-llm-serving"),
                     the_plan)
        assert gated.data["backend"] == "coder"
        sim_argocd.apply_git(world, repo, PATH)
        room = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
        assert room.data["restored"] == "candle"
        restore, free = commits(repo, ENGINES)
        assert (free.step, free.backend, restore.step, restore.backend) == ("free", "vllm", "restore", "candle")
        assert named(events, milestones.BRIDGE_VERIFIED) and named(events, milestones.DRAINING)

        reconcile(world, repo)  # vLLM's pod goes, candle's is bound to the card it left
        world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {  # the sync of the restore runs
            "operationState": sim_argocd.operation_state(world, "Running", repo.head() or "", finished=False)}})
        switched = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
        assert switched.data["to"] == "candle" and switched.data["committed"] is True
        last, _ = commits(repo, PATH)
        assert (last.source, last.to, last.bridge, last.toward) == ("vllm", "candle", "coder", None)

        sim_argocd.apply_git(world, repo, PATH)
        verified = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-4")), the_plan)
        assert verified.data["verified"] is True and "gapSeconds" not in verified.data
    assert failures == []
    assert len({hop.id, last.id}) == 1  # one cutover, one Slack thread
    reasons = [event["reason"] for event in world.kube.objects("/v1/events", "llm-serving")]
    assert {"CutoverBridged", "CutoverFreed", "CutoverRestored", "CutoverCommitted"} <= set(reasons)


def synced_without_hooks(world: World, repo: BareRepo) -> None:
    """ArgoCD applies the head by a selective self-heal sync, as it does a commit its PostSync pushed once it
    compared that commit while the sync still ran (argo-cd#27875 on 3.4 and 3.5): no hook runs."""
    argocd_syncs(world, repo)
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {"operationState": sim_argocd.operation_state(
        world, "Succeeded", repo.head() or "", selected=[{"group": "", "kind": "Service", "name": "x"}])}})


async def test_hops_argocd_synced_without_hooks_are_taken_by_the_audit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]]) -> None:
    """Every hop's commit synced without its PostSync: each audit takes the next hop (what that PostSync would
    have done), then verifies the last switch; an audit while a hop's own PostSync may still come leaves it."""
    the_plan = bridge_plan(make_plan)

    async def audit(n: int) -> Any:
        return told(await phases.audit(Run.create(kube, the_plan, host, identity=f"cutover-audit-{n}")), the_plan)

    async with probing(world) as failures:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
        (to_coder,) = commits(repo, PATH)
        argocd_syncs(world, repo)  # a full sync, whose PostSync takes the next hop: not the audit's
        assert (await audit(1)).data["audit"] == "skipped"
        synced_without_hooks(world, repo)
        room = await audit(2)
        assert room.data["audit"] == "continued" and room.data["commit"] == repo.log(PATH)[0].sha
        assert room.data["backend"] == "candle" and "restored in" in room.data["detail"]
        restore, free = commits(repo, ENGINES)
        assert (free.step, free.backend, restore.step, restore.backend) == ("free", "vllm", "restore", "candle")
        assert named(events, "audit.continuing") and named(events, milestones.BRIDGE_VERIFIED)
        synced_without_hooks(world, repo)
        switched = await audit(3)
        assert (switched.data["audit"], switched.data["backend"]) == ("continued", "candle")
        last, _ = commits(repo, PATH)
        assert (last.source, last.to, last.bridge) == ("vllm", "candle", "coder")
        synced_without_hooks(world, repo)
        verified = await audit(4)
        assert (verified.data["audit"], verified.data["backend"]) == ("verified", "candle")
        assert (await audit(5)).data["audit"] == "checked"
    assert failures == []
    assert len({to_coder.id, last.id}) == 1  # one cutover, one Slack thread, whoever took its hops


@pytest.mark.parametrize("ended", ["Running", "Failed"])
async def test_a_step_argocd_failed_is_an_alert_once_the_bridge_proves_the_bridged_names(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]], ended: str) -> None:
    """Found on the real tier: a policy refused the hop's free of vLLM, and candle, started in the same sync, waits
    for the card: the operation runs on after SyncFail (or, terminated, ended Failed). The audit verified the bridge
    on every served name then, failed on the name it does not carry and rolled the handoff back; it checks the
    bridge on the bridged names, then alerts on the step ArgoCD will not apply, and commits nothing."""
    the_plan = bridge_plan(make_plan)
    async with probing(world) as failures:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # the switch to the coder
        world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
            "operationState": sim_argocd.operation_state(world, "Running", repo.head() or "", finished=False)}})
        sim_argocd.apply_git(world, repo, PATH)
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))  # vLLM freed, candle restored
        head, history = repo.head() or "", len(repo.log())
        state = sim_argocd.operation_state(world, ended, head, finished=ended == "Failed",
                                           message="waiting for healthy state of apps/Deployment/candle-reasoning",
                                           resources=sim_argocd.refused_beside_a_wait("llm-reasoning",
                                                                                      "candle-reasoning"))
        stored = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
        assert stored is not None
        world.kube.apply(sim_argocd.APPS, {**stored, "status": {**stored["status"], "operationState": state}})
        with pytest.raises(SyncTimeout) as caught:
            await phases.audit(Run.create(kube, the_plan, host, identity="cutover-audit-1"))
    assert (caught.value.cause, caught.value.exit_code) == ("argocd_sync_failed", 7)
    assert f"goes on from {head[:12]} (restore candle); coder serves the Service meanwhile" in caught.value.hint
    assert ("argocd app terminate-op" in caught.value.hint) is (ended == "Running")
    assert len(repo.log()) == history  # no rollback: the bridge carries what it should
    assert named(events, milestones.PROVEN)[-1]["backend"] == "coder"
    assert failures == []


async def test_run_takes_every_hop_and_rollback_takes_them_back_through_the_bridge(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None) -> None:
    the_plan = bridge_plan(make_plan)
    async with probing(world) as failures, engines_follow_git(world, repo):
        ran = told(await explicit.run(Run.create(kube, the_plan, host, identity="job-run")), the_plan)
        assert ran.data["to"] == "candle" and ran.data["verified"] is True
        back = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
        assert back.data["to"] == "vllm" and back.data["verified"] is True
    assert failures == []
    switches = [(t.source, t.to, t.hold) for t in commits(repo, PATH)]
    assert switches == [("candle", "vllm", "vllm"), ("candle", "coder", "vllm"),  # newest first
                        ("vllm", "candle", None), ("vllm", "coder", None)]
    steps = [(t.step, t.backend) for t in commits(repo, ENGINES)]
    assert steps == [("restore", "vllm"), ("free", "candle"), ("restore", "candle"), ("free", "vllm")]
    text, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert text == ENGINES_FILE  # as the person committed it
    held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-after")), the_plan)
    assert held.data == {"held": "vllm"}


async def test_a_rollback_job_sees_its_path_end_however_fast_argocd_and_the_hooks_take_it(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]]) -> None:
    """The rollback Job commits the hop to the bridge and waits for ArgoCD to apply it; ArgoCD applies it, and the
    hooks of its sync and the next take the rest of the path (vLLM restored, the switch back) before the Job looks
    again: the Service never selects the bridge at one of the Job's looks. The Job sees the path's end and
    verifies it, not a timeout after a completed rollback (seen in the tier: an 8 s window, caught by luck)."""
    the_plan = bridge_plan(make_plan)
    async with engines_follow_git(world, repo):
        told(await explicit.run(Run.create(kube, the_plan, host, identity="job-run")), the_plan)
    waiting = asyncio.Event()

    def seen(logger: Any, method: str, entry: dict[str, Any]) -> dict[str, Any]:
        if entry.get("event") == "argocd.waiting":  # the Job, waiting for ArgoCD to apply the bridge
            waiting.set()
        return entry

    async def argocd_and_the_hooks() -> None:
        await waiting.wait()
        sim_argocd.apply_git(world, repo, PATH)  # the bridge, applied
        await phases.postsync(Run.create(kube, the_plan, host, identity="hook-1"))  # restore vLLM, free candle
        for pod in [pod for pod in world.pods.values() if pod.backend == "candle"]:
            world.delete_pod(pod.name)
        world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")  # a startup of seconds, as in the tier
        await phases.postsync(Run.create(kube, the_plan, host, identity="hook-2"))  # the switch back
        sim_argocd.apply_git(world, repo, PATH)

    processors = structlog.get_config()["processors"]
    structlog.configure(processors=[seen, *processors])
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        hooks = asyncio.create_task(argocd_and_the_hooks())
        back = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
        await hooks
    finally:
        structlog.configure(processors=processors)
    assert back.data["to"] == "vllm" and back.data["verified"] is True
    assert loop.time() - began < sync.SYNC_WAIT / 2  # not a timeout after a completed rollback
    assert named(events, "run.following") or named(events, "argocd.path_ahead")
    assert [t.to for t in commits(repo, PATH)][:2] == ["vllm", "coder"]


async def test_a_bridge_that_fails_its_check_goes_back_to_the_source_which_still_runs(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None) -> None:
    the_plan = bridge_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    sim_argocd.apply_git(world, repo, PATH)
    (coder,) = [pod for pod in world.pods.values() if pod.backend == "coder"]
    await coder.engine.unbind()  # the bridge stops answering between its proof and its check
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert caught.value.cause == "verification_failed_rolled_back" and "rolled back to vllm" in caught.value.message
    back, _ = commits(repo, PATH)
    assert (back.source, back.to, back.hold, back.bridge) == ("coder", "vllm", "vllm", "coder")
    assert commits(repo, ENGINES) == []  # vLLM never freed
    sim_argocd.apply_git(world, repo, PATH)
    held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert held.data == {"held": "vllm"}


async def to_the_last_hop(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, the_plan: plan.Plan,
                          candle: Script) -> None:
    """The path up to its last hop: the switch to coder applied, vLLM freed and candle restored; ArgoCD's sync of
    that takes vLLM's pod and starts candle's, as `candle` scripts it, on the card vLLM left."""
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    sim_argocd.apply_git(world, repo, PATH)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    for pod in [pod for pod in world.pods.values() if pod.backend == "vllm"]:
        world.delete_pod(pod.name)
    world.add_pod("candle", candle, gpus=1, node="gpu-1")


async def test_a_target_failing_after_the_source_was_freed_leaves_the_bridge_serving(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]]) -> None:
    """No gap to close: the bridge serves every served name, so nothing is rolled back by itself; a rollback then
    frees candle without draining it (it never served) and brings vLLM back."""
    the_plan = whole_bridge_plan(make_plan)
    assert the_plan.dark_names == () and the_plan.handoff.max_gap is None
    await to_the_last_hop(world, kube, host, repo, the_plan, Script(pull=5, fault="crash_loop"))
    with pytest.raises(CutoverError) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
    assert caught.value.cause == "crash_loop"
    (serving,) = named(events, "handoff.bridge_serving")
    assert "cutover-rollback" in serving["hint"] and serving["bridge"] == "coder"
    assert [t.to for t in commits(repo, PATH)] == ["coder"]  # still on the bridge

    async with probing(world) as failures, engines_follow_git(world, repo):
        back = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
    assert back.data["to"] == "vllm" and back.data["verified"] is True and failures == []
    free_candle = next(t for t in commits(repo, ENGINES) if t.backend == "candle" and t.step == "free")
    assert free_candle.to == "vllm"
    (candle_freed,) = [event for event in named(events, milestones.FREED) if event["backend"] == "candle"]
    assert candle_freed["drain"] == {}  # never served: not drained


async def test_a_target_failing_while_names_go_unanswered_sends_the_path_back_to_the_source(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]]) -> None:
    """reasoning-long has no backend while coder carries the Service: that gap is consented to for the target's
    way there only. candle crash-loops: candle is freed, vLLM restored as a rollback's restore, and the next
    PostSync switches from the bridge back to vLLM, which then holds."""
    the_plan = bridge_plan(make_plan)
    await to_the_last_hop(world, kube, host, repo, the_plan, Script(pull=5, fault="crash_loop"))
    with pytest.raises(CutoverError) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
    assert caught.value.cause == "crash_loop" and "vllm restored in" in caught.value.message
    assert "the Service goes back to vllm through coder once vllm is proven" in caught.value.message
    assert not named(events, "handoff.bridge_serving")
    restore, free_candle = commits(repo, ENGINES)[:2]
    assert (free_candle.step, free_candle.backend) == ("free", "candle")
    assert (restore.step, restore.backend, restore.to, restore.hold) == ("restore", "vllm", "vllm", "vllm")

    async with engines_follow_git(world, repo):
        back = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-4")), the_plan)
        assert back.data["to"] == "vllm" and back.data["committed"] is True
        switch_back, _ = commits(repo, PATH)
        assert (switch_back.source, switch_back.to, switch_back.hold) == ("coder", "vllm", "vllm")
        sim_argocd.apply_git(world, repo, PATH)
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-5"))
        held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-6")), the_plan)
    assert held.data == {"held": "vllm"}


async def test_names_unanswered_past_max_gap_send_the_path_back(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None) -> None:
    """maxGap counts from the switch to the bridge (its date in Git): candle loading for an hour is given up at
    the consented five minutes, `gap_exceeded`, exit 6, and `cutover plan` said the gap while it was open."""
    the_plan = bridge_plan(make_plan, max_gap="5m")
    loop = asyncio.get_running_loop()
    start = loop.time()
    await to_the_last_hop(world, kube, host, repo, the_plan, Script(pull=5, load=3600))
    state = told(await commands.show_plan(kube, the_plan, host=host), the_plan).data["handoff"]
    assert state["gap"]["names"] == ["reasoning-long"] and state["gap"]["left"] <= 300
    with pytest.raises(GapExceeded) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
    assert caught.value.exit_code == 6 and loop.time() - start <= 300 + 30
    assert "since the switch to the bridge coder in" in caught.value.message
    assert "left reasoning-long unanswered" in caught.value.message
    restore = commits(repo, ENGINES)[0]
    assert (restore.step, restore.backend, restore.hold) == ("restore", "vllm", "vllm")


async def test_cutover_plan_says_where_the_path_stands_and_the_next_hop(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None) -> None:
    the_plan = bridge_plan(make_plan)

    async def shown() -> dict[str, Any]:
        state: dict[str, Any] = told(await commands.show_plan(kube, the_plan, host=host), the_plan).data["handoff"]
        return state

    assert (await shown())["next"] == "switch to the bridge coder (proven on reasoning), toward candle"
    # issue 54's C7: candle committed stopped is how the handoff begins, not NOT READY `no_target_pods`
    first = told(await commands.show_plan(kube, the_plan, host=host), the_plan)
    assert first.data["ready"] is True and first.data["targetProof"] == {"stopped": True, "strategy": "bridge"}
    assert any("target candle: stopped in Git; the handoff starts it" in line for line in first.lines)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    waiting = await shown()
    assert waiting["next"] == "ArgoCD applies coder's selector" and waiting["bridge"]["toward"] == "candle"
    sim_argocd.apply_git(world, repo, PATH)
    assert (await shown())["next"] == "restore candle, draining and freeing vllm in the same sync"
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    after = told(await commands.show_plan(kube, the_plan, host=host), the_plan)
    assert after.data["handoff"]["next"] == "wait for candle, prove it and switch from the bridge coder to it"
    (line,) = [line for line in after.lines if line.startswith("  handoff: ")]
    assert "on the bridge coder toward candle since" in line
    assert "(reasoning-long unanswered since the switch to the bridge)" in line and "of maxGap left" in line
    # `cutover status` says the same, with the live selector beside Git's
    status = told(await commands.status(kube, the_plan, host=host), the_plan)
    assert status.data["handoff"]["git"] == "coder" and status.data["liveBackend"] == "coder"
    assert any(line.startswith("  handoff: strategy bridge, Git selects coder") for line in status.lines)


@pytest.mark.parametrize("event", ["handoff.bridging", "git.committed", "handoff.bridged", "handoff.bridge_verified",
                                   "handoff.draining", "handoff.freed", "handoff.restored", "lock.released"])
@pytest.mark.parametrize("hard", [False, True], ids=["SIGTERM", "SIGKILL"])
async def test_a_hop_killed_anywhere_and_run_again_commits_each_step_once(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        event: str, hard: bool) -> None:
    """docs/guarantees.md #5 along the bridge's path: each PostSync killed at the step named (SIGTERM: it lets go of
    the Lease; SIGKILL: the Lease stays held until it expires), and ArgoCD's Job run again, until the path is done:
    each hop committed once."""
    the_plan = bridge_plan(make_plan)
    for attempt in range(6):
        await killed_at(world, phases.postsync(Run.create(kube, the_plan, host, identity=f"job-{attempt}")), event,
                        hard=hard)
        argocd_syncs(world, repo)  # what the killed hop left in Git
        await phases.postsync(Run.create(kube, the_plan, host, identity=f"job-{attempt}-again"))  # the next pod
        argocd_syncs(world, repo)
        if [t.to for t in commits(repo, PATH)][:1] == ["candle"]:
            break
    switches = [(t.source, t.to) for t in commits(repo, PATH)]
    assert switches == [("vllm", "candle"), ("vllm", "coder")], switches  # newest first, each once
    assert [(t.step, t.backend) for t in commits(repo, ENGINES)] == [("restore", "candle"), ("free", "vllm")]


def argocd_syncs(world: World, repo: BareRepo) -> None:
    """ArgoCD applies the head: the Service's selector, and the engines' replicas (the scheduler binding a pod to
    the card only once the other engine's pod has gone)."""
    sim_argocd.apply_git(world, repo, PATH)
    reconcile(world, repo)
    reconcile(world, repo)


async def test_a_stream_in_flight_on_the_source_ends_before_the_source_is_freed(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None,
        events: list[dict[str, Any]]) -> None:
    """A client's stream to vLLM, begun before the switch to the bridge applies, still runs when the next PostSync
    would free vLLM: the drain waits for it (vLLM's in-flight gauge), and it ends whole, `data: [DONE]` included."""
    the_plan = bridge_plan(make_plan)
    (vllm,) = [pod for pod in world.pods.values() if pod.backend == "vllm"]
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    vllm.engine.latency = 40.0  # a long answer (its first token after 40 s), within the drain timeout (1m)

    async def stream() -> str:
        async with httpx.AsyncClient(timeout=300) as client, client.stream(
                "POST", f"http://{world.cluster_ip}:80/v1/chat/completions",
                json={"model": "reasoning", "stream": True, "max_tokens": 4,
                      "messages": [{"role": "user", "content": "a long answer"}]}) as answer:
            return (await answer.aread()).decode()

    streaming = asyncio.create_task(stream())
    await asyncio.sleep(1)
    assert vllm.engine.in_flight == 1
    sim_argocd.apply_git(world, repo, PATH)  # the switch to the bridge applies: the stream's connection stays
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert vllm.engine.in_flight == 0  # answered whole before the free was committed
    assert (await streaming).rstrip().endswith("data: [DONE]")  # and the client has every byte of it
    (drained,) = named(events, "drain.done")
    assert drained["by"] == "metrics" and drained["seconds"] >= 35 and drained["complete"] is True
    assert [t.step for t in commits(repo, ENGINES)] == ["restore", "free"]


async def test_every_commit_of_the_path_names_one_cutover(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, one_gpu: None) -> None:
    """One `Cutover-Id` from the switch to the bridge to the target's switch, the free and the restore between them
    included: one Slack thread for the whole path."""
    the_plan = bridge_plan(make_plan)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_syncs(world, repo)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    argocd_syncs(world, repo)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
    ids = {t.id for t in commits(repo, PATH) + commits(repo, ENGINES)}
    assert len(ids) == 1 and len(commits(repo, PATH) + commits(repo, ENGINES)) == 4


async def test_one_slack_thread_says_every_hop(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                                               make_plan: Any, one_gpu: None) -> None:
    """Bot mode, each PostSync a process of its own (a new sender, the thread found again on the Lease): one thread
    for the whole path, a reply for each hop's milestones in their order, the head updated to where it stands."""
    import io

    import structlog

    from cutover import logs
    from cutover.kube import lease
    from cutover.slack import sink, threads, transports
    from doubles.slack import FakeSlack

    the_plan = bridge_plan(make_plan)
    async with FakeSlack() as slack:
        try:
            for job in range(1, 5):  # bridge; free and restore; switch; verification
                structlog.contextvars.clear_contextvars()  # a new process
                outbox = sink.Outbox()
                logs.configure(fmt="json", stream=io.StringIO(), sinks=[sink.SlackSink(outbox)])
                sender = sink.Sender(transports.Bot(slack.token, "C0123", api=slack.url + "/api"), outbox,
                                     store=threads.LeaseThreads(lease.Notes(kube, the_plan.service.namespace,
                                                                            the_plan.service.name)))
                sender.start()
                await phases.postsync(Run.create(kube, the_plan, host, identity=f"job-{job}"))
                await sender.flush(budget=60)
                argocd_syncs(world, repo)
        finally:
            structlog.reset_defaults()
    opened = [post for post in slack.posted if post.path.endswith("chat.postMessage") and "thread_ts" not in post.body]
    assert len(opened) == 1, [post.body["text"] for post in opened]  # one thread for the whole path
    replies = [post for post in slack.posted if "thread_ts" in post.body]
    assert {post.body["thread_ts"] for post in replies} == {"1700000000.000001"}
    said = [post.body["blocks"][1]["fields"][0]["text"].split("\n")[1] for post in replies]
    hops = [milestones.STAGES[name] for name in (milestones.BRIDGED, milestones.BRIDGE_VERIFIED,
                                                  milestones.DRAINING, milestones.FREED, milestones.RESTORED)]
    assert [stage for stage in said if stage in hops] == hops, said
    # the bridge and the target each proven, committed and verified: news twice, not a re-run's repetition
    assert [said.count(stage) for stage in ("names proven", "committed", "verified")] == [2, 3, 2], said
    assert said[-1] == "completed", said
