"""Capacity, judged from the figures (docs/capacity.md): quantities, what a pod holds, where it may go, and the
verdict (fits now, once the source is gone, nowhere) on the reference cluster's shapes."""

from __future__ import annotations

from typing import Any

import pytest

from cutover.core.views import NodeView, Placement, PodView, Requirement, Taint, Toleration
from cutover.kube import capacity, payloads, readiness

INSUFFICIENT = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity."


@pytest.mark.parametrize(("text", "milli"), [
    ("1", 1000), ("500m", 500), ("0.5", 500), ("2.5", 2500), ("16Gi", 16 * 2 ** 30 * 1000), ("1k", 1_000_000),
    ("1e3", 1_000_000), ("100M", 10 ** 11), ("1n", 1), ("+3", 3000), (4, 4000), ("1Ki", 1_024_000),
])
def test_quantities_in_milli_units(text: object, milli: int) -> None:
    assert capacity.milli(text) == milli


@pytest.mark.parametrize("text", ["", "1.2.3", "Gi", "1 Gi", "one", "1GB"])
def test_what_is_no_quantity(text: str) -> None:
    with pytest.raises(ValueError, match=text or "^$"):
        capacity.milli(text)


def pod(name: str, *, node: str | None = None, gpus: int = 1, cpu: str = "4", namespace: str = "llm-serving",
        labels: dict[str, str] | None = None, phase: str = "Running", **spec: Any) -> PodView:
    body = {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"containers": [{"name": "engine", "resources": {"limits": {"nvidia.com/gpu": gpus},
                                                                     "requests": {"cpu": cpu, "memory": "16Gi"}}}],
                     **({"nodeName": node} if node else {}), **spec},
            "status": {"phase": phase}}
    return payloads.pod_view(body)


def node(name: str, *, gpus: int = 1, labels: dict[str, str] | None = None, **spec: Any) -> NodeView:
    labels = {"kubernetes.io/hostname": name, **(labels or {})}
    return payloads.node_view({"metadata": {"name": name, "labels": labels}, "spec": spec,
                               "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110",
                                                          **({"nvidia.com/gpu": str(gpus)} if gpus else {})}}})


def test_what_a_pod_holds_is_what_the_scheduler_counts() -> None:
    """Containers and sidecars add up, a plain init container counts only where it is larger, the overhead on top;
    a limit without a request is the request (the API server's default); one `pods` each."""
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}},
                           {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
                               {"name": "proxy", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "500m"}}}],
            "overhead": {"cpu": "100m"}}
    assert payloads.pod_requests(spec) == {"pods": 1000, "cpu": 3100, "nvidia.com/gpu": 1000,
                                           "memory": 2 ** 30 * 1000}


def test_placement_reads_selector_affinity_and_tolerations() -> None:
    spec = {"nodeSelector": {"gpu": "h100"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["worker-9"]}]}]}}},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert payloads.placement(spec) == Placement(
        node_selector={"gpu": "h100"},
        terms=((Requirement("zone", "In", ("a", "b")), Requirement("metadata.name", "NotIn", ("worker-9",),
                                                                   field=True)),),
        tolerations=(Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),))


GPU_TAINT = {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
TOLERATES = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}


@pytest.mark.parametrize(("why", "the_node", "spec", "admitted"), [
    ("no constraint", node("w"), {}, True),
    ("nodeSelector matches", node("w", labels={"gpu": "h100"}), {"nodeSelector": {"gpu": "h100"}}, True),
    ("nodeSelector misses", node("w", labels={"gpu": "a10"}), {"nodeSelector": {"gpu": "h100"}}, False),
    ("a hard taint not tolerated", node("w", **GPU_TAINT), {}, False),
    ("a hard taint tolerated by Exists", node("w", **GPU_TAINT), TOLERATES, True),
    ("a taint tolerated by value", node("w", **GPU_TAINT),
     {"tolerations": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}, True),
    ("a toleration of another value", node("w", **GPU_TAINT),
     {"tolerations": [{"key": "nvidia.com/gpu", "value": "absent"}]}, False),
    ("a toleration of another effect", node("w", **GPU_TAINT),
     {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]}, False),
    ("tolerate everything", node("w", **GPU_TAINT), {"tolerations": [{"operator": "Exists"}]}, True),
    ("PreferNoSchedule only steers", node("w", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), {}, True),
    ("cordoned", node("w", unschedulable=True), {}, False),
    ("affinity In", node("w", labels={"zone": "a"}), {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}, True),
    ("affinity: any term", node("w", labels={"zone": "b"}), {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}}, True),
    ("affinity Gt", node("w", labels={"gpu-memory": "40"}), {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu-memory", "operator": "Gt", "values": ["79"]}]}]}}}}, False),
    ("affinity DoesNotExist", node("w", labels={"spot": "yes"}), {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}]}}}}, False),
    ("affinity on the node's name", node("worker-2"), {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-1"]}]}]}}}}, False),
])
def test_where_a_pod_may_go(why: str, the_node: NodeView, spec: dict[str, Any], admitted: bool) -> None:
    assert capacity.admits(the_node, payloads.placement(spec)) is admitted


