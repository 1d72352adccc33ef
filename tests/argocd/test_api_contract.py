"""The optional ArgoCD API (`argocd.server`, docs/sources.md), against a double whose every request and answer is
checked against ArgoCD 3.6's own swagger.json: the refresh goes through it (no write to the Application), the edit is
render-checked by ArgoCD (the candidate on a scratch branch that is deleted again), and the PreSync gate asks it
for the revision being synced."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import kmock
import pytest

from conftest import GIT_TOKEN
from contracts import SwaggerRecorder
from cutover import plan
from cutover.argocd.api import ArgoCDApi
from cutover.core.results import Advanced
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.errors import InvalidInput, TargetNotReady
from cutover.flows import phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from doubles.argocd_api import FakeArgoCDApi
from helpers import named
from rollouts import CANARY, application, fleet_commit, fleet_plan, rollout

pytestmark = pytest.mark.looptime

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
API_TOKEN = "argocd-account-token-" + "A" * 24
APPS = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/llm-serving"


@pytest.fixture
async def api(world: World, repo: BareRepo) -> AsyncIterator[FakeArgoCDApi]:
    recorder = SwaggerRecorder()
    async with FakeArgoCDApi(world, repo, token=API_TOKEN, validator=recorder) as fake:
        yield fake
    recorder.assert_clean()


def with_server(world: World, host_url: str, api_url: str) -> plan.Plan:
    text = world.plan_text(git_api_url=host_url).replace("argocd:\n  application: llm-serving\n",
                                                         f"argocd:\n  application: llm-serving\n  server: {api_url}\n")
    (one,) = plan.parse(text)
    return one


async def test_postsync_refreshes_and_render_checks_through_the_api(
        world: World, kube: cluster.Cluster, repo: BareRepo, api: FakeArgoCDApi, monkeypatch: pytest.MonkeyPatch,
        events: list[dict[str, Any]]) -> None:
    monkeypatch.setenv("CUTOVER_ARGOCD_TOKEN", API_TOKEN)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    sim_argocd.seed_application(world)
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        the_plan = with_server(world, fake.url, api.url)
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        client = ArgoCDApi.connect(the_plan.argocd)
        assert client is not None
        result = await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1", api=client))
        await client.aclose()
        await host.aclose()
        branches = [p for p, _ in [(r[1], r[2]) for r in fake.requests] if "/git/refs" in p]
    assert isinstance(result, Advanced) and result.committed
    (commit, *_) = repo.log(PATH)
    assert "Render-checked through the ArgoCD API" in commit.message
    assert repo.head("cutover/check-reasoning-long") is None and branches  # the scratch branch came and went
    manifests = [query for path, query in api.requests if path.endswith("/manifests")]
    assert len(manifests) == 2 and "revision=main" in manifests[0]  # the branch head, then the candidate
    refreshed = [query for path, query in api.requests if not path.endswith("/manifests")]
    # the Application read (no operation runs: argo-cd#27875 is not at stake), then the refresh
    assert refreshed == ["appNamespace=argocd", "refresh=normal&appNamespace=argocd"]
    assert not [r for r in world.kube if r.method == "PATCH" and r.url.path == APPS]  # no write permission needed
    assert named(events, "render.checked")[0]["via"] == "argocd-api"
    assert API_TOKEN not in repr(events)


async def test_what_argocd_renders_elsewhere_is_a_render_mismatch(
        world: World, kube: cluster.Cluster, repo: BareRepo, api: FakeArgoCDApi,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """git.path is a copy ArgoCD does not render (the Application renders another directory): editing it changes
    nothing ArgoCD applies, so nothing is committed, and the scratch branch is gone again."""
    monkeypatch.setenv("CUTOVER_ARGOCD_TOKEN", API_TOKEN)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    content, _ = repo.read(PATH)  # type: ignore[misc]
    repo.commit({"k8s/apps/llm-serving-live/service.yaml": content}, "the directory ArgoCD really renders\n")
    sim_argocd.seed_application(world, path="k8s/apps/llm-serving-live")
    head = repo.head()
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        the_plan = with_server(world, fake.url, api.url)
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        client = ArgoCDApi.connect(the_plan.argocd)
        assert client is not None
        with pytest.raises(InvalidInput) as caught:
            await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1", api=client))
        await client.aclose()
        await host.aclose()
    assert caught.value.cause == "render_mismatch" and caught.value.exit_code == 2
    assert "the rendered Service selects app.kubernetes.io/name=llm-reasoning," in caught.value.message
    assert repo.head() == head and repo.head("cutover/check-reasoning-long") is None


async def test_the_gate_asks_argocd_for_the_revision_being_synced(
        world: World, kube: cluster.Cluster, repo: BareRepo, api: FakeArgoCDApi,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTOVER_ARGOCD_TOKEN", API_TOKEN)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    sim_argocd.seed_application(world)
    content, _ = repo.read(PATH)  # type: ignore[misc]
    sha = repo.commit({PATH: content.replace("llm-reasoning   ", "llm-reasoning-candle   ").replace(
        "    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods\n", "")}, "x\n")
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
        "operationState": sim_argocd.operation_state(world, "Running", sha, finished=False)}})
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        the_plan = with_server(world, fake.url, api.url)
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        client = ArgoCDApi.connect(the_plan.argocd)
        assert client is not None
        gated = await phases.presync(Run.create(kube, the_plan, host, api=client), job_name="cutover-presync-x")
        await client.aclose()
        await host.aclose()
    assert gated.backend == "candle"
    assert [query for path, query in api.requests if path.endswith("/manifests")] == [
        f"appNamespace=argocd&revision={sha}"]


async def test_a_token_argocd_refuses_is_named(world: World, repo: BareRepo, api: FakeArgoCDApi,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTOVER_ARGOCD_TOKEN", "not-the-token")
    sim_argocd.seed_application(world)
    the_plan = with_server(world, "http://127.0.0.1:9", api.url)
    client = ArgoCDApi.connect(the_plan.argocd)
    assert client is not None
    with pytest.raises(Exception) as caught:  # noqa: PT011 -- the cause says which
        await client.manifests("main")
    await client.aclose()
    assert getattr(caught.value, "cause", None) == "argocd_api_forbidden"
    assert "not-the-token" not in str(caught.value)


async def test_a_fleets_spoke_cluster_reads_its_application_and_the_rollout_on_the_hub(
        world: World, kube: cluster.Cluster, repo: BareRepo, api: FakeArgoCDApi, monkeypatch: pytest.MonkeyPatch,
        events: list[dict[str, Any]]) -> None:
    """A fleet's cluster ArgoCD does not run in (docs/fleet.md): its own cluster has no Application to read (here:
    refuses it), so the gate reads its Application, the revision being synced and the ApplicationSet's step order
    through the hub's API, and waits for the canary's step as a hub-side gate would."""
    monkeypatch.setenv("CUTOVER_ARGOCD_TOKEN", API_TOKEN)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    seed = repo.head() or ""
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        spoke = fleet_plan(world, git_api_url=fake.url)
        assert spoke.argocd is not None
        the_plan = dataclasses.replace(spoke, argocd=dataclasses.replace(spoke.argocd, server=api.url))
        fleet = fleet_commit(repo, the_plan)
        rollout(world, seed=seed, fleet=fleet, canary=application(CANARY, sync="OutOfSync", revision=fleet,
                                                                  operation="Failed", history=(seed,)))
        for plural in ("applications", "applicationsets"):  # the spoke's API server: not ArgoCD's objects
            world.kube["get", kmock.resource("argoproj.io", "v1alpha1", plural)] << (
                lambda _: kmock.KubernetesError(status=404, reason="NotFound", message="not found"))
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        client = ArgoCDApi.connect(the_plan.argocd)
        assert client is not None
        with pytest.raises(TargetNotReady) as refused:
            await phases.presync(Run.create(kube, the_plan, host, api=client), job_name="cutover-presync-x")
        await client.aclose()
        await host.aclose()
    assert refused.value.cause == "earlier_step_failed" and CANARY in refused.value.message
    asked = [path for path, _ in api.requests]
    assert "/api/v1/applications/llm-serving" in asked and "/api/v1/applicationsets/fleet" in asked and \
        f"/api/v1/applications/{CANARY}" in asked
    assert not named(events, "argocd.unreadable")
