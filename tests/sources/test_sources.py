"""Selectors that live in kustomize trees and Helm values (docs/sources.md), end to end in the simulated world: the tree
comes from the GitHub double (its archive), real kustomize renders it for cutover's render check and for the
simulated ArgoCD alike, and a client calls the Service throughout. Every failure leaves Git and the cluster as
they were."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from conftest import GIT_TOKEN
from cutover import plan
from cutover.cli import main
from cutover.core.results import Completed
from cutover.demo import argocd as sim_argocd
from cutover.demo import story
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import BACKENDS, NAMESPACE, SERVICE, World
from cutover.errors import InvalidInput, TargetNotReady
from cutover.flows import explicit, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from helpers import Client, named

pytestmark = pytest.mark.looptime

APP = "k8s/apps/llm-serving"
HEADER = "# reasoning-long-predictor: the stable name. cutover edits only the selector; this line stays.\n"
VLLM, CANDLE = BACKENDS["vllm"]["labels"], BACKENDS["candle"]["labels"]


def service(selector: dict[str, str]) -> str:
    lines = "".join(f"\n    {key}: {value}" for key, value in selector.items())
    return HEADER + f"""apiVersion: v1
kind: Service
metadata:
  name: {SERVICE}
  namespace: {NAMESPACE}
spec:
  type: ClusterIP
  selector:{lines}
  ports:
    - {{name: http, port: 80, targetPort: 8080}}
    - {{name: engine, port: 8080, targetPort: 8080}}
