"""End to end, in fake time: a stand-in for ArgoCD syncs Git to the emulated cluster in ArgoCD's order
(PreSync, apply with the Service patched in place, PostSync; a commit made during a sync is synced
by the next one), while a client keeps calling the Service's name through a kube-proxy stand-in and
counts every failed request. Hooks are our phases, with ArgoCD's hook Job names."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cutover import errors, plan
from cutover.core.repository import Author
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import NAMESPACE, SERVICE, Script, World
from cutover.flows import explicit, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from helpers import Client, told

pytestmark = pytest.mark.looptime

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
AUTHOR = Author("cutover", "cutover@example.invalid")
APPS = "argoproj.io/v1alpha1/applications"


@dataclasses.dataclass
class ArgoCD:
    """Automated sync with selfHeal, reduced to what the hooks see (docs/sources.md, docs/guarantees.md's flow)."""

    world: World
    kube: cluster.Cluster
    host: GitHub
    repo: BareRepo
    plan: plan.Plan
    synced: str | None = None
    outcomes: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (revision, phase outcome)
    kill_postsync_after: float | None = None  # delete the next PostSync hook mid-run, as ArgoCD may

    async def run(self) -> None:
        while True:
            head = self.repo.head() or ""
            application = self.world.kube.stored(APPS, "argocd", "llm-serving") or {}
            asked = "argocd.argoproj.io/refresh" in ((application.get("metadata") or {}).get("annotations") or {})
            if head != self.synced or asked:
                await self.sync(head)
            await asyncio.sleep(5)

    async def sync(self, revision: str) -> None:
        self.synced = revision
        self.world.kube.merge(APPS, "argocd", "llm-serving", {
            "metadata": {"annotations": {"argocd.argoproj.io/refresh": None}},
            "status": {"operationState": sim_argocd.operation_state(self.world, "Running", revision, finished=False)}})
        job = "cutover-presync-llm-serving"  # a named hook (kustomize builds no generateName): the revision is
        try:  # the Application operation's
            await phases.presync(Run.create(self.kube, self.plan, self.host), job_name=job)
        except errors.CutoverError as exc:
            self.outcomes.append((revision[:7], f"presync failed: {exc.cause}"))
            self._finish(revision, "Failed")
            return
        sim_argocd.apply_git(self.world, self.repo, PATH, revision=revision)  # rendered, applied in place
        identity = f"postsync-{revision[:7]}-{len(self.outcomes)}"
        hook = asyncio.create_task(phases.postsync(Run.create(self.kube, self.plan, self.host, identity=identity)))
        if self.kill_postsync_after is not None:
            done, _ = await asyncio.wait([hook], timeout=self.kill_postsync_after)
            self.kill_postsync_after = None
            if not done:  # the hook Job is deleted (SIGTERM): the operation fails and is retried from scratch
                hook.cancel()
                await asyncio.gather(hook, return_exceptions=True)
                self.outcomes.append((revision[:7], "postsync killed"))
                self.synced = None
                self._finish(revision, "Failed")
                return
        try:
            report = await hook
            self.outcomes.append((revision[:7], f"postsync: {told(report, self.plan).summary}"))
        except errors.CutoverError as exc:
            self.outcomes.append((revision[:7], f"postsync failed: {exc.cause}"))
        self._finish(revision, "Succeeded")

    def _finish(self, revision: str, phase: str) -> None:
        self.world.kube.merge(APPS, "argocd", "llm-serving", {"status": {
            "sync": {"status": "Synced", "revision": revision}, "health": {"status": "Healthy"},
            "operationState": sim_argocd.operation_state(self.world, phase, revision)}})



@contextlib.asynccontextmanager
async def running(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                  the_plan: plan.Plan) -> AsyncIterator[tuple[ArgoCD, Client]]:
    sim_argocd.seed_application(world)
    argocd = ArgoCD(world, kube, host, repo, the_plan)
    client = Client(f"http://{world.cluster_ip}:80/v1/chat/completions")
    tasks = [asyncio.create_task(argocd.run(), name="argocd"), asyncio.create_task(client.run(), name="client")]
    try:
        yield argocd, client
    finally:
        for task in tasks:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes), outcomes


def cutover_commits(repo: BareRepo) -> list[str]:
    return [e.message.split("\n")[0] for e in repo.log(PATH) if e.message.startswith("cutover(")]


async def until(condition: Any, *, within: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, "the story did not reach its end in time"
        await asyncio.sleep(1)


async def test_the_happy_path_has_no_gap_in_the_name(world: World, kube: cluster.Cluster, host: GitHub,
                                                     repo: BareRepo, make_plan: Any) -> None:
    vllm = world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", Script(pull=60, load=900))
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        await until(lambda: any("verified" in outcome for _, outcome in argocd.outcomes), within=1800)
        await asyncio.sleep(30)  # clients keep being served after the switch
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]
    live = world.kube.stored("/v1/services", NAMESPACE, SERVICE)
    assert live is not None and live["spec"]["selector"] == the_plan.backends["candle"].selector
    assert client.failed == 0 and client.sent > 900
    served = [ip for port, ip in world.proxied if port == 80]
    assert served.count(vllm.ip) > 900 and served.count(candle.ip) >= 30  # served before, and after
    phases_seen = [outcome.split(":")[0] for _, outcome in argocd.outcomes]
    assert phases_seen == ["postsync", "postsync"]  # commit in the first sync, verify in the next


