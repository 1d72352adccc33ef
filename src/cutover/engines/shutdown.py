"""Drain safety (docs/capacity.md, "Before you free an engine"): what will happen to the streams in flight on the
backend a switch leaves, once its pods are deleted. Warnings only, never a refusal: the switch itself cuts nothing
(kube-proxy keeps established connections, kubernetes/kubernetes#104098); the deletion that follows it does. Pure:
read from the pods' spec. Called by `cutover plan` (`flows.commands`).

- vLLM 0.18 and later aborts in-flight requests on SIGTERM unless `--shutdown-timeout` is set (its default is 0:
  vllm-project/vllm#34730), and its own docs ask for terminationGracePeriodSeconds ≥ the preStop sleep plus that
  timeout, or the kubelet's SIGKILL cuts what the timeout was meant to let finish.
- candle-vllm has no graceful shutdown and no `/metrics`: freeing it cuts whatever runs, and nothing tells when it
  is idle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cutover.core.views import ContainerView, PodView

_TIMEOUT = re.compile(r"--shutdown-timeout(?:=|\s+)(\d+(?:\.\d+)?)")


def shutdown_timeout(container: ContainerView) -> float | None:
    """vLLM's `--shutdown-timeout` in seconds, from its arguments (or a shell line that runs it); None if unset."""
    found = _TIMEOUT.search(" ".join(container.argv))
    return float(found.group(1)) if found else None


def warnings(backend: str, engine: str, pods: Iterable[PodView]) -> list[str]:
    """What deleting `backend`'s pods would cut, one line each, named after the first pod that shows it."""
    pod = next(iter(sorted(pods, key=lambda p: p.name)), None)
    if pod is None or not pod.containers:
        return []
    if engine == "candle-vllm":
        return [f"{backend}: candle-vllm has no graceful shutdown and no /metrics: deleting its pods cuts the "
                "requests in flight, and nothing says when it is idle"]
    if engine != "vllm":
        return []
    container = pod.containers[0]
    timeout = shutdown_timeout(container)
    if timeout is None or timeout == 0:
        return [f"{backend}: {pod.name} runs vLLM without --shutdown-timeout: from vLLM 0.18 on, SIGTERM aborts the "
                "requests in flight (set --shutdown-timeout to the longest answer you serve)"]
    needed = timeout + (container.pre_stop_sleep or 0.0)
    if pod.grace_period < needed:
        return [f"{backend}: {pod.name}'s terminationGracePeriodSeconds ({pod.grace_period:g}s) is below its preStop "
                f"sleep plus --shutdown-timeout ({needed:g}s): the kubelet's SIGKILL cuts what the timeout would "
                "let finish"]
    return []
