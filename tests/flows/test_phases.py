"""The PreSync gate over the emulated cluster, the engine doubles and a GitHub double over a real bare
repository, in fake time: no change passes at once; a change is proven first; a failure aborts."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import argocd_observed
from conftest import GIT_TOKEN
from cutover import plan
from cutover.core import commits, milestones
from cutover.core.repository import Author
from cutover.core.switch import switch_problems
from cutover.core.trailers import Trailers
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import BACKENDS, Script, World
from cutover.errors import CutoverError, LockHeld, NamesNotProven, SyncTimeout, TargetNotReady, VerificationFailed
from cutover.flows import explicit, phases, writeback
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from cutover.sources import yaml_edit
from helpers import named, told

pytestmark = pytest.mark.looptime

FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"



def switch(repo: BareRepo, the_plan: plan.Plan, to: str) -> str:
    content, _ = repo.read(PATH)  # type: ignore[misc]
    edit = yaml_edit.edit_selector(content, document=the_plan.git.document, selector_path="spec.selector",
                                  selector=the_plan.backends[to].selector)
    return repo.commit({PATH: edit.after}, f"cutover: -> {to}\n")


def job(sha: str) -> str:
    return f"cutover-presync-{sha[:7]}-presync-1764457200"


async def test_no_change_pending_passes_at_once(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                                                make_plan: Any, events: list[dict[str, Any]]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", Script(fault="crash_loop"))
    the_plan = make_plan()
    report = told(await phases.presync(Run.create(kube, the_plan, host), job_name=job(repo.head() or "")), the_plan)
    assert report.data == {"changed": False} and "nothing to gate" in report.summary
    assert vllm.engine.requests == [] and candle.engine.requests == []  # no proof, no waiting
    assert named(events, "presync.no_change")
    assert [e for e in events if e["event"] in milestones.STAGES] == []  # so nothing for Slack either


async def test_a_change_to_a_ready_backend_is_proven(world: World, kube: cluster.Cluster, host: GitHub,
                                                     repo: BareRepo, make_plan: Any,
                                                     events: list[dict[str, Any]]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sha = switch(repo, the_plan, "candle")
    report = told(await phases.presync(Run.create(kube, the_plan, host), job_name=job(sha)), the_plan)
    assert report.data["backend"] == "candle" and report.data["proof"]["pods"][0]["names"] == [
        "reasoning-long", "reasoning"]
    assert len(candle.engine.requests) == 2
    assert named(events, "drain.unsafe") == []  # the simulated vLLM drains within its grace period
    # docs/capacity.md: one without --shutdown-timeout would cut its streams; a warning, the gate still passes
    world.kube.merge("/v1/pods", "llm-serving", vllm.name, {"spec": {"containers": [{"name": "engine"}]}})
    told(await phases.presync(Run.create(kube, the_plan, host), job_name=job(sha)), the_plan)
    (unsafe,) = named(events, "drain.unsafe")
    assert unsafe["backend"] == "vllm" and "without --shutdown-timeout" in unsafe["message"]


async def test_the_revision_being_synced_not_the_branch_head(world: World, kube: cluster.Cluster, host: GitHub,
                                                            repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    the_plan = make_plan()
    synced = repo.head() or ""
    switch(repo, the_plan, "candle")  # committed after the sync started: the next sync's business
    report = told(await phases.presync(Run.create(kube, the_plan, host), job_name=job(synced)), the_plan)
    assert report.data == {"changed": False}


async def test_a_change_to_a_broken_backend_aborts_the_sync(world: World, kube: cluster.Cluster, host: GitHub,
                                                            repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=10, fault="crash_loop"))
    the_plan = make_plan()
    sha = switch(repo, the_plan, "candle")
    with pytest.raises(TargetNotReady) as caught:
        await phases.presync(Run.create(kube, the_plan, host), job_name=job(sha))
    assert caught.value.cause == "crash_loop" and caught.value.exit_code == 3


async def test_a_selector_that_also_picks_the_other_backends_pods_is_refused(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    loose = make_plan()
    candle = dataclasses.replace(loose.backends["candle"], selector={"component": "predictor"})
    loose = dataclasses.replace(loose, backends={**loose.backends, "candle": candle})
    sha = switch(repo, loose, "candle")
    with pytest.raises(NamesNotProven) as caught:
        await phases.presync(Run.create(kube, loose, host), job_name=job(sha))
    assert caught.value.cause == "selector_overlap"
    assert "also picks pods of backend vllm: reasoning-long-predictor-vllm-" in caught.value.message


async def test_a_hand_edited_selector_is_not_gated(world: World, kube: cluster.Cluster, host: GitHub,
                                                   repo: BareRepo, make_plan: Any,
                                                   events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    content, _ = repo.read(PATH)  # type: ignore[misc]
    sha = repo.commit({PATH: content.replace("component: predictor", "component: canary")}, "canary\n")
    report = told(await phases.presync(Run.create(kube, make_plan(), host), job_name=job(sha)), make_plan())
    assert report.data == {"changed": True, "backend": None}
    assert named(events, "presync.unknown_selector")


def test_backend_of() -> None:
    world = World.__new__(World)
    world.port = 8080
    (the_plan,) = plan.parse(world.plan_text())
    assert commits.backend_of(the_plan, BACKENDS["candle"]["labels"]) == "candle"
    assert commits.backend_of(the_plan, {"app": "other"}) is None


# --- postsync ---------------------------------------------------------------------------------------------

AUTHOR = Author("cutover", "cutover@example.invalid")
APPS = "argoproj.io/v1alpha1/applications"
LEASES = "coordination.k8s.io/v1/leases"


def seed_application(world: World) -> None:
    sim_argocd.seed_application(world)


def cutover_commits(repo: BareRepo) -> list[str]:
    return [e.message for e in repo.log(PATH) if e.message.startswith("cutover(")]


def argocd_applies(world: World, repo: BareRepo) -> None:
    """What ArgoCD does with the commit: render the source and patch the live Service's selector in place."""
    sim_argocd.apply_git(world, repo, PATH)