def test_a_cordoned_node_admits_who_tolerates_it() -> None:
    cordoned = NodeView("w", unschedulable=True)
    assert capacity.admits(cordoned, Placement(tolerations=(Toleration("node.kubernetes.io/unschedulable",
                                                                       "Exists"),)))
    assert not capacity.admits(NodeView("w", taints=(Taint("dedicated", "llm", "NoExecute"),)), Placement())


VLLM = {"app.kubernetes.io/name": "llm-reasoning"}


def judged(*, nodes: list[NodeView] | None, bound: list[PodView], needed: int = 1, seen_all: bool = True,
           pending: PodView | None = None, short: str | None = INSUFFICIENT) -> capacity.Verdict:
    pending = pending or pod("candle-0")
    source_pods = [p for p in bound if p.matches(VLLM) and p.namespace == "llm-serving"]
    return capacity.judge(target="candle", pending=pending, needed=needed, nodes=nodes, bound=bound,
                          source="vllm", source_pods=source_pods, seen_all=seen_all,
                          short=capacity.lacking(short))


def reference_cluster() -> tuple[list[NodeView], list[PodView]]:
    """"4 of 4 GPUs allocated: coder 2, this 1, clef-serve 1": two GPU nodes, every card taken."""
    nodes = [node("gpu-1", gpus=2), node("gpu-2", gpus=2), node("cpu-1", gpus=0)]
    bound = [pod("coder-0", node="gpu-1", gpus=2, namespace="coder"),
             pod("vllm-0", node="gpu-2", labels=VLLM),
             pod("clef-0", node="gpu-2", namespace="clef")]
    return nodes, bound


def test_the_reference_cluster_fits_candle_only_once_vllm_is_gone() -> None:
    nodes, bound = reference_cluster()
    verdict = judged(nodes=nodes, bound=bound)
    assert verdict.fit is capacity.Fit.ONCE_SOURCE_GONE and verdict.held_by_source
    assert (verdict.needed, verdict.fits_now, verdict.fits_freed) == (1, 0, 1)
    assert verdict.figures == (
        "gpu-1: nvidia.com/gpu 2 allocatable, vllm holds 0, others 2 (coder/coder-0 2), 0 free",
        "gpu-2: nvidia.com/gpu 2 allocatable, vllm holds 1, others 1 (clef/clef-0 1), 0 free",
        "cpu-1: nvidia.com/gpu 0 allocatable, vllm holds 0, others 0, 0 free")
    assert verdict.summary().startswith("candle fits only once vllm's pods are gone; candle needs 4 cpu, 16Gi "
                                        "memory, 1 nvidia.com/gpu per pod for 1 pod; gpu-1: ")
    assert verdict.as_data()["fit"] == "fits_once_source_gone" and "unseen" not in verdict.as_data()


def test_a_free_card_fits_now() -> None:
    nodes, bound = reference_cluster()
    verdict = judged(nodes=[*nodes, node("gpu-3", gpus=1)], bound=bound)
    assert verdict.fit is capacity.Fit.NOW and verdict.fits_now == 1


def test_more_pods_than_the_source_frees_fit_nowhere() -> None:
    nodes, bound = reference_cluster()
    verdict = judged(nodes=nodes, bound=bound, needed=2)
    assert verdict.fit is capacity.Fit.NOWHERE and verdict.fits_freed == 1
    assert verdict.summary().startswith("candle fits nowhere, even with vllm's pods gone; candle needs 4 cpu, "
                                        "16Gi memory, 1 nvidia.com/gpu per pod for 2 pods")


def test_a_source_on_nodes_the_target_may_not_use_frees_nothing_for_it() -> None:
    nodes, bound = reference_cluster()
    picky = pod("candle-0", nodeSelector={"kubernetes.io/hostname": "gpu-1"})
    verdict = judged(nodes=nodes, bound=bound, pending=picky)
    assert verdict.fit is capacity.Fit.NOWHERE
    assert verdict.figures[-1] == "2 nodes excluded (the target's placement, or taints)"


def test_a_pod_larger_than_any_node_fits_nowhere() -> None:
    nodes, bound = reference_cluster()
    verdict = judged(nodes=nodes, bound=bound, pending=pod("candle-0", gpus=4))
    assert verdict.fit is capacity.Fit.NOWHERE and verdict.fits_freed == 0


def test_finished_pods_hold_nothing_and_terminating_ones_still_do() -> None:
    nodes, bound = reference_cluster()
    done = [*bound[:2], pod("clef-0", node="gpu-2", namespace="clef", phase="Succeeded")]
    assert judged(nodes=nodes, bound=done).fit is capacity.Fit.NOW


def test_without_the_cluster_wide_read_the_verdict_is_a_possibility_and_says_what_it_missed() -> None:
    """Only the workload's namespace is seen: the other namespaces' GPUs are not counted, so what looks free may not
    be, and the verdict says so instead of stating it."""
    nodes, bound = reference_cluster()
    mine = [p for p in bound if p.namespace == "llm-serving"]
    verdict = judged(nodes=nodes, bound=mine, seen_all=False)
    assert verdict.fit is capacity.Fit.MAYBE_ONCE_SOURCE_GONE and verdict.held_by_source
    assert verdict.summary().startswith("candle may fit once vllm's pods are gone")
    assert verdict.unseen and "cutover-capacity" in verdict.unseen and verdict.unseen in verdict.summary()


