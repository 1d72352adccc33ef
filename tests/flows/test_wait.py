"""Waiting on the startup timeline and proving names, end to end over the emulated API server and the
engine doubles, in fake time: a 30-minute startup runs in milliseconds and elapsed times are exact."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from cutover.demo.engines import Blackhole
from cutover.demo.world import NAMESPACE, Script, World
from cutover.errors import NamesNotProven, TargetNotReady
from cutover.flows import wait
from cutover.kube import cluster, readiness
from cutover.plan import Plan
from helpers import PODS, fail_first, named, requests

pytestmark = pytest.mark.looptime

POLICIES = "networking.k8s.io/v1/networkpolicies"


async def test_candle_starts_in_eleven_minutes_and_proves_both_names(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", Script(pull=45, load=660))
    plan = make_plan()
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    # Running at 45 s, bound at 705 s; the kubelet's next 15 s probe tick after start makes it Ready.
    assert proven.waited == pytest.approx(705, abs=15)
    assert [proof.proven for proof in proven.proofs] == [("reasoning-long", "reasoning")]
    assert [proof.method for proof in proven.proofs] == ["generate"]
    assert [(m, p) for m, p, _ in candle.engine.requests] == [("POST", "/v1/chat/completions")] * 2
    progress = named(events, "target.waiting")
    assert [e["elapsed"] for e in progress] == list(range(30, 720, 30))[: len(progress)]
    assert len(progress) in (23, 24)  # every 30 s until Ready
    assert progress[-1]["budget_left"] == 1800 - progress[-1]["elapsed"]
    assert "probe budget" in progress[-1]["pods"][0] and "failures allowed" in progress[-1]["pods"][0]
    assert named(events, "names.proven")[0]["names"] == ["reasoning-long", "reasoning"]


async def test_vllm_proves_both_names_by_listing(world: World, kube: cluster.Cluster,
                                                 make_plan: Callable[..., Plan]) -> None:
    vllm = world.add_pod("vllm", ready=True)
    plan = make_plan()
    proven = await wait.prove_backend(kube, plan, plan.backends["vllm"], wait=False)
    assert [proof.method for proof in proven.proofs] == ["listed"]
    assert [(m, p) for m, p, _ in vllm.engine.requests] == [("GET", "/health"), ("GET", "/v1/models")]


async def test_no_engine_request_before_the_pod_is_ready(world: World, kube: cluster.Cluster,
                                                         make_plan: Callable[..., Plan]) -> None:
    candle = world.add_pod("candle", Script(pull=30, load=300))
    plan = make_plan()
    probes_before: list[int] = []

    async def watch_engine() -> None:
        while not candle.engine.bound:
            probes_before.append(len(candle.engine.requests))
            await asyncio.sleep(1)

    spy = asyncio.create_task(watch_engine())
    await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    await spy
    assert set(probes_before) == {0}


async def test_a_pod_that_never_binds_exhausts_the_budget_at_the_ceiling(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    world.add_pod("candle", Script(pull=20, fault="never_binds"))
    plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "startup_budget_exhausted"
    assert loop.time() - start == pytest.approx(1800, abs=1)  # maxWait caps the 20 s + 1800 s probe budget
    assert named(events, "target.budget_exhausted")[0]["hint"]


async def test_a_shorter_max_wait_is_the_ceiling(world: World, kube: cluster.Cluster,
                                                 make_plan: Callable[..., Plan]) -> None:
    world.add_pod("candle", Script(pull=20, fault="never_binds"))
    plan = make_plan(max_wait="10m")
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady):
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert loop.time() - start == pytest.approx(600, abs=1)


@pytest.mark.parametrize(("fault", "cause", "within", "words"), [
    ("crash_loop", "crash_loop", 60, "CrashLoopBackOff"),
    ("image_pull", "image_pull", 30, "ErrImagePull: rpc error: code = NotFound"),
    ("unschedulable", "unschedulable", 5, "4 Insufficient nvidia.com/gpu"),
    ("oom", "oom_killed", 400, "OOMKilled"),
    ("config_error", "container_config", 30, 'secret "hf-token" not found'),
])
async def test_fail_fast(world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan],
                         events: list[dict[str, Any]], fault: str, cause: str, within: float, words: str) -> None:
    world.add_pod("candle", Script(pull=20, load=600, fault=fault))
    plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == cause
    assert words in caught.value.message and caught.value.hint
    assert loop.time() - start <= within
    (failed,) = named(events, "target.failed_fast")
    assert failed["cause"] == cause and failed["pod"].startswith("reasoning-long-predictor-candle-")


async def test_no_pod_matching_the_selector(world: World, kube: cluster.Cluster,
                                            make_plan: Callable[..., Plan]) -> None:
    plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "no_target_pods" and "labels match the plan" in caught.value.hint
    assert caught.value.message.endswith("; no pod matches any of its labels")
    assert loop.time() - start == pytest.approx(120, abs=1)


async def test_verify_with_no_pod_at_all_names_where_it_looked_and_the_near_misses(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    """Not "0 of 1 pods Ready now": no pod in the namespace matches the selector, and one nearly does."""
    world.add_pod("vllm", ready=True)  # shares component=predictor with candle's selector
    plan = make_plan()
    typo = dataclasses.replace(plan.backends["candle"], selector={"app.kubernetes.io/name": "llm-reasoning-candel",
                                                                  "component": "predictor"})
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, typo, wait=False)
    message = caught.value.message
    assert caught.value.cause == "no_target_pods" and caught.value.exit_code == 3
    assert message.startswith("no pod in llm-serving matches app.kubernetes.io/name=llm-reasoning-candel,"
                              "component=predictor; pods matching part of it: reasoning-long-predictor-vllm-")
    assert "(lacks app.kubernetes.io/name=llm-reasoning-candel)" in message
    assert "backends.candle.selector" in caught.value.hint


async def test_the_pod_deleted_during_the_wait(world: World, kube: cluster.Cluster,
                                               make_plan: Callable[..., Plan]) -> None:
    candle = world.add_pod("candle", Script(pull=20, load=600))
    plan = make_plan()

    async def delete_later() -> None:
        await asyncio.sleep(100)
        world.delete_pod(candle.name)

    deleter = asyncio.create_task(delete_later())
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    await deleter
    assert caught.value.cause == "pod_deleted"


async def test_a_name_missing_on_vllm_fails_with_names_not_proven(world: World, kube: cluster.Cluster,
                                                                  make_plan: Callable[..., Plan]) -> None:
    world.add_pod("vllm", ready=True)
    plan = make_plan(names=("reasoning-long", "reasoning-xl"))
    with pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["vllm"], wait=True)
    assert caught.value.cause == "name_not_listed"
    assert "'reasoning-xl' is not in /v1/models (lists: reasoning, reasoning-long)" in caught.value.message
    assert caught.value.exit_code == 4


async def test_a_connect_timeout_is_diagnosed_and_the_policy_named(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    world.kube.remove(POLICIES, NAMESPACE, "llm-serving-ingress-cutover")  # the rule the Jobs need is missing
    pod = world.add_pod("candle", Script(pull=5, load=60))
    plan = make_plan()
    assert pod.task is not None
    await pod.task  # Running, bound and Ready
    await pod.engine.unbind()  # what the Job sees when a policy drops its packets: nothing answers
    with Blackhole(pod.ip, world.port), pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "network_policy_blocks"
    assert ("NetworkPolicy llm-serving-ingress selects the target pods and no ingress rule admits namespace "
            "cutover on TCP") in caught.value.hint
    assert "add an ingress rule for namespace cutover" in caught.value.hint
    (diagnosis,) = named(events, "network.diagnosis")
    assert diagnosis["admitted"] is False and diagnosis["policies"] == ["llm-serving-ingress"]


async def test_a_connect_timeout_with_an_admitting_policy_keeps_trying_until_the_budget(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    pod = world.add_pod("candle", Script(pull=5, load=60))
    plan = make_plan(max_wait="5m")
    assert pod.task is not None
    await pod.task  # Running, bound and Ready
    await pod.engine.unbind()
    with Blackhole(pod.ip, world.port), pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "connect_timeout"
    assert len(named(events, "names.retry")) >= 5
    assert all(e["admitted"] is True for e in named(events, "network.diagnosis"))


async def test_engine_refusing_then_binding_is_retried(world: World, kube: cluster.Cluster,
                                                       make_plan: Callable[..., Plan],
                                                       events: list[dict[str, Any]]) -> None:
    pod = world.add_pod("candle", ready=True)
    plan = make_plan()
    await asyncio.sleep(1)
    await pod.engine.unbind()  # Ready by the kubelet, but the listener is gone for a moment

    async def rebind() -> None:
        await asyncio.sleep(12)
        await pod.engine.bind()

    binder = asyncio.create_task(rebind())
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    await binder
    assert proven.proofs[0].proven == ("reasoning-long", "reasoning")
    assert [e["problem"] for e in named(events, "names.retry")] == ["refused"] * 3


async def test_a_steady_pod_that_keeps_refusing_fails_after_the_grace_not_after_max_wait(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    """Ready for a day (no startup budget left) and nothing listening: tried again for PROOF_GRACE, then
    `refused`, not 30 minutes of silence and not at the first refusal either."""
    pod = world.add_pod("candle", ready=True)
    plan = make_plan()
    await world.settled()
    await pod.engine.unbind()
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(NamesNotProven) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "refused"
    assert wait.PROOF_GRACE - wait.PROOF_RETRY <= loop.time() - began <= wait.PROOF_GRACE + wait.PROOF_RETRY
    assert len(named(events, "names.retry")) == int(wait.PROOF_GRACE // wait.PROOF_RETRY)


async def test_verify_without_wait_says_not_ready_now(world: World, kube: cluster.Cluster,
                                                      make_plan: Callable[..., Plan]) -> None:
    world.add_pod("candle", Script(pull=20, load=600))
    plan = make_plan()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=False)
    assert caught.value.cause == "target_not_ready_now" and "--wait" in caught.value.hint


async def test_api_errors_and_a_dropped_watch_during_the_wait(world: World, kube: cluster.Cluster,
                                                              make_plan: Callable[..., Plan]) -> None:
    world.kube["list", PODS] << fail_first(2, 500)
    world.kube["watch", PODS] << fail_first(1, 500)
    world.add_pod("candle", Script(pull=20, load=300))
    plan = make_plan()
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert proven.waited == pytest.approx(320, abs=16)
    assert len(requests(world, watch=True)) >= 2


async def test_a_pod_restarting_during_startup_fails_after_the_bound(world: World, kube: cluster.Cluster,
                                                                    make_plan: Callable[..., Plan]) -> None:
    pod = world.add_pod("candle", Script(pull=10, fault="never_binds"))
    plan = make_plan()

    async def restart_three_times() -> None:
        for _ in range(3):
            await asyncio.sleep(100)
            pod.restarts += 1
            pod.started_at = world.kube.stamp()
            pod._status(**pod._running(ready=False))

    restarter = asyncio.create_task(restart_three_times())
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    await restarter
    assert caught.value.cause == "restarting" and "restarted 3 times" in caught.value.message


async def test_a_rate_limited_pull_is_waited_through_with_the_reason_shown(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    world.add_pod("candle", Script(pull=20, load=120, fault="image_rate_limited"))
    plan = make_plan()
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert proven.proofs and not named(events, "target.failed_fast")
    lines = [line for event in named(events, "target.waiting") for line in event["pods"]]
    assert any("image pull failing, waited through: 429 Too Many Requests" in line for line in lines), lines


# --- capacity (docs/capacity.md) --------------------------------------------------------------------------------


def one_gpu_cluster(world: World) -> None:
    """The reference cluster's shape at its smallest: one card, and vLLM holds it."""
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")


