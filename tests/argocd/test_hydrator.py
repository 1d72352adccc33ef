"""ArgoCD 3.x's Source Hydrator (docs/sources.md), end to end in the simulated world: cutover commits to the dry source,
the stand-in hydrates the dry branch into `environments/prod` and syncs the hydrated revision; "applied" means
the hydrator's drySHA is our commit, then the sync revision its hydratedSHA; the PreSync gate reads the hydrated
manifest at the revision being synced."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from cutover.argocd import operation
from cutover.core.results import Completed
from cutover.core.views import ApplicationView, HydratorView, SourceView
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import NAMESPACE, SERVICE, World
from cutover.errors import InvalidInput
from cutover.flows import explicit, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from helpers import Client, named

pytestmark = pytest.mark.looptime

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
DRY = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
HYDRATED = "ffeeddccbbaa00998877665544332211ffeeddcc"


def hydrated_app(**fields: Any) -> ApplicationView:
    hydrator = HydratorView(SourceView("https://github.com/acme/gitops.git", "main", "k8s/apps/llm-serving"),
                            "environments/prod", "llm-serving", **fields)
    return ApplicationView("argocd", "llm-serving", "Synced", HYDRATED, "Healthy", "Succeeded", HYDRATED, None, None,
                           False, hydrator=hydrator)


@pytest.mark.parametrize(("fields", "expected"), [
    ({"dry_sha": DRY, "hydrated_sha": HYDRATED, "phase": "Hydrated"}, HYDRATED),
    ({"dry_sha": DRY, "hydrated_sha": None, "phase": "Hydrating"}, None),  # not yet
    ({"dry_sha": "9" * 40, "hydrated_sha": HYDRATED, "phase": "Hydrated"}, None),  # an older dry commit
    ({"dry_sha": DRY, "hydrated_sha": HYDRATED, "phase": "Failed"}, None),  # retried by ArgoCD after ~120 s
])
def test_applied_means_hydrated_then_synced(fields: dict[str, Any], expected: str | None) -> None:
    assert operation.applied_revision(hydrated_app(**fields), DRY) == expected
    plain = dataclasses.replace(hydrated_app(**fields), hydrator=None)
    assert operation.applied_revision(plain, DRY) == DRY


def test_the_dry_revision_of_a_hydrated_one_is_known_only_from_a_finished_hydration() -> None:
    hydrator = hydrated_app(dry_sha=DRY, hydrated_sha=HYDRATED, phase="Hydrated").hydrator
    assert hydrator is not None
    assert hydrator.dry_of(HYDRATED) == DRY and hydrator.dry_of(HYDRATED[:7]) == DRY  # a hook Job's name's prefix
    assert hydrator.dry_of("1234567") is None and hydrator.dry_of(HYDRATED[:3]) is None
    hydrating = hydrated_app(dry_sha=DRY, hydrated_sha=HYDRATED, phase="Hydrating").hydrator
    assert hydrating is not None and hydrating.dry_of(HYDRATED) is None


@pytest.mark.parametrize(("path", "ok"), [
    ("k8s/apps/llm-serving", True), ("llm-serving/manifest.yaml", True), (".", True),
    ("/etc", False), ("../../secrets/manifest.yaml", False), ("a/../../b", False), ("a\\..\\b", False),
])
def test_a_path_the_application_names_stays_inside_the_repository(path: str, ok: bool) -> None:
    """What an Application (or its hydrator's syncSource.path) names is read and built by cutover: it must be a
    path inside the repository, as git.path must be (docs/sources.md)."""
    if ok:
        assert operation.repository_path(path, what="the source path") == path
        return
    with pytest.raises(InvalidInput) as caught:
        operation.repository_path(path, what="the Source Hydrator's syncSource.path")
    assert caught.value.cause == "argocd_path" and caught.value.exit_code == 2
    assert "the Source Hydrator's syncSource.path" in caught.value.message and "relative" in caught.value.hint


def live_selector(world: World) -> dict[str, str]:
    stored = world.kube.stored("/v1/services", NAMESPACE, SERVICE)
    assert stored is not None
    return dict(stored["spec"]["selector"])


async def test_a_cutover_through_the_source_hydrator(world: World, kube: cluster.Cluster, host: GitHub,
                                                     repo: BareRepo, make_plan: Any,
                                                     events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    await world.settled()
    sim_argocd.seed_application(world, hydrator=True)
    sim_argocd.apply_git(world, repo, PATH, revision=sim_argocd.hydrate(world, repo))
    the_plan = make_plan()
    client = Client(f"http://{world.cluster_ip}:80/v1/chat/completions")
    probing = asyncio.create_task(client.run())
    try:
        async with sim_argocd.running(world, repo, PATH):
            result = await explicit.run(Run.create(kube, the_plan, host, identity="cutover-run-1"))
        await asyncio.sleep(3)
    finally:
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
    assert isinstance(result, Completed) and result.verified.endpoints == (candle.ip,)
    ours = repo.log(PATH)[0]
    assert ours.message.startswith("cutover(reasoning-long-predictor): vllm -> candle") and result.commit == ours.sha
    hydration = repo.log(branch=sim_argocd.SYNC_BRANCH)[0]
    assert hydration.message.startswith(f"[Argo CD Bot] hydrate {ours.sha}")  # our dry commit, hydrated
    assert not [e for e in repo.log(branch=sim_argocd.SYNC_BRANCH) if e.message.startswith("cutover(")]
    assert live_selector(world) == dict(the_plan.backends["candle"].selector) and client.failed == 0
    refresh = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
    assert refresh is not None and not (refresh["metadata"].get("annotations") or {})  # both asks were taken up
    assert named(events, "argocd.synced")


async def test_the_presync_gate_reads_the_hydrated_manifest(world: World, kube: cluster.Cluster, host: GitHub,
                                                            repo: BareRepo, make_plan: Any,
                                                            events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    sim_argocd.seed_application(world, hydrator=True)
    sim_argocd.apply_git(world, repo, PATH, revision=sim_argocd.hydrate(world, repo))
    the_plan = make_plan()
    content, _ = repo.read(PATH)  # type: ignore[misc]
    repo.commit({PATH: content.replace("llm-reasoning   ", "llm-reasoning-candle   ").replace(
        "    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods\n", "")},
        "switch by hand, gated all the same\n")
    hydrated = sim_argocd.hydrate(world, repo)
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
        "operationState": sim_argocd.operation_state(world, "Running", hydrated, finished=False)}})
    gated = await phases.presync(Run.create(kube, the_plan, host), job_name="cutover-presync-llm-serving")
    assert gated.changed and gated.backend == "candle" and gated.revision == hydrated[:12]
    (read,) = named(events, "presync.hydrated")
    assert read["manifest"] == "llm-serving/manifest.yaml" and read["branch"] == sim_argocd.SYNC_BRANCH


async def test_hydrated_into_another_repository_the_gate_renders_the_dry_revision_it_came_from(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, tmp_path: Any,
        events: list[dict[str, Any]]) -> None:
    """ArgoCD 3.5's `syncSource.repoURL`: the rendered manifests go to a repository cutover's token does not reach
    (its Secret names one repository). The gate reads the dry revision the hydrator rendered into the commit being
    synced, from the plan's own repository, as the plan's source renders it; it never asks the plan's host for a
    commit of another repository (every sync's gate failed on that)."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    deployments = BareRepo(tmp_path / "deployments.git")
    sim_argocd.seed_application(world, hydrator=True)
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"spec": {"sourceHydrator": {"syncSource": {
        "repoURL": "https://github.com/acme/deployments.git"}}}})
    sim_argocd.apply_git(world, deployments, PATH, revision=sim_argocd.hydrate(world, repo, into=deployments))
    content, _ = repo.read(PATH)  # type: ignore[misc]
    switch = repo.commit({PATH: content.replace("llm-reasoning   ", "llm-reasoning-candle   ").replace(
        "    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods\n", "")},
        "switch by hand, gated all the same\n")
    hydrated = sim_argocd.hydrate(world, repo, into=deployments)
    assert repo.resolve(hydrated) is None  # not a commit of the plan's repository
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
        "operationState": sim_argocd.operation_state(world, "Running", hydrated, finished=False)}})
    gated = await phases.presync(Run.create(kube, make_plan(), host), job_name="cutover-presync-llm-serving")
    assert gated.changed and gated.backend == "candle" and gated.revision == hydrated[:12]
    (read,) = named(events, "presync.hydrated_elsewhere")
    assert read["repository"] == "https://github.com/acme/deployments.git" and read["dry"] == switch[:12]


async def test_the_refresh_asks_the_hydrator_too(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo,
                                                 make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    sim_argocd.seed_application(world, hydrator=True)
    sim_argocd.apply_git(world, repo, PATH, revision=sim_argocd.hydrate(world, repo))
    await phases.postsync(Run.create(kube, make_plan(), host, identity="cutover-postsync-1"))  # commits, refreshes
    stored = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
    assert stored is not None and stored["metadata"]["annotations"] == {
        "argocd.argoproj.io/refresh": "normal", "argocd.argoproj.io/hydrate": "normal"}
