"""Scenario e: the Kubernetes API requests one `verify --wait` makes for one target pod, counted in the real
apiserver's audit log (by the Job pod's bound token), beside what the emulator counts for the same command and
the same wait (the reference plan, one candle-vllm pod that loads in 6 s). Goal: at most 12 per pod per 30-minute
wait (bench 2 measures the 30 minutes in fake time; here the wait is the scaled one)."""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
import threading
from pathlib import Path

from conftest import MEASURED
from cutover.demo.world import Script, World
from tier.cluster import Tier

POD_NAME = "authentication.kubernetes.io/pod-name"
GOAL = 12
FITNESS = "{requests: 1, maxLatency: 5s, stream: true, compare: true}"  # as e2e/fixtures/cutover/plan.yaml


def real_requests(tier: Tier, job: str) -> collections.Counter[str]:
    pods = {p.metadata.name for p in tier.core.list_namespaced_pod(
        "cutover", label_selector=f"batch.kubernetes.io/job-name={job}").items}
    counted: collections.Counter[str] = collections.Counter()
    for event in tier.audit():
        # one line per request: a watch is logged when its answer starts and again when it completes
        if event["stage"] == "ResponseComplete" and set(event["user"].get("extra", {}).get(POD_NAME, [])) & pods:
            ref = event.get("objectRef", {})
            counted[f"{event['verb']} {ref.get('resource', event['requestURI'])}"] += 1
    return counted


def emulated_requests(load: float, tmp: Path) -> collections.Counter[str]:
    """The same command, `cutover verify --backend candle --wait`, as a process against the emulator (the demo's
    world on a loop of its own, on the real clock) with one candle-vllm pod loading for `load` seconds."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    world = World()
    asyncio.run_coroutine_threadsafe(world.__aenter__(), loop).result(30)
    try:
        async def start() -> None:
            world.admit_jobs()
            pod = world.add_pod("candle", Script(pull=0.5, load=load))
            await pod.engine.bind()

        asyncio.run_coroutine_threadsafe(start(), loop).result(30)
        plan_file = tmp / "plan.yaml"
        plan_file.write_text(world.plan_text(max_wait="60s", fitness=FITNESS))  # the tier plan's fitness
        env = {**os.environ, "KUBECONFIG": str(world.kubeconfig(tmp / "kubeconfig"))}
        done = subprocess.run([str(Path(sys.executable).with_name("cutover")), "--plan", str(plan_file), "verify",
                               "--backend", "candle", "--wait"], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        counted: collections.Counter[str] = collections.Counter()
        for request in world.kube:
            if request.url.path.startswith(("/api/", "/apis/")):
                counted[audit_name(request.method, request.url.path, request.url.query.get("watch"))] += 1
        return counted
    finally:
        asyncio.run_coroutine_threadsafe(world.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)


def audit_name(method: str, path: str, watch: str | None) -> str:
    """A request as the audit log names it: the verb (list and watch for a collection) and the resource."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]  # after /api/v1 or /apis/<group>/<version>
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource, named = rest[0], len(rest) > 1
    verbs = {"GET": "get" if named else ("watch" if watch == "true" else "list"), "POST": "create",
             "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    return f"{verbs[method]} {resource}"


def test_api_requests_per_target_pod_over_the_wait(tier: Tier, tmp_path: Path) -> None:
    tier.kubectl("-n", "llm-serving", "delete", "pod", "-l", "app.kubernetes.io/name=llm-reasoning-candle",
                 "--wait=false")
    tier.job_from_cronjob("cutover-run-llm-serving", "verify-count", ["verify", "--backend", "candle", "--wait"])
    result = tier.finished("verify-count")
    assert result.succeeded, result
    real = real_requests(tier, "verify-count")
    emulated = emulated_requests(6.0, tmp_path)
    table = "\n".join(f"  {what:<40} real {real.get(what, 0):>3}   emulator {emulated.get(what, 0):>3}"
                      for what in sorted(set(real) | set(emulated)))
    MEASURED.append(f"\nAPI requests of one verify --wait, one target pod:\n{table}\n"
                    f"  {'total':<40} real {sum(real.values()):>3}   emulator {sum(emulated.values()):>3}")
    assert 0 < sum(real.values()) <= GOAL, table