async def test_postsync_waits_proves_commits_once_and_asks_argocd_to_refresh(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=45, load=660))
    the_plan = make_plan()
    service = world.kube.stored("/v1/services", "llm-serving", "reasoning-long-predictor")
    assert service is not None
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    assert report.data["committed"] is True
    (message,) = cutover_commits(repo)
    assert message.startswith("cutover(reasoning-long-predictor): vllm -> candle\n\nProven ")
    assert f"Cutover-Service-Uid: {service['metadata']['uid']}\nCutover-Cluster-Ip: {world.cluster_ip}" in message
    application = world.kube.stored(APPS, "argocd", "llm-serving")
    assert application is not None and application["metadata"]["annotations"] == {
        "argocd.argoproj.io/refresh": "normal"}
    lease_object = world.kube.stored(LEASES, "llm-serving", "cutover-reasoning-long-predictor")
    assert lease_object is not None and lease_object["spec"].get("holderIdentity") is None  # released
    assert [e["reason"] for e in world.kube.objects("/v1/events", "llm-serving")] == ["CutoverCommitted"]
    names = [e["event"] for e in events]
    assert names.index("target.ready") < names.index("names.proven") < names.index("git.committed") < \
        names.index("argocd.refresh_requested")


async def test_postsync_on_a_full_gpu_node_stops_at_once_and_commits_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """The reference cluster's case (docs/capacity.md): vLLM holds the only card, candle cannot schedule. PostSync
    under strategy parallel stops within seconds with exit 3 capacity_held_by_source, never a 30-minute wait, never a
    gap; the Lease is given back and nothing reaches Git."""
    seed_application(world)
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    world.add_pod("candle", Script(fault="unschedulable"), gpus=1)
    the_plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    assert loop.time() - start <= 5
    assert caught.value.cause == "capacity_held_by_source" and caught.value.exit_code == 3
    assert "vllm holds 1" in caught.value.message
    assert "handoff.strategy: bridge" in caught.value.hint and "recreate with handoff.maxGap" in caught.value.hint
    assert cutover_commits(repo) == []
    lease_object = world.kube.stored(LEASES, "llm-serving", "cutover-reasoning-long-predictor")
    assert lease_object is not None and lease_object["spec"].get("holderIdentity") is None  # released
    assert named(events, "capacity.judged")[0]["fit"] == "fits_once_source_gone"


async def test_postsync_again_before_argocd_applied_commits_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    again = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert again.data == {"applied": False} and len(cutover_commits(repo)) == 1