"""


def kustomization(*resources: str, more: str = "") -> str:
    return ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
            + "".join(f"  - {resource}\n" for resource in resources) + more)


# The prod overlay adds `component: predictor` to every selector: the base holds the rest.
ADDS_A_LABEL = {
    f"{APP}/base/kustomization.yaml": kustomization("service.yaml"),
    f"{APP}/base/service.yaml": service({k: v for k, v in VLLM.items() if k != "component"}),
    f"{APP}/overlays/prod/kustomization.yaml": kustomization(
        "../../base", more="labels:\n  - pairs: {component: predictor}\n    includeSelectors: true\n"),
}
# The prod overlay's patch holds the engine's labels; the base only what every engine shares.
IN_A_PATCH = {
    f"{APP}/base/kustomization.yaml": kustomization("service.yaml"),
    f"{APP}/base/service.yaml": service({"component": "predictor"}),
    f"{APP}/overlays/prod/kustomization.yaml": kustomization("../../base", more="patches:\n  - path: service.yaml\n"),
    f"{APP}/overlays/prod/service.yaml": service({k: v for k, v in VLLM.items() if k != "component"}),
}
# A patch pins the whole selector: editing the base changes nothing that ArgoCD applies.
PINNED = {
    **IN_A_PATCH,
    f"{APP}/base/service.yaml": service(dict(VLLM)),
    f"{APP}/overlays/prod/service.yaml": service(dict(VLLM)),
}


@dataclasses.dataclass
class Layout:
    world: World
    repo: BareRepo
    host: GitHub
    fake: FakeContentsHost
    plan: plan.Plan
    path: str  # the file cutover edits


@contextlib.asynccontextmanager
async def layout(world: World, tmp_path: Path, files: dict[str, str], *, edits: str,
                 git_more: str = "source: kustomize", **plan_options: Any) -> AsyncIterator[Layout]:
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit(files, "The reasoning-long Service, in a kustomize tree\n")
    sim_argocd.seed_application(world, revision=repo.head(), path=f"{APP}/overlays/prod")
    sim_argocd.apply_git(world, repo, edits)  # the live Service, as ArgoCD renders the overlay today
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=edits, git_more=git_more,
                                                 **plan_options))
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        yield Layout(world, repo, host, fake, the_plan, edits)
        await host.aclose()


def live_selector(world: World) -> dict[str, str]:
    stored = world.kube.stored("/v1/services", NAMESPACE, SERVICE)
    assert stored is not None
    return dict(stored["spec"]["selector"])


async def run_through(kube: Any, the: Layout) -> tuple[Completed, Client]:
    client = Client(f"http://{the.world.cluster_ip}:80/v1/chat/completions")
    probing = asyncio.create_task(client.run())
    try:
        async with sim_argocd.running(the.world, the.repo, the.path):
            result = await explicit.run(Run.create(kube, the.plan, the.host, identity="cutover-run-1"))
        await asyncio.sleep(5)
    finally:
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
    assert isinstance(result, Completed)
    return result, client


@pytest.mark.parametrize(("files", "edits", "written"), [
    (ADDS_A_LABEL, f"{APP}/base/service.yaml", {"app.kubernetes.io/name": "llm-reasoning-candle"}),
    (IN_A_PATCH, f"{APP}/overlays/prod/service.yaml", {"app.kubernetes.io/name": "llm-reasoning-candle"}),
], ids=["overlay-adds-a-selector-label", "selector-in-an-overlay-patch"])
async def test_a_cutover_through_a_kustomize_tree(world: World, kube: Any, tmp_path: Path, files: dict[str, str],
                                                  edits: str, written: dict[str, str],
                                                  events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    await world.settled()
    async with layout(world, tmp_path, files, edits=edits) as the:
        assert live_selector(world) == VLLM  # the effective selector: what the plan names
        result, client = await run_through(kube, the)
        (commit, *_) = the.repo.log(edits)
        content, _ = the.repo.read(edits)  # type: ignore[misc]
    assert result.verified.endpoints == (candle.ip,) and live_selector(world) == CANDLE
    assert client.sent > 5 and client.failed == 0
    assert "Render-checked: kustomize build" in commit.message and "Cutover-To: candle" in commit.message
    assert f"  selector:{''.join(f'{chr(10)}    {k}: {v}' for k, v in written.items())}\n" in content
    assert content.startswith(HEADER) and content.count("\n") == files[edits].count("\n") - (
        len([k for k in VLLM if k != "component"]) - len(written))
    assert named(events, "render.checked")[0]["written"] == ",".join(f"{k}={v}" for k, v in written.items())


async def test_a_pinned_selector_is_a_render_mismatch_and_nothing_is_touched(world: World, tmp_path: Path) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    async with layout(world, tmp_path, PINNED, edits=f"{APP}/base/service.yaml") as the:
        head = the.repo.head()
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(world.plan_text(git_api_url=the.fake.url, git_path=the.path, git_more="source: kustomize"))
        environ = {"CUTOVER_PLAN": str(plan_file), "CUTOVER_GIT_TOKEN": GIT_TOKEN, "HOSTNAME": "cutover-run",
                   "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig")),
                   "CUTOVER_TERMINATION_LOG": str(tmp_path / "termination-log")}
        with mock.patch.dict(os.environ, environ), contextlib.redirect_stdout(io.StringIO()) as out:
            code = await main.arun(["--log-format", "json", "postsync"])
        assert the.repo.head() == head  # nothing committed
    outcome = out.getvalue().strip().splitlines()[-1]
    assert code == 2 and "cause render_mismatch" in outcome
    assert "the rendered Service selects app.kubernetes.io/name=llm-reasoning," in outcome
    assert "the build adds app.kubernetes.io/name=llm-reasoning,serving.kserve.io/inferenceservice=reasoning" in outcome
    assert live_selector(world) == VLLM


# The engines in the base; the prod overlay sets their replicas (a kustomize `replicas:` entry each).
WITH_ENGINES = {
    **ADDS_A_LABEL,
    f"{APP}/base/kustomization.yaml": kustomization("service.yaml", "engines.yaml"),
    f"{APP}/base/engines.yaml": story.ENGINES,  # the demo's two Deployments, vLLM at 1, candle at 0
    f"{APP}/overlays/prod/kustomization.yaml": kustomization(
        "../../base", more="labels:\n  - pairs: {component: predictor}\n    includeSelectors: true\nreplicas:\n"
                           "  - name: llm-reasoning\n    count: 1\n  - name: llm-reasoning-candle\n    count: 0\n"),
}


@pytest.mark.parametrize(("where", "checked"), [(f"{APP}/overlays/prod/kustomization.yaml", True),
                                                (f"{APP}/base/engines.yaml", False)],
                         ids=["replicas-entry", "pinned-by-the-overlay"])
async def test_a_free_is_render_checked_like_the_switch(world: World, kube: Any, tmp_path: Path, where: str,
                                                        checked: bool, events: list[dict[str, Any]]) -> None:
    """docs/capacity.md: with git.source kustomize, the free's edit is built with the tree as ArgoCD builds it; a
    Deployment whose replicas the overlay pins is not freed by editing its own file: exit 2, nothing committed."""
    world.add_pod("vllm", ready=True)
    await world.settled()
    workloads = {backend: f"{{kind: Deployment, name: {name}, path: {where}}}"
                 for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle"))}
    async with layout(world, tmp_path, WITH_ENGINES, edits=f"{APP}/base/service.yaml", workloads=workloads,
                      handoff="{strategy: recreate, maxGap: 30m, drainTimeout: 1m}") as the:
        head = the.repo.head()
        run = Run.create(kube, the.plan, the.host, identity="cutover-postsync-1")
        if checked:
            await phases.postsync(run)
            content, _ = the.repo.read(where)  # type: ignore[misc]
            assert "  - name: llm-reasoning\n    count: 0\n  - name: llm-reasoning-candle\n    count: 1\n" in content
            assert [e["workload"] for e in named(events, "render.checked")] == [
                "Deployment/llm-reasoning", "Deployment/llm-reasoning-candle"]
            return
        with pytest.raises(InvalidInput) as caught:
            await phases.postsync(run)
        assert the.repo.head() == head  # nothing committed
    assert caught.value.cause == "render_mismatch" and caught.value.exit_code == 2
    assert "the rendered Deployment llm-reasoning holds spec.replicas = 1, not '0'" in caught.value.message


def in_wave(engines: str, name: str, wave: int) -> str:
    """The demo's engines with Deployment `name` at sync wave `wave`."""
    meta = f"metadata: {{name: {name}, namespace: llm-serving}}"
    assert meta in engines
    return engines.replace(meta, meta[:-1] + f", annotations: {{argocd.argoproj.io/sync-wave: \"{wave}\"}}}}")


