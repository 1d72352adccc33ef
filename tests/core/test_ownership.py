"""Whose engine a free stops (the review's N4): the workload a plan names for a backend runs that backend's pods,
read from the live pods' controller names and labels."""

from __future__ import annotations

from cutover.core import ownership
from cutover.core.views import PodView

VLLM = {"app": "llm-reasoning", "component": "predictor"}


def pod(name: str, labels: dict[str, str], *, phase: str = "Running", namespace: str = "llm-serving") -> PodView:
    return PodView(namespace, name, name, labels, phase=phase)


def deployment_pod(deployment: str, labels: dict[str, str], **more: str) -> PodView:
    return pod(f"{deployment}-7d9f8c6b5-x2x9z", {**labels, "pod-template-hash": "7d9f8c6b5"}, **more)


def judged(pods: list[PodView], *, kind: str = "Deployment", name: str = "llm-reasoning") -> str | None:
    return ownership.stranger(pods, kind=kind, name=name, namespace="llm-serving", selector=VLLM)


def test_the_backends_own_deployment_passes() -> None:
    assert judged([deployment_pod("llm-reasoning", VLLM), deployment_pod("coder", {"app": "coder"})]) is None
    statefulset = pod("llm-reasoning-0", {**VLLM, "statefulset.kubernetes.io/pod-name": "llm-reasoning-0"})
    assert judged([statefulset], kind="StatefulSet") is None


def test_another_teams_deployment_is_never_the_backends() -> None:
    """A plan naming team B's Deployment for vLLM would set it to zero: its pods do not carry vLLM's selector."""
    why = judged([deployment_pod("llm-reasoning", VLLM), deployment_pod("team-b-api", {"app": "team-b"})],
                 name="team-b-api")
    assert why is not None and "the pods of Deployment team-b-api (team-b-api-7d9f8c6b5-x2x9z) do not carry" in why


def test_a_deployment_that_does_not_run_the_backend_would_free_nothing() -> None:
    why = judged([deployment_pod("llm-reasoning", VLLM)], name="llm-reasoning-old")
    assert why is not None and "are not Deployment llm-reasoning-old's" in why


def test_what_says_nothing_either_way() -> None:
    """No pod (stopped, or not yet there), a pod made by hand, a finished one, another namespace's: no verdict."""
    assert judged([]) is None
    assert judged([pod("debug", VLLM)], name="anything") is None
    assert judged([deployment_pod("other", VLLM, phase="Succeeded")]) is None
    assert judged([deployment_pod("llm-reasoning", {"app": "x"}, namespace="elsewhere")]) is None


def test_an_inferenceservice_is_known_by_kserves_label() -> None:
    kserve = deployment_pod("reasoning-predictor-00001-deployment", {**VLLM, ownership.KSERVE: "reasoning"})
    assert judged([kserve], kind="InferenceService", name="reasoning") is None
    assert "are not InferenceService chat's" in (judged([kserve], kind="InferenceService", name="chat") or "")
    assert "are not Deployment llm-reasoning's" in (judged([kserve]) or "")  # KServe's Deployment, not the plan's


def test_a_pod_whose_name_was_cut_short_says_nothing() -> None:
    """A Deployment's generated pod names are cut at 63 characters, its pod-template-hash with them: such a pod
    cannot be told to be another workload's."""
    long = pod("a-very-long-deployment-name-for-the-reasoning-engine-of-team-a-7d9", {**VLLM,
                                                                                  "pod-template-hash": "7d9f8c6b5"})
    assert judged([long], name="a-very-long-deployment-name-for-the-reasoning-engine-of-team-a") is None
