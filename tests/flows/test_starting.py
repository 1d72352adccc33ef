"""What a sync is about to start, judged by the PreSync before ArgoCD applies it (docs/capacity.md, "Before ArgoCD
starts the target"), in the simulated world: the cards a revision frees are not counted as held."""

from __future__ import annotations

from typing import Any

import pytest

from cutover import plan
from cutover.demo.world import World
from cutover.errors import TargetNotReady
from cutover.flows import starting
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster

pytestmark = pytest.mark.looptime


def engine_doc(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "llm-serving"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "engine", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}


@pytest.mark.parametrize(("vllm_replicas", "refused"), [(0, False), (1, True)], ids=["freed-in-it", "kept"])
async def test_the_gate_counts_no_card_a_revision_frees(world: World, kube: cluster.Cluster, host: GitHub,
                                                        make_plan: Any, vllm_replicas: int, refused: bool) -> None:
    """On a bridge's hop the Service selects the bridge while the revision frees vLLM and starts candle: vLLM's pod
    still holds the one card as the PreSync looks, and goes in that very sync, so the gate counts it as going
    (docs/capacity.md, "Before ArgoCD starts the target"); kept, it holds the card and the revision is refused."""
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    world.add_pod("coder", ready=True)
    await world.settled()
    workloads = {"vllm": "{kind: Deployment, name: llm-reasoning}", "candle": "{kind: Deployment, name: candle}"}
    (the_plan,) = plan.parse(world.plan_text(git_api_url=None, workloads=workloads, coder=True,
                                             handoff="{strategy: bridge, bridge: coder, bridgeNames: [reasoning], "
                                                 "maxGap: 45m}"))
    coder = dict(the_plan.backends["coder"].selector)
    world.kube.merge("/v1/services", "llm-serving", "reasoning-long-predictor", {"spec": {"selector": coder}})
    docs = [engine_doc("llm-reasoning", vllm_replicas), engine_doc("candle", 1)]
    judged = starting.judge(Run.create(kube, the_plan, host), docs)
    if not refused:
        await judged
        return
    with pytest.raises(TargetNotReady) as caught:
        await judged
    assert caught.value.cause == "unschedulable" and "others 1 (llm-serving/" in caught.value.message