async def test_postsync_after_argocd_applied_verifies_the_switch(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = make_plan()
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert report.data == {"verified": True, "endpoints": [candle.ip]}
    (verified,) = named(events, "service.verified")
    assert verified["ports"] == [80, 8080] and verified["names"] == ["reasoning-long", "reasoning"]
    # No cluster DNS here: the names went through the ClusterIP, on both Service ports, to the candle pod.
    assert named(events, "service.dns_unavailable")[0]["using"] == world.cluster_ip
    assert sorted(set(world.proxied)) == [(80, candle.ip), (8080, candle.ip)]
    # the proof before the commit; then, per port, one per name and who answers (/v1/models' owned_by)
    assert len(candle.engine.requests) == 2 + 2 * (2 + 1)
    assert len(world.proxied) == 2 * (2 + 1)  # each on a connection of its own: kube-proxy chose for each


async def test_a_postsync_reads_the_file_once_and_its_history_once(
        world: World, kube: cluster.Cluster, repo: BareRepo, make_plan: Any) -> None:
    """Advancing (wait, prove, commit), then verifying: each reads Git once per kind; the commit is one PUT, read
    back once before it counts as committed."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        the_plan = make_plan(git_api_url=fake.url)
        client = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        kinds = []
        for identity in ("job-1", "job-2"):
            fake.requests.clear()
            await phases.postsync(Run.create(kube, the_plan, client, identity=identity))
            kinds.append(sorted((method, path.split("?")[0].rsplit("/", 1)[-1] if "/contents/" not in path
                                 else "contents") for method, path, _ in fake.requests))
            argocd_applies(world, repo)
        await client.aclose()
    assert kinds == [[("GET", "commits"), ("GET", "contents"), ("GET", "contents"), ("PUT", "contents")],
                     [("GET", "commits"), ("GET", "contents")]]


async def test_a_recreated_service_fails_verification_with_exit_6(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    service = world.kube.remove("/v1/services", "llm-serving", "reasoning-long-predictor")
    assert service is not None
    service["metadata"].pop("uid")
    service["spec"]["clusterIP"] = "10.96.99.99"
    world.kube.apply("/v1/services", service)
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert caught.value.exit_code == 6
    assert "re-created" in caught.value.message and "ClusterIP changed to 10.96.99.99" in caught.value.message


async def test_a_hook_killed_mid_wait_and_run_again_commits_once(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=30, load=900))
    the_plan = make_plan()
    first = asyncio.create_task(phases.postsync(Run.create(kube, the_plan, host, identity="job-1")))
    await asyncio.sleep(300)  # ArgoCD deletes the hook Job mid-wait
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert cutover_commits(repo) == []
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert report.data["committed"] is True and len(cutover_commits(repo)) == 1


async def test_another_cutover_holding_the_lease_means_exit_8(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=30, load=900))
    the_plan = make_plan()
    first = asyncio.create_task(phases.postsync(Run.create(kube, the_plan, host, identity="job-run")))
    await asyncio.sleep(100)
    with pytest.raises(LockHeld) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-postsync"))
    assert caught.value.exit_code == 8 and "job-run" in caught.value.message
    await first
    assert len(cutover_commits(repo)) == 1


async def test_a_rollback_hold_stops_postsync(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                                              make_plan: Any, events: list[dict[str, Any]]) -> None:
    the_plan = make_plan()
    switch(repo, the_plan, "candle")  # the cutover...
    content, _ = repo.read(PATH)  # type: ignore[misc]
    back = yaml_edit.edit_selector(content, document=the_plan.git.document, selector_path="spec.selector",
                                  selector=the_plan.backends["vllm"].selector)
    text = writeback.message(the_plan, trailers=Trailers(id="r0", source="candle", to="vllm", plan=the_plan.name,
                                                         hold="vllm"), proof=None)
    repo.commit({PATH: back.after}, text)  # ...and its rollback, holding on vllm
    world.add_pod("candle", ready=True)
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    assert report.data == {"held": "vllm"} and cutover_commits(repo) == [text.rstrip("\n")]
    assert named(events, "cutover.held")


async def test_a_rollback_hold_25_commits_back_still_stops_postsync(world: World, kube: cluster.Cluster,
                                                                    host: GitHub, repo: BareRepo, make_plan: Any,
                                                                    events: list[dict[str, Any]]) -> None:
    """The history is paged back to the newest cutover commit: people editing the file 25 times since the
    rollback (beyond one page of 20) do not make PostSync forget the hold."""
    the_plan = make_plan()
    switch(repo, the_plan, "candle")
    content, _ = repo.read(PATH)  # type: ignore[misc]
    back = yaml_edit.edit_selector(content, document=the_plan.git.document, selector_path="spec.selector",
                                  selector=the_plan.backends["vllm"].selector)
    text = writeback.message(the_plan, trailers=Trailers(id="r0", source="candle", to="vllm", plan=the_plan.name,
                                                         hold="vllm"), proof=None)
    repo.commit({PATH: back.after}, text)
    for number in range(25):
        content, _ = repo.read(PATH)  # type: ignore[misc]
        repo.commit({PATH: content.replace("# Ports:", f"# Ports ({number}):", 1) if number == 0 else
                     content.replace(f"# Ports ({number - 1}):", f"# Ports ({number}):")}, f"docs {number}\n")
    world.add_pod("candle", ready=True)
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-1")), the_plan)
    assert report.data == {"held": "vllm"}
    assert len([e for e in repo.log(PATH, limit=100) if e.message.startswith("cutover(")]) == 1  # no new commit
    assert not named(events, "git.history_bound")


@pytest.mark.parametrize(("trailers", "ready", "serving", "words"), [
    (Trailers(service_uid="u1", cluster_ip="10.0.0.1"), {"1.1.1.1"}, {"1.1.1.1"}, []),
    (Trailers(service_uid="u0"), {"1.1.1.1"}, {"1.1.1.1"}, ["re-created (uid u1, was u0)"]),
    (Trailers(cluster_ip="10.0.0.9"), {"1.1.1.1"}, {"1.1.1.1"}, ["ClusterIP changed to 10.0.0.1"]),
    (Trailers(), {"1.1.1.1"}, {"1.1.1.1", "2.2.2.2"}, ["EndpointSlices serve ['1.1.1.1', '2.2.2.2']"]),  # old pod kept
    (Trailers(), set(), set(), ["the target's Ready pods are []"]),  # nothing serves at all
])
def test_switch_problems(trailers: Trailers, ready: set[str], serving: set[str], words: list[str]) -> None:
    from cutover.core.views import ServiceView

    live = ServiceView("llm-serving", "s", "u1", "10.0.0.1", {}, ())
    problems = switch_problems(trailers, live, ready=ready, serving=serving).messages()
    assert len(problems) == len(words) and all(w in p for w, p in zip(words, problems, strict=True))


# --- run and rollback, with a stand-in for ArgoCD's auto-sync -------------------------------------------


@contextlib.asynccontextmanager
async def argocd_running(world: World, repo: BareRepo) -> AsyncIterator[None]:
    seed_application(world)
    async with sim_argocd.running(world, repo, PATH):
        yield


async def test_the_stand_in_records_a_sync_as_the_real_argocd_does(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    """What the real ArgoCD v3.5.3 held after the tier's reference story (e2e/gitops, scenario a), where the
    stand-in held less, each now recorded: the operation's message, the result's line for the Service patched in
    place, `status.history` (one entry per sync), `reconciledAt`, and the source and prune copied into the
    operation. Every write is checked against ArgoCD's CRD schema (tests/contracts.py)."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    async with argocd_running(world, repo):
        await explicit.run(Run.create(kube, make_plan(), host, identity="job-run"))
    status = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")["status"]
    state, (commit,) = status["operationState"], [e.sha for e in repo.log(PATH) if e.message.startswith("cutover(")]
    assert state["phase"] == "Succeeded" and state["message"] == "successfully synced (no more tasks)"
    assert state["operation"]["sync"]["revision"] == state["syncResult"]["revision"] == commit
    assert state["operation"]["sync"]["prune"] is True and state["operation"]["initiatedBy"] == {"automated": True}
    assert state["operation"]["sync"]["source"]["path"] == state["syncResult"]["source"]["path"]
    (service,) = [r for r in state["syncResult"]["resources"] if r["kind"] == "Service"]
    assert (service["status"], service["message"], service["syncPhase"]) == (
        "Synced", "service/reasoning-long-predictor configured", "Sync")
    assert [entry["revision"] for entry in status["history"]][-1] == commit
    assert [entry["id"] for entry in status["history"]] == list(range(len(status["history"])))
    assert status["reconciledAt"] == status["history"][-1]["deployStartedAt"]


@pytest.mark.looptime
@pytest.mark.parametrize("refresh", ["true", "always"])
async def test_the_stand_in_runs_the_reference_story_with_hooks_as_the_real_argocd_records_it(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, refresh: str,
        events: list[dict[str, Any]]) -> None:
    """The reference story with the hooks run by the stand-in (PreSync, the Service, PostSync, each sync inside a
    Running operation): a refresh (a person's commit) → the PostSync proves and commits, and asks for no refresh
    while the operation runs (argo-cd#27875) → ArgoCD compares with Git as the operation ends → the sync of
    cutover's commit, gated and verified. What the Application then holds is what the real
    ArgoCD v3.5.3 held after the same story (tests/fixtures/argocd-story.json, checked by e2e/gitops scenario a):
    the hooks' names and order, the operation's shape and message, one revision everywhere. With `refresh: always`
    (an ArgoCD with the fixed self-heal delay, docs/install.md) the PostSync asks for the refresh while its
    operation runs, and the story is the same."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    (the_plan,) = plan.parse(world.plan_text().replace(
        "  application: llm-serving\n", f"  application: llm-serving\n  refresh: {refresh}\n", 1))
    ran: list[str] = []

    def hook(kind: str, phase: Any, **options: Any) -> sim_argocd.Hook:
        async def job() -> int:
            ran.append(kind)
            try:
                await phase(Run.create(kube, the_plan, host, identity=f"job-{kind.lower()}-{len(ran)}"), **options)
            except CutoverError as exc:
                return exc.exit_code
            return 0
        return job

    hooks = {"PreSync": hook("PreSync", phases.presync, job_name="cutover-presync-llm-serving"),
             "PostSync": hook("PostSync", phases.postsync), "SyncFail": hook("SyncFail", phases.syncfail)}
    seed_application(world)
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"metadata": {"annotations": {
        "argocd.argoproj.io/refresh": "normal"}}})  # the person's commit, through the repository's webhook
    async with sim_argocd.running(world, repo, PATH, hooks=hooks):
        await asyncio.sleep(120)
    (commit,) = [e.sha for e in repo.log(PATH) if e.message.startswith("cutover(")]
    app = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
    assert ran == ["PreSync", "PostSync", "PreSync", "PostSync"]  # two syncs, no SyncFail
    asked, deferred = named(events, "argocd.refresh_requested"), named(events, "argocd.refresh_deferred")
    if refresh == "always":
        assert [e["operation"] for e in asked] == ["Running"] and not deferred
    else:
        assert [e["operation"] for e in deferred] == ["Running"] and not asked
    assert app["status"]["sync"]["revision"] == commit
    assert argocd_observed.observations(app) == argocd_observed.story()


async def test_run_waits_proves_commits_waits_for_argocd_and_verifies(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", Script(pull=30, load=300))
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with argocd_running(world, repo):
        report = told(await explicit.run(Run.create(kube, make_plan(), host, identity="job-run")), make_plan())
    assert report.data["verified"] is True and report.data["endpoints"] == [candle.ip]
    assert len(cutover_commits(repo)) == 1
    # Ready at 330 s plus up to one 15 s probe tick; then at most one stand-in tick (5 s) and one look (10 s).
    assert 330 <= loop.time() - start <= 345 + 5 + 10 + 1
    names = [e["event"] for e in events]
    assert names.index("git.committed") < names.index("argocd.synced") < names.index("service.verified") < \
        names.index("cutover.completed")


async def test_rollback_goes_back_and_holds_until_the_target_changes(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    async with argocd_running(world, repo):
        await explicit.run(Run.create(kube, the_plan, host, identity="job-run"))
        report = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
        held = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-postsync")), the_plan)
        lifted = told(await explicit.run(Run.create(kube, the_plan, host, identity="job-run-2"), to="candle"), the_plan)
    assert report.data["to"] == "vllm" and report.data["endpoints"] == [vllm.ip]
    lift, back, there = cutover_commits(repo)  # newest first
    assert back.startswith("cutover(reasoning-long-predictor): candle -> vllm") and "Cutover-Hold: vllm" in back
    assert "Cutover-Hold" not in there and "Cutover-Hold" not in lift
    assert named(events, "rollback.committed") and named(events, "cutover.held")
    assert held.data == {"held": "vllm"}
    assert lifted.data["to"] == "candle"


async def test_a_target_changed_away_and_back_ends_the_hold(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """Issue 54's C2: the hold lasts until the plan's target changes. A person sets the target to the held backend
    (to stay, as the hint says), then back to candle once fixed: the sync of that change goes to candle, where the
    hold was once read from the last cutover commit alone and met again."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    async with argocd_running(world, repo):
        await explicit.run(Run.create(kube, the_plan, host, identity="job-run"))
        await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback"))
        stay = told(await phases.postsync(Run.create(kube, make_plan(target="vllm"), host, identity="job-stay")),
                    make_plan(target="vllm"))
        assert "held" not in stay.data
        (lifted,) = named(events, "rollback.hold_lifted")
        again = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-again")), the_plan)
    assert again.data["to"] == "candle" and again.data["committed"] is True
    assert lifted["target"] == "vllm" and len(lifted["commit"]) == 12


async def test_run_when_argocd_never_applies_exits_7(world: World, kube: cluster.Cluster, host: GitHub,
                                                     repo: BareRepo, make_plan: Any) -> None:
    seed_application(world)  # but nobody syncs it
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    with pytest.raises(SyncTimeout) as caught:
        await explicit.run(Run.create(kube, make_plan(), host, identity="job-run"))
    assert caught.value.exit_code == 7 and "did not apply" in caught.value.message
    assert len(cutover_commits(repo)) == 1  # committed once; re-running continues from there


@pytest.mark.parametrize(("now", "trailers", "previous"), [
    ("candle", Trailers(source="vllm", to="candle"), "vllm"),
    ("candle", None, "vllm"),  # no cutover commit: the only other backend
    ("vllm", Trailers(source="vllm", to="candle"), "candle"),  # Git moved on by hand since
])
def test_previous_backend(now: str, trailers: Trailers | None, previous: str) -> None:
    world = World.__new__(World)
    world.port = 8080
    (the_plan,) = plan.parse(world.plan_text())
    from cutover.core.views import Commit

    last = Commit("abc", "t", "a", None, trailers) if trailers else None
    assert commits.previous_backend(the_plan, now, last) == previous


async def test_a_failed_verification_rolls_back_when_configured_and_exits_6(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = make_plan()
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    world.kube.merge("/v1/pods", "llm-serving", candle.name, {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}})  # the target breaks after the switch
    world.sync_endpoints()
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert caught.value.exit_code == 6 and caught.value.cause == "verification_failed_rolled_back"
    assert "rolled back to vllm in" in caught.value.message
    newest = cutover_commits(repo)[0]
    assert newest.startswith("cutover(reasoning-long-predictor): candle -> vllm") and "Cutover-Hold: vllm" in newest


async def test_without_auto_rollback_a_failed_verification_changes_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = dataclasses.replace(make_plan(), rollback_auto=False)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    world.delete_pod(candle.name)
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert caught.value.cause == "verification_failed" and len(cutover_commits(repo)) == 1


async def test_syncfail_reports_and_with_auto_rollback_brings_git_back_to_what_serves(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # Git now selects candle
    report = told(await phases.syncfail(Run.create(kube, the_plan, host, identity="job-syncfail")), the_plan)
    assert report.data["rolledBack"] is True
    assert cutover_commits(repo)[0].startswith("cutover(reasoning-long-predictor): candle -> vllm")
    (failed,) = named(events, "cutover.failed")
    assert failed["cause"] == "argocd_sync_failed" and failed["serving"] == "vllm" and failed["git"] == "candle"
    assert "CutoverSyncFailed" in [e["reason"] for e in world.kube.objects("/v1/events", "llm-serving")]


# What the real ArgoCD holds while its SyncFail hook runs after a PreSync gate failed (recorded on v3.2.11; the
# v3.5.3 tier's application-controller log shows the same operation message and resource results, word for word):
# the operation is still Running (SyncFail hooks are its last step), and the failure is the hook's resource result.
RUNNING_AFTER_A_FAILED_GATE = {
    "phase": "Running", "message": "waiting for completion of hook batch/Job/cutover-syncfail-llm-serving",
    "startedAt": "2026-12-01T23:18:02Z",
    "operation": {"sync": {"revision": "0631f0b6966985be1f0b4b3c66b1a1d6a24f2f9e"}},
    "syncResult": {"revision": "0631f0b6966985be1f0b4b3c66b1a1d6a24f2f9e", "resources": [
        {"group": "batch", "version": "v1", "kind": "Job", "namespace": "cutover",
         "name": "cutover-presync-llm-serving", "status": "Synced", "hookType": "PreSync", "hookPhase": "Failed",
         "syncPhase": "PreSync", "message": "Container cutover for pod cutover/cutover-presync-llm-serving-zpqlv "
                                            "failed with exit code 4 matching FailJob rule at index 0"},
        {"group": "batch", "version": "v1", "kind": "Job", "namespace": "cutover",
         "name": "cutover-syncfail-llm-serving", "status": "Synced", "hookType": "SyncFail",
         "hookPhase": "Running", "syncPhase": "SyncFail", "message": "job.batch/cutover-syncfail-llm-serving created"},
    ]},
}


async def test_syncfail_names_the_failed_hook_while_the_operation_is_still_running(
        world: World, kube: cluster.Cluster, host: GitHub, make_plan: Any, events: list[dict[str, Any]]) -> None:
    """Found on the real tier: the report said "ended Running", the phase of an operation whose SyncFail hook is
    its last step; the failed resources say what failed."""
    seed_application(world)
    stored = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
    world.kube.apply(sim_argocd.APPS, {**stored, "status": {**stored["status"],
                                                            "operationState": RUNNING_AFTER_A_FAILED_GATE}})
    world.add_pod("vllm", ready=True)
    the_plan = dataclasses.replace(make_plan(), rollback_auto=False)
    result = await phases.syncfail(Run.create(kube, the_plan, host, identity="job-syncfail"))
    assert result.message == ("ArgoCD's sync of 0631f0b69669 failed: Job/cutover-presync-llm-serving: Container "
                              "cutover for pod cutover/cutover-presync-llm-serving-zpqlv failed with exit code 4 "
                              "matching FailJob rule at index 0")
    (failed,) = named(events, "cutover.failed")
    assert failed["message"] == result.message and "Running" not in result.message


def failed_beside_the_postsync(revision: str) -> dict[str, Any]:
    """What the real ArgoCD 3.5 holds while SyncFail runs beside cutover's PostSync, after a team's own hook in the
    same wave failed to apply (e2e/gitops/test_terminate.py, whose SyncFail logged this ConfigMap's message word for
    word; gitops-engine's "one or more objects failed to apply" while hooks run)."""
    return {
        "phase": "Running", "message": "waiting for completion of hook batch/Job/cutover-postsync-llm-serving",
        "startedAt": "2026-12-03T12:40:02Z", "operation": {"sync": {"revision": revision}},
        "syncResult": {"revision": revision, "resources": [
            {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "llm-serving",
             "name": "smoke-test-results", "status": "SyncFailed", "hookType": "PostSync", "syncPhase": "PostSync",
             "message": 'ConfigMap "smoke-test-results" is invalid: data[last run]: Invalid value: "last run": a '
                        "valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',"
                        "  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"},
            {"group": "batch", "version": "v1", "kind": "Job", "namespace": "cutover",
             "name": "cutover-postsync-llm-serving", "status": "Synced", "hookType": "PostSync",
             "hookPhase": "Running", "syncPhase": "PostSync",
             "message": "job.batch/cutover-postsync-llm-serving created"},
            {"group": "batch", "version": "v1", "kind": "Job", "namespace": "cutover",
             "name": "cutover-syncfail-llm-serving", "status": "Synced", "hookType": "SyncFail",
             "hookPhase": "Running", "syncPhase": "SyncFail",
             "message": "job.batch/cutover-syncfail-llm-serving created"},
        ]},
    }


async def test_syncfail_beside_the_postsync_rolls_back_no_switch_the_failed_sync_never_tried(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """From ArgoCD 3.4 SyncFail starts at once beside a running PostSync when another object of its wave fails to
    apply. Here the PostSync's switch reaches Git first: SyncFail judges the revision that failed, which kept vLLM,
    and rolls back nothing (judging Git's head, it undid a proven switch for a failure not its own)."""
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()  # rollback.auto
    person = repo.head()
    assert person is not None
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))  # the switch in Git, not yet applied
    stored = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
    assert stored is not None
    world.kube.apply(sim_argocd.APPS, {**stored, "status": {**stored["status"],
                                                            "operationState": failed_beside_the_postsync(person)}})
    report = told(await phases.syncfail(Run.create(kube, the_plan, host, identity="job-syncfail")), the_plan)
    assert report.data == {"rolledBack": False} and len(cutover_commits(repo)) == 1
    (failed,) = named(events, "cutover.failed")
    assert (failed["serving"], failed["git"], failed["tried"]) == ("vllm", "candle", "vllm")
    assert failed["message"].startswith(f"ArgoCD's sync of {person[:12]} failed: ConfigMap/smoke-test-results: ")


async def test_syncfail_without_auto_rollback_changes_nothing(world: World, kube: cluster.Cluster, host: GitHub,
                                                              repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = dataclasses.replace(make_plan(), rollback_auto=False)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    report = told(await phases.syncfail(Run.create(kube, the_plan, host, identity="job-syncfail")), the_plan)
    assert report.data == {"rolledBack": False} and len(cutover_commits(repo)) == 1


async def test_names_failing_through_the_service_fail_verification(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = dataclasses.replace(make_plan(), rollback_auto=False)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    candle.engine.fault = "503"  # Ready to the kubelet, failing to clients
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert f"through {world.cluster_ip}:80: /v1/chat/completions answered 503" in caught.value.message
    assert f"through {world.cluster_ip}:8080:" in caught.value.message


async def test_through_the_service_the_answers_must_come_from_the_target_engine(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """Both engines serve the same names, so a data path that still reaches vLLM answers every one. The check
    through the Service asks who answers (`owned_by` in /v1/models), on a fresh connection for each request (a
    kept-alive one may still reach the old pods: kubernetes#38456), and tries again within the window kube-proxy
    may take before it fails."""
    world.add_pod("vllm", ready=True)
    vllm = next(pod for pod in world.pods.values() if pod.backend == "vllm")
    world.add_pod("candle", ready=True)
    the_plan = dataclasses.replace(make_plan(), rollback_auto=False)
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    world.stale_to = vllm.ip  # the ClusterIP still leads to the old engine
    with pytest.raises(VerificationFailed) as caught:
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
    assert f"through {world.cluster_ip}:80: answered by vllm (owned_by in /v1/models), not candle-vllm" in \
        caught.value.message
    assert named(events, "service.proof_retry")  # tried again while kube-proxy may still be behind
    world.stale_to = None
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert report.data["verified"] is True


async def test_kube_proxy_a_few_seconds_behind_the_switch_is_waited_for_not_rolled_back(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """Within kube-proxy's window the ClusterIP may still lead to the old engine: its answers are the old engine's
    to give (a name it does not list, say), so who answers is asked first and the check waits, as for a refused
    connection, instead of failing a switch that is about to land."""
    vllm = world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    argocd_applies(world, repo)
    world.stale_to = vllm.ip
    asyncio.get_running_loop().call_later(9, setattr, world, "stale_to", None)  # kube-proxy catches up
    report = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)
    assert report.data["verified"] is True and len(cutover_commits(repo)) == 1  # no rollback
    retried = named(events, "service.proof_retry")
    assert retried and all("answered by vllm" in problem for event in retried for problem in event["problems"])


async def test_dry_run_proves_and_shows_the_diff_but_writes_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    for result in (await phases.postsync(Run.create(kube, the_plan, host, identity="job-1", dry_run=True)),
                   await explicit.run(Run.create(kube, the_plan, host, identity="job-2", dry_run=True))):
        report = told(result, the_plan)
        assert report.data["dryRun"] is True and report.summary.startswith("dry run: vllm -> candle")
        assert "+    app.kubernetes.io/name: llm-reasoning-candle" in report.data["diff"]
    assert cutover_commits(repo) == []
    assert world.kube.stored(LEASES, "llm-serving", "cutover-reasoning-long-predictor") is None
    application = world.kube.stored(APPS, "argocd", "llm-serving")
    assert application is not None and not application["metadata"].get("annotations")
    assert world.kube.objects("/v1/events", "llm-serving") == []


async def test_run_asks_again_when_an_operation_that_began_during_the_wait_ends_without_its_commit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """argo-cd#21902: an operation that began before the commit can end without it (and a refresh asked for while
    it runs would be lost with it, or from ArgoCD 3.4 turn the next sync into a hook-less self-heal, argo-cd#27875:
    none is asked for then). Once it has ended, the refresh is asked for again."""
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=30, load=300))
    old = repo.head()

    async def lossy_argocd() -> None:
        await asyncio.sleep(100)  # an operation on the old revision begins while run still waits for candle
        world.kube.merge(APPS, "argocd", "llm-serving", {"status": {"operationState": sim_argocd.operation_state(
            world, "Running", old or "", finished=False)}})
        while repo.head() == old:  # noqa: ASYNC110 -- until cutover has committed (fake time)
            await asyncio.sleep(1)
        await asyncio.sleep(20)
        world.kube.merge(APPS, "argocd", "llm-serving", {"status": {
            "sync": {"status": "OutOfSync", "revision": old},
            "operationState": {"phase": "Succeeded", "finishedAt": world.kube.stamp()}}})
        await sim_argocd.autosync(world, repo, PATH)  # from now on, an ordinary ArgoCD

    argocd_task = asyncio.create_task(lossy_argocd())
    try:
        report = told(await explicit.run(Run.create(kube, make_plan(), host, identity="job-run")), make_plan())
    finally:
        argocd_task.cancel()
        await asyncio.gather(argocd_task, return_exceptions=True)
    assert report.data["verified"] is True
    assert len(named(events, "argocd.refresh_deferred")) == 1  # the commit's, while the old operation ran
    assert len(named(events, "argocd.refresh_again")) == 1
