"""The engines at the pod IPs kwok assigns: the engine process of each engine pod, bound once its model has
loaded (both engines bind only once loaded, as src/cutover/demo/engines.py says), gone with the pod. A vLLM pod
serving the real vLLM's names is a forwarder to it (tier/realvllm.py); any other is an engine double.

Which engine, port and served names come from the pod's own container: vLLM's `--served-model-name a b`
(its image or container name says vllm), candle-vllm's `--m id` (in its args or its `sh -c` command).
"""

from __future__ import annotations

import asyncio
import shlex
import threading
import time
from collections.abc import Mapping
from typing import Any

import kubernetes

from cutover.demo.engines import CANNED, EngineDouble
from tier.realvllm import Forwarder, RealVllm


def engine_of(container: Mapping[str, Any]) -> tuple[str, int, tuple[str, ...]] | None:
    """(engine, port, served names) of a container, or None when it is not an engine's."""
    words = _words(container)
    port = next((p["containerPort"] for p in container.get("ports", [])), 8000)
    image = container.get("image", "")
    if "candle" in image or "candle" in container.get("name", ""):
        names = tuple(words[words.index("--m") + 1:words.index("--m") + 2]) if "--m" in words else ("default",)
        return "candle-vllm", port, names
    if "vllm" in image:
        if "--served-model-name" in words:
            start = words.index("--served-model-name") + 1
            names = tuple(_until_flag(words[start:]))
        else:
            names = (words[words.index("--model") + 1],) if "--model" in words else ("default",)
        return "vllm", port, names
    return None


def grace_of(container: Mapping[str, Any]) -> float:
    """Seconds a vLLM container's requests in flight have after SIGTERM: its `--shutdown-timeout` (vLLM aborts them
    at once without it since 0.18, vllm-project/vllm#34730); 1 s without it, as the engine doubles give."""
    words = _words(container)
    if "--shutdown-timeout" in words[:-1]:
        return float(words[words.index("--shutdown-timeout") + 1])
    return 1.0


def _words(container: Mapping[str, Any]) -> list[str]:
    words = [*container.get("command", []), *container.get("args", [])]
    return [w for text in words for w in (shlex.split(text) if " " in text else [text])]


def _until_flag(words: list[str]) -> list[str]:
    out = []
    for w in words:
        if w.startswith("--"):
            break
        out.append(w)
    return out


class EnginePods:
    """Keeps one bound engine per running engine pod, in a loop of its own."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, real: RealVllm | None = None) -> None:
        self.api, self.core = api, kubernetes.client.CoreV1Api(api)
        self.namespace = namespace
        self.real = real
        self.doubles: dict[str, EngineDouble | Forwarder] = {}  # pod name → its engine
        self.loop = asyncio.new_event_loop()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self.loop.run_forever, name="engines", daemon=True),
                         threading.Thread(target=self._watch, name="engine pods", daemon=True)]
        self.errors: list[str] = []

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for double in list(self.doubles.values()):
            asyncio.run_coroutine_threadsafe(double.unbind(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                watch = kubernetes.watch.Watch()
                for event in watch.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=30):
                    self._sync(event["type"], event["object"])
                    if self._stop.is_set():
                        return
            except Exception as exc:
                if not self._stop.is_set():
                    self.errors.append(repr(exc))
                    self._stop.wait(0.5)  # the apiserver restarting (a scenario does): list again, not in a spin

    def _sync(self, kind: str, pod: Any) -> None:
        """A double per engine container that runs: bound once its model has loaded (`e2e.cutover.dev/loads-in`
        after the container started, the moment before its next startup probe succeeds), gone with the pod or
        the container."""
        if self._stop.is_set():  # the engines' loop stops: an unbind sent now would never run (never awaited)
            return
        name, ip = pod.metadata.name, pod.status.pod_ip
        statuses = pod.status.container_statuses or []
        running = statuses[0].state.running if statuses and statuses[0].state else None
        wanted = kind != "DELETED" and running is not None and ip and pod.metadata.deletion_timestamp is None
        have = self.doubles.get(name)
        if wanted and have is None:
            container = self.api.sanitize_for_serialization(pod.spec.containers[0])
            found = engine_of(container)
            if found is None:
                return
            engine, port, names = found
            double: EngineDouble | Forwarder = (
                Forwarder(self.real, ip=ip, port=port, grace=grace_of(container))
                if self.real and (engine, names) == ("vllm", self.real.names)
                else EngineDouble(engine, ip=ip, port=port, served_names=names))
            self.doubles[name] = double
            load = float((pod.metadata.annotations or {}).get("e2e.cutover.dev/loads-in", "0"))
            loaded_in = max(0.0, running.started_at.timestamp() + load - time.time())
            self.loop.call_soon_threadsafe(self.loop.call_later, loaded_in, self._bind, double)
        elif not wanted and have is not None:
            del self.doubles[name]
            grace = have.grace if isinstance(have, Forwarder) else 0.0
            asyncio.run_coroutine_threadsafe(have.unbind(), self.loop).result(grace + 5)

    def fault(self, deployment: str, fault: str | None) -> None:
        """An engine that misbehaves (the engine doubles' faults: "no-token" answers without generating) on every
        pod of `deployment`; None: behaves again."""
        for double in self._of(deployment):
            assert isinstance(double, EngineDouble) or fault in (None, *CANNED), \
                f"the real vLLM behind {deployment} refuses only as {sorted(CANNED)} do, not {fault}"
            double.fault = fault

    def pace(self, deployment: str, token_interval: float) -> None:
        """Every pod of `deployment` streams a chunk each `token_interval` seconds: a long generation in flight
        (a real vLLM's is as long as its tokens: `real_generation`)."""
        for double in self._of(deployment):
            assert isinstance(double, EngineDouble), f"{deployment} is served by the real vLLM: ask a long generation"
            double.token_interval = token_interval

    def forwarded(self, deployment: str) -> list[tuple[str, str]]:
        """(method, path) of every request the pods of `deployment` running now handed to the real vLLM."""
        return [request for engine in self._of(deployment) if isinstance(engine, Forwarder)
                for request in engine.requests]

    def real_generation(self, deployment: str) -> bool:
        """Whether `deployment`'s pods are served by the real vLLM."""
        return all(isinstance(engine, Forwarder) for engine in self._of(deployment))

    def _of(self, deployment: str) -> list[EngineDouble | Forwarder]:
        pods = [double for pod, double in self.doubles.items() if pod.startswith(f"{deployment}-") and
                pod.count("-") == deployment.count("-") + 2]  # <deployment>-<replicaset hash>-<suffix>
        assert pods, f"no engine double of {deployment}"
        return pods

    def _bind(self, double: EngineDouble) -> None:
        if double in self.doubles.values():
            self.loop.create_task(double.bind())
