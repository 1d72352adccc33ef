"""Whether a switch itself cuts streams (docs/capacity.md): Cilium's kube-proxy replacement, told from the nodes
Cilium annotates and the absence of kube-proxy pods; then said by `cutover plan` beside the drain safety."""

from __future__ import annotations

import pytest

from cutover.core.views import NodeView
from cutover.demo.world import World
from cutover.flows import drain
from cutover.kube import cluster, dataplane

CILIUM_NODE = NodeView("gpu-1", annotations={"network.cilium.io/ipv4-cilium-host": "10.0.0.1"})
OLD_CILIUM_NODE = NodeView("gpu-2", annotations={"io.cilium.network.ipv4-cilium-host": "10.0.1.1"})


@pytest.mark.parametrize(("nodes", "kube_proxy", "cuts"), [
    ([CILIUM_NODE, OLD_CILIUM_NODE], False, True),  # Cilium routes Services
    ([CILIUM_NODE], True, False),  # Cilium as the CNI only: kube-proxy keeps established connections
    ([NodeView("gpu-1")], False, False),  # another CNI: nothing says the switch cuts anything
])
def test_a_switch_cuts_streams_only_under_ciliums_kube_proxy_replacement(nodes: list[NodeView], kube_proxy: bool,
                                                                        cuts: bool) -> None:
    said = dataplane.warning(nodes, kube_proxy_runs=kube_proxy)
    assert (said is not None) == cuts
    if said:
        assert "Cilium on 2 node(s), no kube-proxy pod" in said and "cilium/cilium#23761" in said


async def test_the_gate_and_plan_say_it_where_cutover_may_list_nodes_and_pods(world: World, kube: cluster.Cluster,
                                                                             make_plan: object) -> None:
    world.kube.apply("/v1/nodes", {"metadata": {"name": "gpu-1", "annotations": {
        "network.cilium.io/ipv4-cilium-host": "10.0.0.1"}}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}})
    world.add_pod("vllm", ready=True)
    await world.settled()
    the_plan = make_plan()  # type: ignore[operator]
    said = await drain.safety(kube, the_plan, leaving="vllm", to="candle")
    assert any("kube-proxy replacement" in line for line in said)
    world.kube.apply("/v1/pods", {"metadata": {"name": "kube-proxy-abcde", "namespace": "kube-system",
                                               "labels": {"k8s-app": "kube-proxy"}}})
    assert not any("kube-proxy replacement" in line for line in await drain.safety(kube, the_plan, leaving="vllm",
                                                                                   to="candle"))
    world.kube.denied.add(("list", "pods"))  # without cutover-capacity: nothing said either way
    world.kube.remove("/v1/pods", "kube-system", "kube-proxy-abcde")
    assert not any("kube-proxy replacement" in line for line in await drain.safety(kube, the_plan, leaving="vllm",
                                                                                   to="candle"))