async def test_cutover_plan_refuses_a_recreate_whose_engines_sit_in_two_waves(world: World, tmp_path: Path) -> None:
    """docs/install.md, "Sync waves and deadlines": a recreate's swap between engines in two waves deadlocks, so
    the pre-flight says so from the render, exit 2, before anything is committed."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    files = {**WITH_ENGINES, f"{APP}/base/engines.yaml": in_wave(story.ENGINES, "llm-reasoning-candle", 1)}
    workloads = {backend: f"{{kind: Deployment, name: {name}, path: {APP}/overlays/prod/kustomization.yaml}}"
                 for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle"))}
    options: dict[str, Any] = {"workloads": workloads, "handoff": "{strategy: recreate, maxGap: 30m, drainTimeout: 1m}"}
    async with layout(world, tmp_path, files, edits=f"{APP}/base/service.yaml", **options) as the:
        head = the.repo.head()
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(world.plan_text(git_api_url=the.fake.url, git_path=the.path, git_more="source: kustomize",
                                             **options))
        environ = {"CUTOVER_PLAN": str(plan_file), "CUTOVER_GIT_TOKEN": GIT_TOKEN,
                   "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig"))}
        with mock.patch.dict(os.environ, environ), contextlib.redirect_stdout(io.StringIO()) as out:
            code = await main.arun(["--log-level", "error", "plan"])
        assert the.repo.head() == head
    said = out.getvalue()
    assert code == 2 and "NOT READY (exit 2, cause engines_in_two_waves)" in said, said
    assert "candle's Deployment/llm-reasoning-candle at 1, vllm's Deployment/llm-reasoning at 0" in said
    assert "hint: give the engines one argocd.argoproj.io/sync-wave" in said
    assert live_selector(world) == VLLM


async def test_with_plain_files_cutover_plan_reads_the_engines_where_the_workloads_name_them(
        world: World, tmp_path: Path) -> None:
    """`git.source: manifest` renders the Service's file alone; the engines' waves are written in the file the
    backends' workloads name (the example's layout: service.yaml beside engines.yaml), which the Application applies
    too: the pre-flight reads it and refuses a recreate whose engines sit in two waves."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    plain = {f"{APP}/service.yaml": service(VLLM), f"{APP}/engines.yaml": in_wave(story.ENGINES,
                                                                                  "llm-reasoning-candle", 1)}
    workloads = {backend: f"{{kind: Deployment, name: {name}, path: {APP}/engines.yaml}}"
                 for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle"))}
    options: dict[str, Any] = {"workloads": workloads, "handoff": "{strategy: recreate, maxGap: 30m, drainTimeout: 1m}"}
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit(plain, "reasoning-long in two plain files\n")
    sim_argocd.seed_application(world, revision=repo.head(), path=APP)
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(world.plan_text(git_api_url=fake.url, git_path=f"{APP}/service.yaml", **options))
        environ = {"CUTOVER_PLAN": str(plan_file), "CUTOVER_GIT_TOKEN": GIT_TOKEN,
                   "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig"))}
        with mock.patch.dict(os.environ, environ), contextlib.redirect_stdout(io.StringIO()) as out:
            code = await main.arun(["--log-level", "error", "plan"])
    said = out.getvalue()
    assert code == 2 and "NOT READY (exit 2, cause engines_in_two_waves)" in said, said


