"""The PreSync gate over the emulated cluster, the engine doubles and a GitHub double over a real bare
repository, in fake time: no change passes at once; a change is proven first; a failure aborts."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cutover import cluster, manifest, phases, plan
from cutover.errors import NamesNotProven, TargetNotReady
from cutover.githost.github import GitHub
from cutover.sim.contents import FakeContentsHost
from cutover.sim.gitrepo import BareRepo
from cutover.sim.world import BACKENDS, Script, World
from helpers import named

pytestmark = pytest.mark.looptime

TOKEN = "ghp_" + "P" * 36
FIXTURE = (Path(__file__).parent / "fixtures" / "reasoning-long-service.yaml").read_text()
PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    bare = BareRepo(tmp_path / "gitops.git")
    bare.commit({PATH: FIXTURE}, "Add the Service\n")
    return bare


@pytest.fixture
async def host(repo: BareRepo) -> AsyncIterator[GitHub]:
    async with FakeContentsHost(repo, token=TOKEN) as fake:
        client = GitHub(url="https://github.com/acme/gitops.git", branch="main", token=TOKEN, api_url=fake.url)
        yield client
        await client.aclose()


def switch(repo: BareRepo, the_plan: plan.Plan, to: str) -> str:
    content, _ = repo.read(PATH)  # type: ignore[misc]
    edit = manifest.edit_selector(content, document=the_plan.git.document, selector_path="spec.selector",
                                  selector=the_plan.backends[to].selector)
    return repo.commit({PATH: edit.after}, f"cutover: -> {to}\n")


def job(sha: str) -> str:
    return f"cutover-presync-{sha[:7]}-presync-1764457200"


async def test_no_change_pending_passes_at_once(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                                                make_plan: Any, events: list[dict[str, Any]]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", Script(fault="crash_loop"))
    report = await phases.presync(kube, make_plan(), host, job_name=job(repo.head() or ""))
    assert report.data == {"changed": False} and "nothing to gate" in report.summary
    assert vllm.engine.requests == [] and candle.engine.requests == []  # no proof, no waiting
    assert named(events, "presync.no_change")


async def test_a_change_to_a_ready_backend_is_proven(world: World, kube: cluster.Cluster, host: GitHub,
                                                     repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sha = switch(repo, the_plan, "candle")
    report = await phases.presync(kube, the_plan, host, job_name=job(sha))
    assert report.data["backend"] == "candle" and report.data["proof"]["pods"][0]["names"] == [
        "reasoning-long", "reasoning"]
    assert len(candle.engine.requests) == 2


async def test_the_revision_being_synced_not_the_branch_head(world: World, kube: cluster.Cluster, host: GitHub,
                                                            repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    the_plan = make_plan()
    synced = repo.head() or ""
    switch(repo, the_plan, "candle")  # committed after the sync started: the next sync's business
    report = await phases.presync(kube, the_plan, host, job_name=job(synced))
    assert report.data == {"changed": False}


async def test_a_change_to_a_broken_backend_aborts_the_sync(world: World, kube: cluster.Cluster, host: GitHub,
                                                            repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=10, fault="crash_loop"))
    the_plan = make_plan()
    sha = switch(repo, the_plan, "candle")
    with pytest.raises(TargetNotReady) as caught:
        await phases.presync(kube, the_plan, host, job_name=job(sha))
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
        await phases.presync(kube, loose, host, job_name=job(sha))
    assert caught.value.cause == "selector_overlap"
    assert "also picks pods of backend vllm: reasoning-long-predictor-vllm-" in caught.value.message


async def test_a_hand_edited_selector_is_not_gated(world: World, kube: cluster.Cluster, host: GitHub,
                                                   repo: BareRepo, make_plan: Any,
                                                   events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    content, _ = repo.read(PATH)  # type: ignore[misc]
    sha = repo.commit({PATH: content.replace("component: predictor", "component: canary")}, "canary\n")
    report = await phases.presync(kube, make_plan(), host, job_name=job(sha))
    assert report.data == {"changed": True, "backend": None}
    assert named(events, "presync.unknown_selector")


def test_backend_of() -> None:
    world = World.__new__(World)
    world.port = 8080
    (the_plan,) = plan.parse(world.plan_text())
    assert phases.backend_of(the_plan, BACKENDS["candle"]["labels"]) == "candle"
    assert phases.backend_of(the_plan, {"app": "other"}) is None
