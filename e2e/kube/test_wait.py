"""Scenario a: `cutover verify --wait` in a Job on the real control plane, on the scaled startup timeline, and
failing fast on what a kubelet and the real scheduler report (CrashLoopBackOff, ImagePullBackOff, OOMKilled,
Unschedulable with the scheduler's own message)."""

from __future__ import annotations

import json
import time

import pytest

from tier import realvllm
from tier.cluster import FIXTURES, Tier


@pytest.fixture(scope="module")
def faults(tier: Tier) -> Tier:
    tier.apply(FIXTURES / "faults")
    return tier


def verify_job(tier: Tier, name: str, backend: str, plan: str = "cutover-plan") -> None:
    tier.job_from_cronjob("cutover-run-llm-serving", name, ["verify", "--backend", backend, "--wait"], plan=plan)


def test_verify_waits_for_the_startup_timeline_then_proves_the_names(tier: Tier) -> None:
    tier.kubectl("-n", "llm-serving", "delete", "pod", "-l", "app.kubernetes.io/name=llm-reasoning-candle",
                 "--wait=false")
    started = time.monotonic()
    verify_job(tier, "verify-candle", "candle")
    result = tier.finished("verify-candle")
    assert result.succeeded, result
    assert result.exit_code == 0
    # the new pod loads in 6 s and is probed every second: the wait cannot have ended sooner
    assert time.monotonic() - started >= 6, result
    assert result.message.startswith("cutover verify: OK — backend candle proven"), result.message
    pods = tier.core.list_namespaced_pod("llm-serving", label_selector="app.kubernetes.io/name=llm-reasoning-candle")
    assert [p.status.phase for p in pods.items] == ["Running"]


def test_verify_proves_the_real_vllm_and_names_what_it_does_not_serve(tier: Tier) -> None:
    """The example's vLLM pod is served by a real vLLM (tier/realvllm.py): `verify` proves both names by vLLM's own
    listing (`proof: auto`: vLLM lists every served name), with the plan's fitness trial (completions, one streamed
    to `data: [DONE]`; the context `compare` reads from /v1/models); a plan that asks for a name vLLM does not serve
    is refused with the name, as vLLM's own /v1/models lacks it."""
    assert tier.engines.real_generation("llm-reasoning")
    verify_job(tier, "verify-real-vllm", "vllm")
    result = tier.finished("verify-real-vllm")
    assert result.exit_code == 0, result
    assert result.message.startswith("cutover verify: OK — backend vllm proven"), result.message
    proven = next(json.loads(line) for line in result.log.splitlines() if '"names.proven"' in line)
    assert proven["names"] == ["reasoning-long", "reasoning"] and proven["method"] == "listed", proven
    fitness = proven["fitness"]["new"]
    assert fitness["context"] == realvllm.CONTEXT and fitness["latencyP50"] > 0, fitness  # what vLLM itself says
    asked = tier.engines.forwarded("llm-reasoning")
    assert {("GET", "/v1/models"), ("POST", "/v1/completions")} <= set(asked), asked

    plan = tier.core.read_namespaced_config_map("cutover-plan", "cutover").data["plan.yaml"]
    unserved = plan.replace("servedNames: [reasoning-long, reasoning]", "servedNames: [reasoning-long, reasoning-xl]")
    assert unserved != plan
    tier.core.create_namespaced_config_map("cutover", {"metadata": {"name": "cutover-plan-unserved"},
                                                       "data": {"plan.yaml": unserved}})
    verify_job(tier, "verify-real-vllm-unserved", "vllm", plan="cutover-plan-unserved")
    result = tier.finished("verify-real-vllm-unserved")
    assert result.exit_code == 4, result
    assert "reasoning-xl" in result.message and "name_not_listed" in result.log, result.message


@pytest.mark.parametrize(("backend", "code", "said"), [
    ("oom", 3, ("OOMKilled",)),
    ("crash", 3, ("CrashLoopBackOff",)),
    ("pull", 3, ("not found",)),
    # cutover's reading of the budget and the kubelet's kill at its end fall on the same second: either says it
    ("too-slow", 3, ("startupProbe budget (failureThreshold × periodSeconds) is spent", "CrashLoopBackOff")),
    ("too-big", 3, ("Insufficient nvidia.com/gpu",)),
], ids=["oom", "crash", "pull", "too-slow", "too-big"])
def test_verify_fails_fast_with_the_cause_the_cluster_reports(faults: Tier, backend: str, code: int,
                                                              said: tuple[str, ...]) -> None:
    name = f"verify-{backend}"
    verify_job(faults, name, backend, plan="cutover-plan-faults")
    result = faults.finished(name, timeout=90)
    assert not result.succeeded
    assert result.exit_code == code, result
    # podFailurePolicy FailJob on a verdict: one pod, no retry, and the Job controller says why
    assert "PodFailurePolicy" in result.condition, result.condition
    assert any(words in result.message for words in said), result.message


def test_a_pod_that_lost_its_readiness_is_not_proven(faults: Tier) -> None:
    """A readiness flip (kwok's Stage, as a kubelet reports a failing readiness probe): Ready, then not, while its
    process runs; `verify` without --wait judges the pods as they are now."""
    faults.kubectl("-n", "llm-serving", "scale", "deployment/fault-flaky", "--replicas=1")
    flaky = "app.kubernetes.io/name=fault-flaky"

    def readiness() -> list[str]:
        return [c.status for p in faults.core.list_namespaced_pod("llm-serving", label_selector=flaky).items
                for c in p.status.conditions or [] if c.type == "Ready"]

    faults.wait("the flaky pod Ready", lambda: readiness() == ["True"], 30)
    faults.wait("the flaky pod unready again", lambda: readiness() == ["False"], 30)
    faults.job_from_cronjob("cutover-run-llm-serving", "verify-flaky", ["verify", "--backend", "flaky"],
                            plan="cutover-plan-faults")
    result = faults.finished("verify-flaky")
    assert result.exit_code == 3, result
    assert "0 of 1" in result.message, result.message