def test_without_the_cluster_wide_read_a_source_that_holds_no_gpu_frees_none() -> None:
    nodes, _ = reference_cluster()
    cpu_only = [pod("vllm-0", node="cpu-1", gpus=0, labels=VLLM)]
    assert judged(nodes=nodes, bound=cpu_only, seen_all=False).fit is capacity.Fit.NOWHERE


def test_unreadable_nodes_leave_the_fit_unknown_unless_the_source_holds_what_is_short() -> None:
    """Without the ClusterRole neither nodes nor other namespaces can be read: a source holding the resource the
    scheduler found short is the one fact left, and the verdict stays a possibility."""
    verdict = judged(nodes=None, bound=[])
    assert verdict.fit is capacity.Fit.UNKNOWN and not verdict.held_by_source
    assert verdict.unseen is not None and "cutover-capacity" in verdict.unseen
    _, bound = reference_cluster()
    maybe = judged(nodes=None, bound=[p for p in bound if p.namespace == "llm-serving"], seen_all=False)
    assert maybe.fit is capacity.Fit.MAYBE_ONCE_SOURCE_GONE and maybe.held_by_source
    assert maybe.summary().startswith("candle may fit once vllm's pods are gone; candle needs 4 cpu")
    cpu_only = [pod("vllm-0", node="cpu-1", gpus=0, labels=VLLM)]
    assert judged(nodes=None, bound=cpu_only, seen_all=False).fit is capacity.Fit.UNKNOWN


def test_the_schedulers_words_name_what_is_short() -> None:
    assert capacity.lacking(INSUFFICIENT) == ("nvidia.com/gpu",)
    assert capacity.lacking("0/3 nodes are available: 2 Insufficient cpu, 3 Insufficient memory.") == ("cpu",
                                                                                                      "memory")
    assert capacity.lacking(None) == ()


@pytest.mark.parametrize(("resource", "amount", "text"), [
    ("nvidia.com/gpu", 2000, "2"), ("cpu", 500, "500m"), ("cpu", 4000, "4"), ("memory", 16 * 2 ** 30 * 1000, "16Gi"),
    ("memory", 512 * 2 ** 20 * 1000, "512Mi"), ("memory", 1000, "1"),
])
def test_amounts_as_a_person_reads_them(resource: str, amount: int, text: str) -> None:
    assert capacity.shown(resource, amount) == text


@pytest.mark.parametrize(("nodes_extra", "needed", "strategy", "waited", "cause", "freed"), [
    ([], 1, "parallel", 0.0, "capacity_held_by_source", False),  # held by the source: stop, no gap without consent
    ([], 1, "recreate", 0.0, "capacity_held_by_source", False),  # the caller frees the source
    ([], 1, "recreate", 0.0, None, True),  # freed already: its pods are going, wait
    ([node("gpu-3", gpus=1)], 1, "parallel", 0.0, None, False),  # fits now: the scheduler has yet to see the room
    ([node("gpu-3", gpus=1)], 1, "parallel", 59.0, None, False),
    ([node("gpu-3", gpus=1)], 1, "parallel", 60.0, "unschedulable", False),  # then its word is taken
    ([], 2, "parallel", 0.0, "unschedulable", False),  # fits nowhere
    ([], 2, "recreate", 0.0, "unschedulable", True),  # fits nowhere, even with the source gone
])
def test_what_an_unschedulable_pod_means_once_capacity_is_judged(nodes_extra: list[NodeView], needed: int,
                                                                 strategy: str, waited: float,
                                                                 cause: str | None, freed: bool) -> None:
    nodes, bound = reference_cluster()
    verdict = judged(nodes=[*nodes, *nodes_extra], bound=bound, needed=needed)
    failure = readiness.Failure("unschedulable", f"pod candle-0 cannot be scheduled: {INSUFFICIENT}", "h",
                                pod="candle-0")
    meant = readiness.after_capacity(failure, verdict, strategy=strategy, waited=waited, source_freed=freed)
    assert (meant.cause if meant else None) == cause
    if meant is not None:
        assert meant.message.startswith(failure.message) and verdict.summary() in meant.message and meant.hint


@pytest.mark.parametrize(("name", "labels", "workload"), [
    ("coder-7d9f8b6c5d-x2x4q", {"pod-template-hash": "7d9f8b6c5d"}, "coder/coder"),  # a Deployment's
    ("train-3", {"statefulset.kubernetes.io/pod-name": "train-3"}, "coder/train"),  # a StatefulSet's
    ("one-off", {}, "coder/one-off"),
])
def test_the_figures_name_the_workloads_that_hold_the_cards(name: str, labels: dict[str, str], workload: str) -> None:
    held = PodView("coder", name, "u", labels)
    assert held.workload == workload
