"""The origin cluster as an example (manifests/examples/full-gpu, the newcomer's C6): its Application's path builds
with real kustomize (candle committed stopped, the recreate plan in the plan ConfigMap), and `cutover plan` on
its plan, against a simulated node whose only card vLLM holds and the example's files in Git, says READY, that
the handoff starts candle, and the next hop; set to candle, the whole recreate runs through its hops."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from cutover import plan
from cutover.core.trailers import Trailers
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.flows import commands, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from cutover.sources import kustomize_build
from helpers import told

pytestmark = pytest.mark.looptime

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "full-gpu"
LAYOUT = "manifests/examples/full-gpu/recreate/kustomization.yaml"
SERVICE = "manifests/examples/llm-serving/workload/service.yaml"


def test_the_applications_path_commits_candle_stopped_with_the_recreate_plan() -> None:
    import asyncio

    docs = asyncio.run(kustomize_build.build(EXAMPLE / "recreate", where="full-gpu/recreate"))
    counts = {doc["metadata"]["name"]: doc["spec"]["replicas"] for doc in docs if doc["kind"] == "Deployment"}
    assert counts == {"llm-reasoning": 1, "llm-reasoning-candle": 0}
    (config,) = [doc for doc in docs if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "cutover-plan"]
    (shipped,) = plan.parse(config["data"]["plan.yaml"])
    assert shipped.handoff.strategy == "recreate" and shipped.backends["candle"].workload is not None
    assert YAML(typ="safe").load((EXAMPLE / "plan-bridge.yaml").read_text())["handoff"]["strategy"] == "bridge"


def _example_plan(target: str) -> plan.Plan:
    text = (EXAMPLE / "recreate" / "plan.yaml").read_text().replace("target: vllm", f"target: {target}", 1)
    (read,) = plan.parse(text)
    return read


@pytest.fixture
async def full_node(world: World, repo: BareRepo) -> None:
    """The node's only card held by vLLM; the example's files in Git, where its plan names them."""
    sim_argocd.seed_application(world)
    repo.commit({LAYOUT: (ROOT / LAYOUT).read_text(), SERVICE: (ROOT / SERVICE).read_text()},
                "The full-gpu example\n")
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    await world.settled()


async def test_cutover_plan_on_the_example_says_the_handoff_hop_by_hop(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, full_node: None) -> None:
    the_plan = _example_plan("candle")
    shown = told(await commands.show_plan(kube, the_plan, host=host), the_plan)
    assert shown.data["ready"] is True, shown.lines
    assert shown.data["targetProof"] == {"stopped": True, "strategy": "recreate"}
    assert any("target candle: stopped in Git; the handoff starts it" in line for line in shown.lines)
    # both counts in one file: one commit frees vLLM and starts candle (the swap ArgoCD applies in one sync)
    assert shown.data["handoff"]["next"] == "restore candle, draining and freeing vllm in the same sync"
    # the example's Application heals itself: a webhook's refresh during a hop's sync may take its hooks away
    (race,) = [found for found in shown.data["syncOrder"] if found["cause"] == "self_heal_race"]
    assert "Application llm-serving syncs with selfHeal: true" in race["message"] and not race["refuse"]
    assert "set selfHeal: false on this Application" in race["hint"]

    # the PostSync of the commit that set the target takes the first hop: vLLM freed in the example's own file
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    content, _ = repo.read(LAYOUT)  # type: ignore[misc]
    entries = {entry["name"]: entry["count"] for entry in YAML(typ="safe").load(content)["replicas"]}
    assert entries == {"llm-reasoning": 0, "llm-reasoning-candle": 1}
    made = [Trailers.parse(entry.message) for entry in repo.log(LAYOUT) if entry.message.startswith("cutover(")]
    assert {(trailers.step, trailers.backend) for trailers in made} == {("free", "vllm"), ("restore", "candle")}


async def test_cutover_plan_on_the_bridge_variant_names_the_names_it_leaves_dark(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo) -> None:
    """plan-bridge.yaml on the same cluster, the coder holding the node's other card: READY (the coder answers
    `reasoning`, so the switch to it is proven), and `reasoning-long`, which it does not answer, named as the
    name that goes unanswered while candle starts, with the maxGap that consents to it."""
    sim_argocd.seed_application(world)
    repo.commit({LAYOUT: (ROOT / LAYOUT).read_text(), SERVICE: (ROOT / SERVICE).read_text()},
                "The full-gpu example\n")
    world.add_node("gpu-1", gpus=2)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    world.add_pod("coder", ready=True, gpus=1, node="gpu-1")
    await world.settled()
    text = (EXAMPLE / "plan-bridge.yaml").read_text().replace("target: vllm", "target: candle", 1)
    (bridge,) = plan.parse(text)
    shown = told(await commands.show_plan(kube, bridge, host=host), bridge)
    assert shown.data["ready"] is True, shown.lines
    assert shown.data["targetProof"] == {"stopped": True, "strategy": "bridge"}
    dark = {found["cause"]: found for found in shown.data["syncOrder"]}["bridge_names_dark"]
    assert "reasoning-long" in dark["message"] and "maxGap" in dark["message"], dark
