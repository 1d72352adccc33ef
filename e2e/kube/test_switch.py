"""Scenario f: a switch applied in place keeps the Service's UID and ClusterIP, and the real EndpointSlice
controller's slices then hold exactly the target's Ready pods; cutover's own status reads the switch.

The edit is the one cutover commits (`cutover diff`, applied with `patch`), applied with kubectl as ArgoCD's
sync applies it; the ArgoCD tier runs the same switch through a real ArgoCD.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kubernetes

from tier.cluster import ROOT, Tier

SERVICE = ROOT / "manifests" / "examples" / "llm-serving" / "workload" / "service.yaml"
CANDLE = "app.kubernetes.io/name=llm-reasoning-candle,component=predictor"
VLLM = "app.kubernetes.io/name=llm-reasoning,component=predictor,serving.kserve.io/inferenceservice=reasoning"


def switched_file(tmp: Path, selector: str) -> Path:
    edited = tmp / "service.yaml"
    shutil.copy(SERVICE, edited)
    cutover = Path(sys.executable).with_name("cutover")
    diff = subprocess.run([str(cutover), "diff", "--file", str(edited), "--selector", selector],
                          capture_output=True, text=True, check=True).stdout
    if "\n@@ " in diff:  # no hunk when the file already selects it (the outcome line alone)
        subprocess.run(["patch", "--quiet", str(edited)], input=diff, text=True, check=True)
    return edited


def endpoint_ips(tier: Tier) -> set[str]:
    slices = kubernetes.client.DiscoveryV1Api(tier.api).list_namespaced_endpoint_slice(
        "llm-serving", label_selector="kubernetes.io/service-name=reasoning-long-predictor")
    return {address for s in slices.items for e in s.endpoints or []
            if e.conditions and e.conditions.ready for address in e.addresses}


def ready_ips(tier: Tier, selector: str) -> set[str]:
    pods = tier.core.list_namespaced_pod("llm-serving", label_selector=selector).items
    return {p.status.pod_ip for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])}


def served_through(cluster_ip: str) -> list[str] | None:
    """The model ids /v1/models lists through the Service's port 80, or None when nothing answers."""
    try:
        answer = httpx.get(f"http://{cluster_ip}/v1/models", timeout=2)
    except httpx.HTTPError:
        return None
    return [model["id"] for model in answer.json().get("data", [])] if answer.status_code == 200 else None


def service(tier: Tier) -> Any:
    return tier.core.read_namespaced_service("reasoning-long-predictor", "llm-serving")


def test_after_a_switch_the_slices_hold_exactly_the_targets_ready_pods(tier: Tier, tmp_path: Path) -> None:
    candle = tier.wait("a Ready candle-vllm pod", lambda: ready_ips(tier, CANDLE), 60)
    before = service(tier)
    names = tier.wait("vLLM's names through the ClusterIP", lambda: served_through(before.spec.cluster_ip), 60)
    assert sorted(names) == ["reasoning", "reasoning-long"]
    tier.apply(switched_file(tmp_path, CANDLE))
    try:
        after = service(tier)
        assert (after.metadata.uid, after.spec.cluster_ip) == (before.metadata.uid, before.spec.cluster_ip)
        assert after.spec.selector == dict(kv.split("=") for kv in CANDLE.split(","))
        tier.wait("the slices to hold the candle-vllm pods", lambda: endpoint_ips(tier) == candle, 30)
        # and through the real data plane (kube-proxy's iptables rules), the name answers with candle-vllm's model
        tier.wait("the ClusterIP to route to candle-vllm", lambda: served_through(after.spec.cluster_ip) == [
            "reasoning-long"], 30)
        vllm = ready_ips(tier, VLLM)
        assert vllm and not endpoint_ips(tier) & vllm
        tier.job_from_cronjob("cutover-run-llm-serving", "status-after-switch", ["status", "--output", "json"])
        result = tier.finished("status-after-switch")
        assert result.succeeded, result
        assert '"liveBackend": "candle"' in result.log, result.log[-2000:]
    finally:
        tier.apply(switched_file(tmp_path, VLLM))
    vllm = tier.wait("a Ready vLLM pod", lambda: ready_ips(tier, VLLM), 60)
    tier.wait("the slices back on vLLM", lambda: endpoint_ips(tier) == vllm, 30)