async def test_parallel_stops_at_once_when_the_source_holds_the_card(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    """Never a 30-minute wait for a pod that cannot schedule, never a gap nobody consented to: exit 3 within
    seconds, with the figures, naming the strategies that can proceed."""
    one_gpu_cluster(world)
    world.add_pod("candle", Script(fault="unschedulable"), gpus=1)
    plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert loop.time() - start <= 5
    assert caught.value.cause == "capacity_held_by_source" and caught.value.exit_code == 3
    assert "candle fits only once vllm's pods are gone; candle needs 1 nvidia.com/gpu per pod for 1 pod; " \
           "gpu-1: nvidia.com/gpu 1 allocatable, vllm holds 1, others 0, 0 free" in caught.value.message
    assert "handoff.strategy: bridge" in caught.value.hint and "recreate with handoff.maxGap" in caught.value.hint
    assert "docs/capacity.md" in caught.value.hint
    (judged,) = named(events, "capacity.judged")
    assert judged["fit"] == "fits_once_source_gone" and judged["source"] == "vllm" and judged["fitsOnceSourceGone"] == 1
    (failed,) = named(events, "target.failed_fast")
    assert failed["cause"] == "capacity_held_by_source" and "gpu-1:" in failed["message"]


async def test_room_that_appears_within_the_grace_is_used(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    """The scheduler places the pod 10 s into the grace; it then loads for 110 s, well past the grace's end, and is
    proven: the grace ends with the pod placed, and the wait goes on on the startup timeline as usual."""
    one_gpu_cluster(world)
    world.add_node("gpu-2", gpus=1)
    candle = world.add_pod("candle", Script(fault="unschedulable"), gpus=1)

    async def scheduled_later() -> None:
        await asyncio.sleep(10)
        world.kube.merge("/v1/pods", NAMESPACE, candle.name, {"spec": {"nodeName": "gpu-2"}, "status": {"conditions": [
            {"type": "PodScheduled", "status": "True"}]}})
        await candle._start()
        await asyncio.sleep(110)
        await candle.engine.bind()
        candle.become_ready()

    placing = asyncio.create_task(scheduled_later())
    plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    proven = await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    await placing
    assert proven.backend == "candle" and loop.time() - start == pytest.approx(120, abs=1)
    assert {event["fit"] for event in named(events, "capacity.judged")} == {"fits_now"}


async def test_without_the_clusterrole_it_asks_first_and_says_what_it_could_not_see(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    """The operator did not apply manifests/capacity: cutover asks (SelfSubjectAccessReview) before it reads, so the
    audit log holds no refusal, and the verdict stays a possibility (the real tier's scenario, e2e/kube)."""
    one_gpu_cluster(world)
    world.kube.denied = {("list", "nodes"), ("list", "pods")}
    world.add_pod("candle", Script(fault="unschedulable"), gpus=1)
    plan = make_plan()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "capacity_held_by_source"
    assert "cannot be scheduled: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu" in caught.value.message
    assert "candle may fit once vllm's pods are gone" in caught.value.message
    assert "could not be read (grant the optional ClusterRole cutover-capacity)" in caught.value.message
    paths = {request.url.path for request in world.kube}
    assert "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" in paths
    assert "/api/v1/nodes" not in paths and "/api/v1/pods" not in paths  # never a read that would be refused


async def test_a_target_larger_than_what_the_source_frees_is_unschedulable_with_the_figures(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan]) -> None:
    one_gpu_cluster(world)
    world.add_pod("candle", Script(fault="unschedulable"), gpus=2)
    plan = make_plan()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert caught.value.cause == "unschedulable"
    assert "candle fits nowhere, even with vllm's pods gone; candle needs 2 nvidia.com/gpu" in caught.value.message


async def test_room_the_scheduler_has_not_seen_yet_is_waited_for_then_its_word_is_taken(
        world: World, kube: cluster.Cluster, make_plan: Callable[..., Plan], events: list[dict[str, Any]]) -> None:
    """The figures say it fits (a card on gpu-2 is free) while the pod is still marked Unschedulable: the
    scheduler retries a parked pod when the cluster changes, so the wait gives it CAPACITY_GRACE, no more."""
    one_gpu_cluster(world)
    world.add_node("gpu-2", gpus=1)
    world.add_pod("candle", Script(fault="unschedulable"), gpus=1)
    plan = make_plan()
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(TargetNotReady) as caught:
        await wait.prove_backend(kube, plan, plan.backends["candle"], wait=True)
    assert loop.time() - start == pytest.approx(readiness.CAPACITY_GRACE, abs=1)
    assert caught.value.cause == "unschedulable" and "yet the scheduler still refuses it after 60s" in \
        caught.value.message
    assert {event["fit"] for event in named(events, "capacity.judged")} == {"fits_now"}