async def test_a_target_that_never_becomes_ready_changes_nothing(world: World, kube: cluster.Cluster,
                                                                 host: GitHub, repo: BareRepo,
                                                                 make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=20, fault="crash_loop"))
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        await until(lambda: bool(argocd.outcomes), within=600)
    assert argocd.outcomes[0][1] == "postsync failed: crash_loop"
    assert cutover_commits(repo) == []
    live = world.kube.stored("/v1/services", NAMESPACE, SERVICE)
    assert live is not None and live["spec"]["selector"] == the_plan.backends["vllm"].selector
    assert client.failed == 0


async def test_a_person_committing_during_the_cutover(world: World, kube: cluster.Cluster, host: GitHub,
                                                      repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=60, load=600))
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        await asyncio.sleep(300)
        content, _ = repo.read(PATH)  # type: ignore[misc]
        repo.commit({PATH: content.replace("# Ports:", "# Ports (see runbook):")}, "docs: ports\n",
                    name="Jo Operator", email="jo@example.invalid")
        await until(lambda: any("verified" in outcome for _, outcome in argocd.outcomes), within=1800)
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]
    content, _ = repo.read(PATH)  # type: ignore[misc]
    assert "# Ports (see runbook):" in content and "llm-reasoning-candle" in content
    assert client.failed == 0


async def test_manual_rollback_goes_back_without_a_gap_and_holds(world: World, kube: cluster.Cluster,
                                                                 host: GitHub, repo: BareRepo,
                                                                 make_plan: Any) -> None:
    vllm = world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        await until(lambda: any("verified" in outcome for _, outcome in argocd.outcomes), within=600)
        report = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="cutover-rollback-1")),
                      the_plan)
        await until(lambda: any("held" in outcome for _, outcome in argocd.outcomes), within=600)
        await asyncio.sleep(60)  # more syncs come and go: the hold keeps PostSync from re-applying
    assert report.data["to"] == "vllm" and report.data["verified"] is True
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): candle -> vllm",
                                     "cutover(reasoning-long-predictor): vllm -> candle"]
    live = world.kube.stored("/v1/services", NAMESPACE, SERVICE)
    assert live is not None and live["spec"]["selector"] == the_plan.backends["vllm"].selector
    assert client.failed == 0
    assert [ip for port, ip in world.proxied if port == 80][-1] == vllm.ip


async def test_a_target_that_breaks_after_the_switch_is_rolled_back(world: World, kube: cluster.Cluster,
                                                                    host: GitHub, repo: BareRepo,
                                                                    make_plan: Any) -> None:
    vllm = world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        await until(lambda: any("verified" in outcome for _, outcome in argocd.outcomes), within=600)
        candle.engine.fault = "503"  # still Ready to the kubelet, failing every client
        failed_before = client.failed
        world.kube.merge(APPS, "argocd", "llm-serving",
                         {"metadata": {"annotations": {"argocd.argoproj.io/refresh": "normal"}}})  # a sync comes
        await until(lambda: any("held" in outcome for _, outcome in argocd.outcomes), within=600)
        recovered = client.failed
        await asyncio.sleep(60)
    outcomes = [outcome for _, outcome in argocd.outcomes]
    assert "postsync failed: verification_failed_rolled_back" in outcomes
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): candle -> vllm",
                                     "cutover(reasoning-long-predictor): vllm -> candle"]
    live = world.kube.stored("/v1/services", NAMESPACE, SERVICE)
    assert live is not None and live["spec"]["selector"] == the_plan.backends["vllm"].selector
    assert failed_before == 0 and recovered > 0  # clients failed while the broken target was selected...
    assert client.failed == recovered  # ...and not once after the rollback was applied
    assert [ip for port, ip in world.proxied if port == 80][-1] == vllm.ip


async def test_a_hook_killed_mid_wait_is_run_again_and_commits_once(world: World, kube: cluster.Cluster,
                                                                    host: GitHub, repo: BareRepo,
                                                                    make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=60, load=900))
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        argocd.kill_postsync_after = 400  # mid-wait: the candle pod is still loading
        await until(lambda: any("verified" in outcome for _, outcome in argocd.outcomes), within=1800)
    outcomes = [outcome.split(":")[0] for _, outcome in argocd.outcomes]
    assert outcomes == ["postsync killed", "postsync", "postsync"]  # killed, re-run commits, next sync verifies
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]
    assert client.failed == 0


async def test_run_and_postsync_at_once_one_of_them_holds_the_lease(world: World, kube: cluster.Cluster,
                                                                   host: GitHub, repo: BareRepo,
                                                                   make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=60, load=600))
    the_plan = make_plan()
    async with running(world, kube, host, repo, the_plan) as (argocd, client):
        await asyncio.sleep(120)  # PostSync of the first sync holds the Lease and waits for candle
        with pytest.raises(errors.LockHeld) as caught:
            await explicit.run(Run.create(kube, the_plan, host, identity="cutover-run-1"))
        await until(lambda: any("verified" in outcome for _, outcome in argocd.outcomes), within=1800)
    assert caught.value.exit_code == 8 and "postsync-" in caught.value.message
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]
    assert client.failed == 0