async def test_the_presync_gate_judges_the_rendered_revision(world: World, kube: Any, tmp_path: Path) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    async with layout(world, tmp_path, ADDS_A_LABEL, edits=f"{APP}/base/service.yaml") as the:
        switched = service({"app.kubernetes.io/name": "llm-reasoning-candle"})
        sha = the.repo.commit({the.path: switched}, "switch\n")
        gated = await phases.presync(Run.create(kube, the.plan, the.host), job_name=f"x-{sha[:7]}-presync-1764457200")
    assert gated.backend == "candle" and gated.changed  # rendered: with the overlay's component: predictor


@pytest.mark.parametrize(("strategy", "frees_vllm", "refused"), [
    ("{strategy: parallel}", False, True),  # the origin cluster's story: candle started beside vLLM, Pending
    ("{strategy: recreate, maxGap: 30m, drainTimeout: 1m}", True, False),  # a swap: vLLM freed in the same sync
], ids=["started-beside-the-source", "a-swap-frees-the-source"])
async def test_the_gate_refuses_a_revision_that_starts_a_target_that_cannot_fit(
        world: World, kube: Any, tmp_path: Path, events: list[dict[str, Any]], strategy: str, frees_vllm: bool,
        refused: bool) -> None:
    """docs/capacity.md, "Before ArgoCD starts the target": a commit that scales candle up beside vLLM on a node whose
    one card vLLM holds would sit in ArgoCD's Sync phase, no hook running, until the progress deadline. The PreSync
    gate renders it and refuses with the figures, before ArgoCD applies anything."""
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    await world.settled()
    workloads = {backend: f"{{kind: Deployment, name: {name}, path: {APP}/overlays/prod/kustomization.yaml}}"
                 for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle"))}
    async with layout(world, tmp_path, WITH_ENGINES, edits=f"{APP}/base/service.yaml", workloads=workloads,
                      handoff=strategy) as the:
        overlay = f"{APP}/overlays/prod/kustomization.yaml"
        content, _ = the.repo.read(overlay)  # type: ignore[misc]
        started = content.replace("  - name: llm-reasoning-candle\n    count: 0\n",
                                  "  - name: llm-reasoning-candle\n    count: 1\n")
        if frees_vllm:
            started = started.replace("  - name: llm-reasoning\n    count: 1\n",
                                      "  - name: llm-reasoning\n    count: 0\n")
        sha = the.repo.commit({overlay: started}, "Start candle-vllm\n")
        gate = phases.presync(Run.create(kube, the.plan, the.host), job_name=f"x-{sha[:7]}-presync-1764457200")
        if not refused:
            assert (await gate).changed is False
            return
        with pytest.raises(TargetNotReady) as caught:
            await gate
    assert caught.value.cause == "capacity_held_by_source" and caught.value.exit_code == 3
    assert "the revision being synced starts candle (Deployment/llm-reasoning-candle, 1 pod)" in caught.value.message
    assert "gpu-1: nvidia.com/gpu 1 allocatable, vllm holds 1, others 0, 0 free" in caught.value.message
    assert "handoff.strategy recreate (with maxGap) or bridge frees vllm" in caught.value.hint


async def test_the_presync_gate_says_what_in_the_render_would_break_a_hop(world: World, kube: Any, tmp_path: Path,
                                                                          events: list[dict[str, Any]]) -> None:
    """A user's PreSync hook at the gate's wave runs beside it: the gate says so as it gates the switch."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    migrate = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n"
               "    argocd.argoproj.io/hook: PreSync\n    argocd.argoproj.io/sync-wave: \"-1000\"\n"
               "spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: []\n")
    gate = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: cutover-presync\n  annotations:\n"
            "    argocd.argoproj.io/hook: PreSync\n    argocd.argoproj.io/sync-wave: \"-1000\"\n"
            "spec:\n  template:\n    metadata:\n      labels: {app.kubernetes.io/name: cutover, "
            "app.kubernetes.io/component: presync}\n    spec:\n      restartPolicy: Never\n      containers: []\n")
    files = {**ADDS_A_LABEL, f"{APP}/base/kustomization.yaml": kustomization("service.yaml", "hooks.yaml"),
             f"{APP}/base/hooks.yaml": f"{gate}---\n{migrate}"}
    async with layout(world, tmp_path, files, edits=f"{APP}/base/service.yaml") as the:
        sha = the.repo.commit({the.path: service({"app.kubernetes.io/name": "llm-reasoning-candle"})}, "switch\n")
        gated = await phases.presync(Run.create(kube, the.plan, the.host), job_name=f"x-{sha[:7]}-presync-1764457200")
    assert gated.backend == "candle"
    (said,) = named(events, "presync.sync_order")
    assert said["cause"] == "hook_before_gate" and said["level"] == "warning"
    assert "PreSync Job/migrate (wave -1000) runs beside cutover's gate Job/cutover-presync" in said["message"]


async def test_kustomize_missing_is_a_clear_error_at_start(world: World, tmp_path: Path) -> None:
    async with layout(world, tmp_path, ADDS_A_LABEL, edits=f"{APP}/base/service.yaml") as the:
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(world.plan_text(git_api_url=the.fake.url, git_path=the.path, git_more="source: kustomize"))
        environ = {"CUTOVER_PLAN": str(plan_file), "PATH": str(tmp_path / "empty"),
                   "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig"))}
        with mock.patch.dict(os.environ, environ), contextlib.redirect_stdout(io.StringIO()) as out:
            code = await main.arun(["postsync"])
        served = world.kube.served
    assert code == 2 and "cause kustomize_missing" in out.getvalue()
    assert served == world.kube.served  # stopped before connecting anywhere


# --- Helm values ----------------------------------------------------------------------------------------------

VALUES = """# values for the llm chart: the Service selector is derived from `engine`
engine: vllm   # vllm | candle
replicas: 1
"""


async def test_a_helm_values_scalar_is_written_as_the_backends_git_value(world: World, kube: Any, tmp_path: Path,
                                                                         events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({f"{APP}/values.yaml": VALUES}, "values\n")
    sim_argocd.seed_application(world, revision=repo.head())
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=f"{APP}/values.yaml",
                                                 git_more="source: helm-values\nselectorPath: engine",
                                                 git_values={"vllm": "vllm", "candle": "candle"}))
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        result = await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))
        await host.aclose()
    (commit, *_) = repo.log(f"{APP}/values.yaml")
    content, _ = repo.read(f"{APP}/values.yaml")  # type: ignore[misc]
    assert getattr(result, "committed", False) and content == VALUES.replace("engine: vllm ", "engine: candle ")
    assert "Not render-checked" in commit.message
    assert named(events, "render.unchecked")[0]["hint"].startswith("not render-checked: set argocd.server")


@pytest.mark.parametrize(("files", "render", "words"), [
    ({**ADDS_A_LABEL, "k8s/apps/other/kustomization.yaml": kustomization("cm.yaml"),
      "k8s/apps/other/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"},
     "k8s/apps/other", "found 0"),
    ({**ADDS_A_LABEL, f"{APP}/base/kustomization.yaml": kustomization("service.yaml", "twin.yaml"),
      f"{APP}/base/twin.yaml": service(dict(VLLM)).replace(f"  namespace: {NAMESPACE}\n", "")},
     f"{APP}/overlays/prod", "found 2"),
], ids=["no-service-rendered", "two-services-rendered"])
async def test_a_render_without_exactly_one_service_is_exit_2(world: World, kube: Any, tmp_path: Path,
                                                              files: dict[str, str], render: str, words: str) -> None:
    async with layout(world, tmp_path, ADDS_A_LABEL, edits=f"{APP}/base/service.yaml") as the:
        the.repo.commit(files, "another layout\n")
        head, live = the.repo.head(), live_selector(world)
        checked = dataclasses.replace(the.plan, git=dataclasses.replace(the.plan.git, render_path=render))
        with pytest.raises(InvalidInput) as caught:
            await phases.postsync(Run.create(kube, checked, the.host, identity="cutover-postsync-1"))
        assert the.repo.head() == head and live_selector(world) == live
    assert caught.value.cause == "render_mismatch" and caught.value.exit_code == 2 and words in caught.value.message


@pytest.mark.parametrize(("values", "git_values", "words"), [
    (VALUES, None, "expected backends.<name>.gitValue for each backend"),
    ("engine: vllm\nservice:\n  selector: {app: x}\n", {"vllm": "vllm", "candle": "candle"},
     "holds a mapping, and the plan gives gitValue for a scalar"),
], ids=["scalar-without-gitValue", "gitValue-on-a-mapping"])
async def test_helm_values_that_do_not_fit_the_plan_are_exit_2(world: World, kube: Any, tmp_path: Path, values: str,
                                                               git_values: dict[str, str] | None, words: str) -> None:
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({f"{APP}/values.yaml": values}, "values\n")
    path = "engine" if git_values is None else "service.selector"
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=f"{APP}/values.yaml",
                                                 git_more=f"source: helm-values\nselectorPath: {path}",
                                                 git_values=git_values))
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        with pytest.raises(InvalidInput) as caught:
            await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))
        await host.aclose()
    assert caught.value.exit_code == 2 and words in caught.value.message and len(repo.log()) == 1


COMMON_LABELS = {
    f"{APP}/base/kustomization.yaml": kustomization("service.yaml"),
    f"{APP}/base/service.yaml": service({k: v for k, v in VLLM.items() if k != "component"}),
    f"{APP}/overlays/prod/kustomization.yaml": kustomization("../../base",
                                                             more="commonLabels:\n  component: predictor\n"),
}


async def test_commonlabels_are_accounted_for_too(world: World, kube: Any, tmp_path: Path) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    async with layout(world, tmp_path, COMMON_LABELS, edits=f"{APP}/base/service.yaml") as the:
        assert live_selector(world) == VLLM
        result, client = await run_through(kube, the)
        content, _ = the.repo.read(the.path)  # type: ignore[misc]
    assert live_selector(world) == CANDLE and client.failed == 0 and result.to == "candle"
    assert "  selector:\n    app.kubernetes.io/name: llm-reasoning-candle\n  ports:" in content


async def test_a_multi_source_application_end_to_end(world: World, kube: Any, tmp_path: Path) -> None:
    """The chart from a Helm repository, the plan's repository second: the stand-in syncs revisions[] and the
    named hooks' gate reads the plan's position."""
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    await world.settled()
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({f"{APP}/reasoning-long-service.yaml": service(dict(VLLM))}, "seed\n")
    sim_argocd.seed_application(world, sources=[
        {"repoURL": "https://charts.example.invalid", "chart": "llm", "targetRevision": "1.4.2"},
        {"repoURL": sim_argocd.REPO_URL, "targetRevision": "main", "path": APP}])
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=f"{APP}/reasoning-long-service.yaml"))
        host = GitHub(url=the_plan.git.url, branch="main", token=GIT_TOKEN, api_url=fake.url)
        the = Layout(world, repo, host, fake, the_plan, f"{APP}/reasoning-long-service.yaml")
        result, client = await run_through(kube, the)
        stored = world.kube.stored(sim_argocd.APPS, "argocd", "llm-serving")
        assert stored is not None and stored["status"]["sync"]["revisions"] == ["1.4.2", result.commit]
        switched = repo.commit({the.path: service(dict(VLLM))}, "back by hand\n")
        world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
            "operationState": sim_argocd.operation_state(world, "Running", switched, finished=False)}})
        gated = await phases.presync(Run.create(kube, the_plan, host), job_name="cutover-presync-llm-serving")
        await host.aclose()
    assert result.verified.endpoints == (candle.ip,) and client.failed == 0
    assert gated.revision == switched[:12] and gated.backend == "vllm"  # revisions[1], not the chart's 1.4.2
