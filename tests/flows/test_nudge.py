"""The nudge (docs/sources.md, "After the hook"): a hook that commits while its own operation runs makes a Job from
the workload's audit CronJob, and `cutover nudge` waits for that operation to end, asks ArgoCD to refresh, and sees
the sync of the commit start, in seconds; a sync that starts without hooks is taken on at once by the audit's
rules. In the simulated world, in fake time."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cutover.core.results import Advanced, Audited, Nudged
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.flows import nudge, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster, nudge_job
from cutover.sources import kustomize_build
from helpers import named

pytestmark = pytest.mark.looptime

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "llm-serving" / "workload"
HOOK = "cutover-postsync-llm-serving"


def shipped_cronjob(namespace: str) -> dict[str, Any]:
    """The example's audit CronJob, as kustomize builds the hooks Component for it."""
    done = subprocess.run([*kustomize_build.require(), str(EXAMPLE)], capture_output=True, text=True, check=True,
                          timeout=60)
    (cronjob,) = [doc for doc in YAML(typ="safe").load_all(done.stdout)
                  if doc and doc["kind"] == "CronJob" and doc["metadata"]["name"] == "cutover-audit-llm-serving"]
    cronjob["metadata"]["namespace"] = namespace
    return dict(cronjob)


def operation(world: World, phase: str, revision: str, **more: Any) -> None:
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
        "operationState": sim_argocd.operation_state(world, phase, revision, finished=phase != "Running", **more)}})


def ended(world: World) -> None:
    """The running operation ends Succeeded, as it began."""
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {"operationState": {
        "phase": "Succeeded", "finishedAt": world.kube.stamp(), "message": sim_argocd.SUCCEEDED}}})


def refresh_asked(world: World) -> bool:
    stored = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving") or {}
    return "argocd.argoproj.io/refresh" in (stored["metadata"].get("annotations") or {})


async def test_a_hooks_commit_during_its_operation_makes_a_nudge_job(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    world.kube.apply("batch/v1/cronjobs", shipped_cronjob(kube.own_namespace))
    sim_argocd.seed_application(world)
    operation(world, "Running", repo.head())  # the PostSync runs inside this sync
    done = await phases.postsync(Run.create(kube, make_plan(), host, identity="p-1", hook_job=HOOK))
    assert isinstance(done, Advanced) and done.committed
    assert not refresh_asked(world)  # not during the operation (argo-cd#27875)
    (made,) = named(events, "argocd.nudge_made")
    (job,) = world.kube.objects("batch/v1/jobs", kube.own_namespace)
    assert made["job"] == f"{kube.own_namespace}/{job['metadata']['name']}"
    assert job["metadata"]["name"].startswith("cutover-nudge-llm-serving-")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["nudge"] and job["spec"]["activeDeadlineSeconds"] == nudge_job.DEADLINE
    assert {"name": "CUTOVER_DEADLINE_SECONDS", "value": str(nudge_job.DEADLINE)} in container["env"]
    assert "ownerReferences" not in job["metadata"]  # the CronJob's health never counts it


@pytest.mark.parametrize(("hook", "cronjob", "said"), [
    (None, True, None),  # a run by hand: it refreshes itself once no operation runs
    (HOOK, False, "argocd.nudge_unmade"),
], ids=["not-a-hook", "no-audit-cronjob"])
async def test_no_nudge_without_a_hook_or_its_cronjob(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]], hook: str | None, cronjob: bool, said: str | None) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    if cronjob:
        world.kube.apply("batch/v1/cronjobs", shipped_cronjob(kube.own_namespace))
    sim_argocd.seed_application(world)
    operation(world, "Running", repo.head())
    await phases.postsync(Run.create(kube, make_plan(), host, identity="p-1", hook_job=hook))
    assert world.kube.objects("batch/v1/jobs", kube.own_namespace) == []
    assert [e["event"] for e in events if e["event"].startswith("argocd.nudge")] == ([said] if said else [])
    if said:
        assert "ArgoCD syncs the commit at its next look at Git" in named(events, said)[0]["hint"]


async def committed_in_its_sync(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                                the_plan: Any) -> Advanced:
    """Both engines serving; the PostSync commits the switch while its own sync of the revision before runs."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    sim_argocd.seed_application(world)
    operation(world, "Running", repo.head() or "")
    done = await phases.postsync(Run.create(kube, the_plan, host, identity="p-1"))
    assert isinstance(done, Advanced) and done.committed
    return done


async def test_the_nudge_refreshes_once_the_operation_ended_and_sees_the_sync_start(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    the_plan = make_plan()
    done = await committed_in_its_sync(world, kube, host, repo, the_plan)
    nudging = asyncio.create_task(nudge.nudge(Run.create(kube, the_plan, host, identity="n-1")))
    await asyncio.sleep(5)
    assert not refresh_asked(world) and not nudging.done()  # the hook's operation still runs
    ended(world)  # it ends: of the revision before the commit
    await asyncio.sleep(2)
    assert refresh_asked(world)  # asked once it ended: ArgoCD resolves the branch anew
    await asyncio.sleep(3)
    operation(world, "Running", done.sha)  # ArgoCD syncs the commit, hooks and all
    result = await nudging
    assert isinstance(result, Nudged) and (result.state, result.commit, result.refreshes) == ("taken", done.sha, 1)
    assert 7 <= result.waited <= 12
    (taken,) = named(events, "argocd.taken")
    assert taken["revision"] == done.sha[:12]


async def test_a_sync_without_hooks_is_taken_on_by_the_audits_rules_at_once(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """A refresh during the hook's operation (a Git webhook) made ArgoCD sync the switch selectively: no PostSync
    verifies it, so the nudge does what the audit would, without waiting for its schedule."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sim_argocd.seed_application(world)
    done = await phases.postsync(Run.create(kube, the_plan, host, identity="p-1"))
    assert isinstance(done, Advanced)
    sim_argocd.apply_git(world, repo, PATH)  # applied by a selective self-heal sync
    operation(world, "Succeeded", done.sha, selected=[{"group": "", "kind": "Service",
                                                       "name": "reasoning-long-predictor"}])
    result = await nudge.nudge(Run.create(kube, the_plan, host, identity="n-1"))
    assert isinstance(result, Audited) and (result.state, result.backend) == ("verified", "candle")
    assert named(events, "argocd.synced_without_hooks")[0]["level"] == "warning"


async def test_nothing_to_nudge_when_argocd_holds_the_commit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    sim_argocd.seed_application(world)
    result = await nudge.nudge(Run.create(kube, make_plan(), host, identity="n-1"))
    assert isinstance(result, Nudged) and result.state == "nothing" and result.refreshes == 0


async def test_a_dry_run_looks_once_and_asks_nothing(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    the_plan = make_plan()
    await committed_in_its_sync(world, kube, host, repo, the_plan)
    ended(world)
    result = await nudge.nudge(Run.create(kube, the_plan, host, identity="n-1", dry_run=True))
    assert isinstance(result, Nudged) and (result.state, result.refreshes) == ("not_taken", 0)
    assert not refresh_asked(world)

