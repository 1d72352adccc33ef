"""What the handoff's scenarios share (e2e/gitops/test_whole_handoff.py, test_full_gpu.py): the engines' Deployments,
another team's pod on the GPU node's other card, a client of the Service counting its answers, the audit's run after
a hop ArgoCD synced without hooks, and reading what the hops did (their pods' logs, cutover's commits)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any, Self

import httpx

from cutover.core.trailers import Trailers
from tier import gitops

DEPLOYMENT = {"vllm": "llm-reasoning", "candle": "llm-reasoning-candle", "coder": "coder"}
POSTSYNC = "cutover-postsync-llm-serving"
HOLDER = """apiVersion: v1
kind: Pod
metadata:
  name: coder
  namespace: default
spec:
  nodeSelector: {nvidia.com/gpu.present: "true"}
  containers:
    - name: coder
      image: example.invalid/coder:1
      resources:
        limits: {nvidia.com/gpu: 1}
"""


def serving(argo: gitops.GitOpsTier) -> str:
    return serving_of(argo.service().spec.selector)



class Background(threading.Thread):
    """A thread that runs while its `with` block does: `done` is set on the way out, and it is joined."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.done = threading.Event()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join(timeout=15)


class Client(Background):
    """A client of the Service: `reasoning` through its ClusterIP every 0.2 s, a new connection each time (kube-proxy
    chooses an endpoint per connection), counting what was answered and what failed."""

    def __init__(self, address: str) -> None:
        super().__init__("client")
        self.address, self.answered = address, 0
        self.failed: list[str] = []
        self.asked: list[tuple[float, bool]] = []  # (monotonic time, answered)

    def run(self) -> None:
        with httpx.Client(timeout=5, headers={"Connection": "close"}) as client:
            while not self.done.wait(0.2):
                try:
                    answer = client.post(f"http://{self.address}/v1/chat/completions", json={
                        "model": "reasoning", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
                    failure = None if answer.status_code == 200 else f"{answer.status_code} {answer.text[:80]}"
                except httpx.HTTPError as exc:
                    failure = repr(exc)
                self.asked.append((time.monotonic(), failure is None))
                if failure is None:
                    self.answered += 1
                else:
                    self.failed.append(f"{time.strftime('%T')} {failure}")

    def longest_gap(self) -> float:
        """Seconds from the first failed request of the longest run of failures to the next answered one."""
        longest, since = 0.0, None
        for when, answered in self.asked:
            if not answered and since is None:
                since = when
            elif answered and since is not None:
                longest, since = max(longest, when - since), None
        return longest



def audit_hookless(argo: gitops.GitOpsTier, audited: list[str]) -> None:
    """When ArgoCD's last operation synced one of cutover's commits selectively, running no hook (the self-heal of a
    hop pushed while its sync ran, argo-cd#27875: not seen since the tier runs a fixed self-heal delay, never ruled
    out), the audit CronJob's Job, as its schedule would start it minutes later: it takes the hop no PostSync took."""
    state = argo.app("llm-serving").get("status", {}).get("operationState", {})
    revision = state.get("syncResult", {}).get("revision")
    if state.get("phase") != "Succeeded" or not state.get("operation", {}).get("sync", {}).get("resources") or \
            not revision or revision in audited:
        return
    if not any(entry.sha == revision and entry.message.startswith("cutover(") for entry in argo.git.repo.log(limit=30)):
        return
    audited.append(revision)
    argo.job_from_cronjob("cutover-audit-llm-serving", f"cutover-audit-{revision[:10]}", kept=True)


class Auditing(Background):
    """`audit_hookless` every 0.5 s, for the scenarios without `Hops`."""

    def __init__(self, argo: gitops.GitOpsTier) -> None:
        super().__init__("auditing")
        self.argo, self.audited = argo, list[str]()

    def run(self) -> None:
        while not self.done.wait(0.5):
            with contextlib.suppress(Exception):  # the apiserver busy for a moment: look again
                audit_hookless(self.argo, self.audited)


def hop_logs(argo: gitops.GitOpsTier, since: float) -> str:
    """The logs of every PostSync, audit and nudge pod since `since`: whichever took a hop. The nudge's too: on a
    sync ArgoCD made without hooks it verifies the switch itself (`argocd.synced_without_hooks`), which the audit
    then finds verified (a CI run waited 120 s for a verification the nudge had logged at once)."""
    return "".join({**argo.hook_logs(since, POSTSYNC), **argo.hook_logs(since, "cutover-audit"),
                    **argo.hook_logs(since, "cutover-nudge")}.values())



def serving_of(selector: dict[str, str]) -> str:
    return next(b for b, d in DEPLOYMENT.items() if selector.get("app.kubernetes.io/name") == d)


def pods(argo: gitops.GitOpsTier, backend: str) -> list[str]:
    return [pod.metadata.name for pod in argo.core.list_namespaced_pod(
        "llm-serving", label_selector=f"app.kubernetes.io/name={DEPLOYMENT[backend]}").items]


def events(log: str, name: str) -> list[dict[str, object]]:
    """The structured events called `name` in a pod's log (its JSON lines)."""
    found = []
    for line in log.splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            event = json.loads(line)
            if event.get("event") == name:
                found.append(event)
    return found


def handoff_commits(argo: gitops.GitOpsTier, since: set[str]) -> list[Trailers]:
    """cutover's commits since `since`, newest first, as their trailers."""
    return [Trailers.parse(entry.message) for entry in argo.git.repo.log(limit=30)
            if entry.sha not in since and entry.message.startswith("cutover(")]



def startup_of(argo: gitops.GitOpsTier, backend: str) -> float:
    """Seconds from the backend's pod created to Ready, as the apiserver recorded them (whole seconds): the
    target's own startup, which a recreate's gap holds whatever cutover does."""
    (pod,) = argo.core.list_namespaced_pod(
        "llm-serving", label_selector=f"app.kubernetes.io/name={DEPLOYMENT[backend]}").items
    ready = next(c.last_transition_time for c in pod.status.conditions if c.type == "Ready" and c.status == "True")
    return float((ready - pod.metadata.creation_timestamp).total_seconds())


def recreated(argo: gitops.GitOpsTier, known: set[str], target: str, since: float, client: Client, *,
              timeout: float = 240) -> dict[str, Any]:
    """A recreate's end, after the person's commit: cutover's switch to `target` (its commit since `known`, no
    step), ArgoCD synced and Healthy at it, the verification's gap said, and `client` answered again. The
    `handoff.gap_closed` event."""
    switch = argo.wait("cutover's switch", lambda: next(
        (entry.sha for entry in argo.git.repo.log(limit=30) if entry.sha not in known
         and Trailers.parse(entry.message).to == target and not Trailers.parse(entry.message).step), None),
        timeout=timeout)
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=180)
    closed: dict[str, Any] = argo.wait("the verification's gap", lambda: next(
        iter(events(hop_logs(argo, since), "handoff.gap_closed")), None), timeout=120)
    argo.wait("the client answered again", lambda: client.asked and client.asked[-1][1], timeout=30)
    return closed

