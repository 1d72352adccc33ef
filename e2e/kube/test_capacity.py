"""Capacity on the real scheduler (docs/capacity.md): a target that fits only once the source's pods are gone stops
strategy parallel at once with exit 3 `capacity_held_by_source`, nothing committed; the verdict is a possibility
while the optional ClusterRole is missing, and a fact with its figures once the administrator applies it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tier.cluster import FIXTURES, ROOT, Tier

HELD = "app.kubernetes.io/name=capacity-held"


@pytest.fixture(scope="module")
def crowded(tier: Tier) -> Iterator[Tier]:
    """The holder Running on the GPU node, the held target Pending with the scheduler's own message."""
    tier.apply(FIXTURES / "capacity")
    tier.wait("the holder bound to the GPU node", lambda: [
        pod.spec.node_name for pod in tier.core.list_namespaced_pod(
            "llm-serving", label_selector="app.kubernetes.io/name=capacity-holder").items] == ["kwok-gpu-0"], 60)
    tier.apply(FIXTURES / "capacity" / "held.yaml")

    def pending() -> bool:
        pods = tier.core.list_namespaced_pod("llm-serving", label_selector=HELD).items
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" and "Insufficient memory" in c.message
                   for p in pods for c in p.status.conditions or [])

    tier.wait("the held target Pending for memory", pending, 60)
    yield tier
    tier.kubectl("delete", "-f", str(FIXTURES / "capacity" / "held.yaml"), "--wait=false")
    tier.kubectl("delete", "-k", str(FIXTURES / "capacity"), "--wait=false")
    tier.kubectl("delete", "-k", str(ROOT / "manifests" / "capacity"), "--ignore-not-found")


def run_verify(tier: Tier, name: str) -> tuple[float, str, int | None]:
    started = time.monotonic()
    tier.job_from_cronjob("cutover-run-llm-serving", name, ["verify", "--backend", "held", "--wait"],
                          plan="cutover-plan-capacity")
    result = tier.finished(name, timeout=90)
    return time.monotonic() - started, result.message, result.exit_code


def test_parallel_stops_at_once_and_says_so_as_a_possibility_without_the_cluster_wide_read(crowded: Tier) -> None:
    commits = crowded.git.cutover_commits("capacity")
    seconds, message, code = run_verify(crowded, "capacity-unseen")
    assert code == 3, message
    assert "capacity_held_by_source" in message and "held may fit once holder's pods are gone" in message, message
    assert seconds < 60  # the startup budget is 60 s: stopped on the verdict, not at the budget's end
    assert crowded.git.cutover_commits("capacity") == commits == []  # nothing committed


def test_with_the_capacity_clusterrole_the_verdict_carries_the_nodes_figures(crowded: Tier) -> None:
    crowded.apply(ROOT / "manifests" / "capacity")  # as the administrator applies it (docs/install.md, step 3)
    crowded.wait("the binding authorized", lambda: crowded.kubectl(
        "auth", "can-i", "list", "nodes", "--as", "system:serviceaccount:cutover:cutover", check=False
    ).stdout.strip() == "yes", 30)
    seconds, message, code = run_verify(crowded, "capacity-seen")
    assert code == 3 and "capacity_held_by_source" in message and seconds < 60, message
    assert "held fits only once holder's pods are gone; held needs 100Gi memory per pod for 1 pod; " \
           "kwok-gpu-0: memory 256Gi allocatable, holder holds 200Gi" in message, message
    assert "1 node excluded (the target's placement, or taints)" in message, message
    pods = crowded.core.list_namespaced_pod("llm-serving", label_selector=HELD).items
    assert [pod.status.phase for pod in pods] == ["Pending"]
