"""Whether the cluster's dataplane keeps established connections when a backend leaves a Service (docs/capacity.md,
"Before you free an engine"). Pure, on what the optional capacity reader may list (nodes, pods of every namespace).

kube-proxy (iptables, nftables, IPVS) keeps them: the conntrack entry stays (kubernetes/kubernetes#104098), IPVS
weights the real server 0 until its connections end. Cilium's kube-proxy replacement removes the backend at once and
drops packets on its established connections (cilium/cilium#23761, #14844). Cilium records itself on each node it
runs on (`network.cilium.io/ipv4-cilium-host`, formerly `io.cilium.network.ipv4-cilium-host`: cilium
`pkg/annotation/k8s.go`); without a kube-proxy pod beside it, it is the one that routes Services.
"""

from __future__ import annotations

from collections.abc import Iterable

from cutover.core.views import NodeView

CILIUM = ("network.cilium.io/ipv4-cilium-host", "io.cilium.network.ipv4-cilium-host",
          "network.cilium.io/ipv6-cilium-host", "io.cilium.network.ipv6-cilium-host")


def warning(nodes: Iterable[NodeView], *, kube_proxy_runs: bool) -> str | None:
    """What a switch cuts on this dataplane, or None when it cuts nothing (or nothing says it would)."""
    cilium = [node.name for node in nodes if any(key in node.annotations for key in CILIUM)]
    if not cilium or kube_proxy_runs:
        return None
    return (f"the cluster routes Services with Cilium's kube-proxy replacement (Cilium on {len(cilium)} node(s), no "
            "kube-proxy pod): a backend that leaves the Service has its established connections dropped at once "
            "(cilium/cilium#23761), so streams in flight on it are cut by the switch itself, not by the free")
