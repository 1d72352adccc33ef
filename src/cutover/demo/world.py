"""The reference scenario (manifests/examples/llm-serving/) as a simulated world: an emulated API server, pods with
engine doubles that start on a startup-probe timeline, an EndpointSlice controller, and the files a user
would have (kubeconfig, plan). Shared by `cutover demo` and the tests.

The engines listen on a free port rather than 8080 (a test machine may have 8080 taken); the Service
keeps its ports 80 and 8080 and targets that port. Time is the event loop's: under a fake-time loop
a 30-minute startup passes in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import itertools
import json
import random
import socket
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import kmock
from aiohttp import test_utils

from cutover.demo.engines import EngineDouble
from cutover.demo.kube import KubeEmulator

NAMESPACE = "llm-serving"
SERVICE = "reasoning-long-predictor"
CLIENT_NAMESPACE = "poimen"
JOB_NAMESPACE = "cutover"
SERVED_NAMES = ("reasoning-long", "reasoning")
BACKENDS: dict[str, dict[str, Any]] = {
    "vllm": {"engine": "vllm",
             "labels": {"app.kubernetes.io/name": "llm-reasoning", "component": "predictor",
                        "serving.kserve.io/inferenceservice": "reasoning"},
             # vLLM's own /health, checked by the kubelet: 120 × 15 s = 30 minutes to start
             "probe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 15, "failureThreshold": 120},
             # drained on SIGTERM (docs/capacity.md): a minute for the answers in flight, within the grace period
             "args": ["--served-model-name", *SERVED_NAMES, "--shutdown-timeout", "60"], "grace": 90},
    "candle": {"engine": "candle-vllm",
               "labels": {"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"},
               # candle-vllm has no /health: a TCP probe, since it binds only once loaded
               "probe": {"tcpSocket": {"port": 8080}, "periodSeconds": 15, "failureThreshold": 120}},
    # the reference cluster's `coder` (2 of its 4 GPUs): a vLLM that also answers `reasoning`, the bridge of
    # handoff.strategy bridge (docs/capacity.md)
    "coder": {"engine": "vllm", "names": ("coder", "reasoning"),
              "labels": {"app.kubernetes.io/name": "coder", "component": "predictor"},
              "probe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 15, "failureThreshold": 120},
              "args": ["--served-model-name", "coder", "reasoning", "--shutdown-timeout", "60"], "grace": 90},
}
BRIDGE_NAMES = ("reasoning",)  # what coder serves of the reference Service's names
PODS = "/v1/pods"
SLICES = "discovery.k8s.io/v1/endpointslices"
# Each world takes its own block of loopback addresses; the start is random so that two test processes on
# one machine (a developer's run beside CI's) rarely meet on the same ClusterIP ports.
_worlds = itertools.count(random.randrange(1, 250))


@dataclasses.dataclass
class Script:
    """How one simulated pod behaves over time (seconds of loop time)."""

    pull: float = 20.0  # creation → container running
    load: float = 600.0  # container running → engine bound (then the next probe tick makes it Ready)
    fault: str | None = None  # crash_loop | image_pull | image_rate_limited | image_backoff_only | unschedulable
    #                           | oom | never_binds | config_error


# containerd's errors, as the kubelet reports them in ErrImagePull (None: only back-offs are ever seen)
PULL_ERRORS: dict[str, str | None] = {
    "image_pull": 'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": failed to resolve '
                  'reference "{image}": {image}: not found',
    "image_rate_limited": 'rpc error: code = Unknown desc = failed to pull and unpack image "{image}": failed to '
                          'copy: httpReadSeeker: failed open: unexpected status code https://example.invalid/v2/: '
                          '429 Too Many Requests - Server message: toomanyrequests: You have reached your pull '
                          'rate limit.',
    "image_backoff_only": None,
}


STEADY_FOR = 86_400.0  # seconds a pod added as already serving has been running


class SimPod:
    def __init__(self, world: World, backend: str, name: str, ip: str, script: Script) -> None:
        self.world, self.backend, self.name, self.ip, self.script = world, backend, name, ip, script
        spec = BACKENDS[backend]
        names = spec.get("names", SERVED_NAMES)
        self.engine = EngineDouble(spec["engine"], ip=ip, port=world.port, served_names=names, model_id=names[0])
        self.restarts = 0
        self.extra_labels: dict[str, str] = {}
        self.gpus = 0  # nvidia.com/gpu it requests (and limits), as a model server does
        self.node: str | None = None  # the node it is bound to; None while the scheduler has not placed it
        self.started_loop_time: float | None = None
        self.ready_at: float | None = None  # loop time the pod last turned Ready
        self.task: asyncio.Task[None] | None = None

    def manifest(self) -> dict[str, Any]:
        spec = BACKENDS[self.backend]
        probe = copy.deepcopy(spec["probe"])
        for handler in ("httpGet", "tcpSocket"):
            if handler in probe:
                probe[handler]["port"] = self.world.port
        return {
            "metadata": {"name": self.name, "namespace": NAMESPACE,
                         "labels": {**spec["labels"], **self.extra_labels}},
            "spec": {"containers": [{"name": "engine", "image": f"example.invalid/{spec['engine']}:1",
                                     "ports": [{"containerPort": self.world.port, "name": "http"}],
                                     "startupProbe": probe,
                                     **({"args": spec["args"]} if "args" in spec else {}),
                                     **({"resources": {"limits": {"nvidia.com/gpu": str(self.gpus)}}}
                                        if self.gpus else {})}],
                     **({"terminationGracePeriodSeconds": spec["grace"]} if "grace" in spec else {}),
                     **({"nodeName": self.node} if self.node else {})},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                       "containerStatuses": [{"name": "engine", "ready": False, "restartCount": 0,
                                              "state": {"waiting": {"reason": "ContainerCreating"}}}]},
        }

    def _status(self, **container: Any) -> None:
        status = {"name": "engine", "restartCount": self.restarts, "ready": False, **container}
        self.world.kube.merge(PODS, NAMESPACE, self.name, {"status": {"containerStatuses": [status]}})
        self.world.sync_endpoints()

    def _running(self, *, ready: bool) -> dict[str, Any]:
        return {"state": {"running": {"startedAt": self.started_at}}, "ready": ready, "started": ready}

    async def live(self) -> None:
        fault, script = self.script.fault, self.script
        if fault == "unschedulable":
            self.world.kube.merge(PODS, NAMESPACE, self.name, {"status": {"conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are "
                            "available: 4 No preemption victims found for incoming pod."}]}})
            return
        await asyncio.sleep(script.pull)
        if fault in PULL_ERRORS and not await self._pull_fails(PULL_ERRORS[fault],
                                                                for_good=fault != "image_rate_limited"):
            return
        if fault == "config_error":
            self._status(state={"waiting": {"reason": "CreateContainerConfigError",
                                            "message": 'secret "hf-token" not found'}})
            return
        await self._start()
        if fault == "crash_loop":
            for _ in range(4):
                await asyncio.sleep(30)
                self.restarts += 1
                self._status(state={"waiting": {"reason": "CrashLoopBackOff",
                                                "message": "back-off 40s restarting failed container"}},
                             lastState={"terminated": {"reason": "Error", "exitCode": 1}})
            return
        if fault == "oom":
            await asyncio.sleep(script.load / 2)
            self.restarts += 1
            self.started_at = self.world.kube.stamp()
            self._status(**self._running(ready=False), lastState={"terminated": {"reason": "OOMKilled",
                                                                                 "exitCode": 137}})
            return
        if fault == "never_binds":
            return
        await asyncio.sleep(script.load)
        await self.engine.bind()
        await asyncio.sleep(self._until_probe_tick())
        self.become_ready()

    async def _pull_fails(self, error: str | None, *, for_good: bool) -> bool:
        """The kubelet's pull loop: ErrImagePull with the runtime's error, then ImagePullBackOff (whose message
        says only that it backs off) for 10, 20, 40... s, up to 300. A rate limit passes after 3 tries; True when
        the image was pulled in the end."""
        image = f"example.invalid/{BACKENDS[self.backend]['engine']}:1"
        for attempt in range(8 if for_good else 3):
            if error is not None:
                self._status(state={"waiting": {"reason": "ErrImagePull", "message": error.format(image=image)}})
                await asyncio.sleep(1)
            self._status(state={"waiting": {"reason": "ImagePullBackOff",
                                            "message": f'Back-off pulling image "{image}"'}})
            await asyncio.sleep(min(300, 10 * 2 ** attempt))
        return not for_good

    async def _start(self, *, ago: float = 0.0) -> None:
        self.started_at = self.world.kube.stamp(ago=ago)
        self.started_loop_time = asyncio.get_running_loop().time()
        self.world.kube.merge(PODS, NAMESPACE, self.name, {"status": {"phase": "Running", "podIP": self.ip,
                                                                      "podIPs": [{"ip": self.ip}]}})
        self._status(**self._running(ready=False))

    def _until_probe_tick(self) -> float:
        period = float(BACKENDS[self.backend]["probe"]["periodSeconds"])
        elapsed = self.world.elapsed_since(self.started_at)
        return (period - elapsed % period) % period

    def become_ready(self) -> None:
        self.ready_at = asyncio.get_running_loop().time()  # tests count what reached the engine before
        self.world.kube.merge(PODS, NAMESPACE, self.name, {"status": {"conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}]}})
        self._status(**self._running(ready=True))


@dataclasses.dataclass
class Asked:
    """What a client of the Service saw (`World.client`)."""

    answered: int = 0
    failed: list[str] = dataclasses.field(default_factory=list)


class World:
    """The reference scenario, running. Use as `async with World() as world:`."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.kube = KubeEmulator()
        self.ssl_context = ssl_context
        self.server: kmock.Server | None = None
        self.number = next(_worlds) % 250 + 1
        self.port = _free_port()
        self.pods: dict[str, SimPod] = {}
        self._becoming_ready: list[asyncio.Task[None]] = []
        self._names = itertools.count(1)
        # A loopback address for the ClusterIP; the kube-proxy stand-in listens on it.
        self.cluster_ip = f"127.96.{self.number}.{random.randrange(1, 255)}"
        self._proxies: list[asyncio.Server] = []
        self.proxied: list[tuple[int, str | None]] = []  # (service port, endpoint chosen or None), per connection
        # An address the ClusterIP still reaches instead of the slice's endpoints: kube-proxy behind the switch, or a
        # proxy in the data path pinned to the old pods
        self.stale_to: str | None = None

    async def __aenter__(self) -> World:
        await self.kube.__aenter__()
        server_cls = _tls_server(self.ssl_context) if self.ssl_context else test_utils.RawTestServer
        self.server = kmock.Server(self.kube, server_cls=server_cls)
        await self.server.__aenter__()
        self._seed()
        for port in (80, 8080):
            self._proxies.append(await asyncio.start_server(functools.partial(self._proxy, port), self.cluster_ip,
                                                            port))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for proxy in self._proxies:
            proxy.close()
        for pod in self.pods.values():
            if pod.task is not None:
                pod.task.cancel()
            await pod.engine.unbind()
        await asyncio.gather(*(p.task for p in self.pods.values() if p.task), return_exceptions=True)
        assert self.server is not None
        await self.server.__aexit__(None, None, None)
        await self.kube.__aexit__(None, None, None)

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.url).rstrip("/")

    def elapsed_since(self, stamp: str) -> float:
        from datetime import datetime  # noqa: PLC0415

        return (self.kube.now() - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()

    def _seed(self) -> None:
        for name in (NAMESPACE, CLIENT_NAMESPACE, JOB_NAMESPACE):
            self.kube.apply("/v1/namespaces", {"metadata": {"name": name,
                                                          "labels": {"kubernetes.io/metadata.name": name}}})
        self.kube.apply("/v1/services", {
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            "spec": {"type": "ClusterIP", "clusterIP": self.cluster_ip, "selector": dict(BACKENDS["vllm"]["labels"]),
                     "ports": [{"name": "http", "port": 80, "targetPort": self.port, "protocol": "TCP"},
                               {"name": "engine", "port": 8080, "targetPort": self.port, "protocol": "TCP"}]}})
        self.kube.apply("networking.k8s.io/v1/networkpolicies", {
            "metadata": {"name": "llm-serving-ingress", "namespace": NAMESPACE},
            "spec": {"podSelector": {"matchLabels": {"component": "predictor"}}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                         "kubernetes.io/metadata.name": CLIENT_NAMESPACE}}}],
                                  "ports": [{"protocol": "TCP", "port": self.port}]}]}})

    def admit_jobs(self) -> None:
        """The ingress rule the reference scenario needs for the cutover Jobs (manifests/examples/llm-serving/)."""
        self.kube.apply("networking.k8s.io/v1/networkpolicies", {
            "metadata": {"name": "llm-serving-ingress-cutover", "namespace": NAMESPACE},
            "spec": {"podSelector": {"matchLabels": {"component": "predictor"}}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                         "kubernetes.io/metadata.name": JOB_NAMESPACE}}}],
                                  "ports": [{"protocol": "TCP", "port": self.port}]}]}})

    def add_node(self, name: str, *, gpus: int) -> None:
        """A node with `gpus` nvidia.com/gpu allocatable, for the capacity judgment (docs/capacity.md)."""
        self.kube.apply("/v1/nodes", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                                      "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110",
                                                                 "nvidia.com/gpu": str(gpus)}}})

    def add_pod(self, backend: str, script: Script | None = None, *, ready: bool = False,
                labels: Mapping[str, str] | None = None, gpus: int = 0, node: str | None = None,
                name: str | None = None) -> SimPod:
        """A pod of `backend` that starts now on its script; `ready=True` makes one already serving. `labels`
        are added to the backend's (the scale run tells many Services' pods apart by one); `gpus` it requests,
        on `node` where it is bound; `name` as a controller would name it (a Deployment's `<name>-<hash>-<x>`
        with the `pod-template-hash` label), else one of the world's own."""
        number = next(self._names)
        name = name or f"{SERVICE}-{backend}-{number:05x}"
        pod = SimPod(self, backend, name, f"127.77.{self.number}.{number}", script or Script())
        pod.extra_labels = dict(labels or {})
        pod.gpus, pod.node = gpus, node
        self.pods[name] = pod
        self.kube.apply(PODS, pod.manifest())
        if ready:
            pod.task = asyncio.create_task(self._ready_now(pod), name=f"sim pod {name}")
            self._becoming_ready.append(pod.task)
        else:
            pod.task = asyncio.create_task(pod.live(), name=f"sim pod {name}")
        return pod

    async def settled(self) -> None:
        """Until every pod added as ready serves, and every script has taken its first, instant step."""
        await asyncio.gather(*self._becoming_ready)
        self._becoming_ready.clear()
        await asyncio.sleep(0)  # a yield, not a wait: lets scripts run up to their first timed step

    async def _ready_now(self, pod: SimPod) -> None:
        # Serving already means started long ago, as a steady pod's startedAt says: its startup budget is spent,
        # so nothing that waits on Ready pods may lean on what is left of it.
        await pod._start(ago=STEADY_FOR)
        await pod.engine.bind()
        pod.become_ready()

    def delete_pod(self, name: str) -> None:
        pod = self.pods.pop(name)
        if pod.task is not None:
            pod.task.cancel()
        self.kube.remove(PODS, NAMESPACE, name)
        asyncio.get_running_loop().create_task(pod.engine.unbind())
        self.sync_endpoints()

    def sync_endpoints(self) -> None:
        """The EndpointSlice controller: the Service's selected pods with their readiness."""
        service = self.kube.stored("/v1/services", NAMESPACE, SERVICE)
        if service is None:
            return
        selector = service["spec"].get("selector") or {}
        endpoints = []
        for obj in self.kube.objects(PODS, NAMESPACE):
            labels = obj["metadata"].get("labels") or {}
            ip = (obj.get("status") or {}).get("podIP")
            if not ip or any(labels.get(k) != v for k, v in selector.items()):
                continue
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in obj["status"].get("conditions") or ())
            endpoints.append({"addresses": [ip], "conditions": {"ready": ready, "serving": ready},
                              "targetRef": {"kind": "Pod", "name": obj["metadata"]["name"], "namespace": NAMESPACE}})
        current = self.kube.stored(SLICES, NAMESPACE, f"{SERVICE}-sim")
        if current is not None and current.get("endpoints") == endpoints:
            return
        self.kube.apply(SLICES, {
            "metadata": {"name": f"{SERVICE}-sim", "namespace": NAMESPACE,
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": "http", "port": self.port, "protocol": "TCP"}]})

    # --- kube-proxy -------------------------------------------------------------------------------

    def ready_endpoints(self) -> list[str]:
        current = self.kube.stored(SLICES, NAMESPACE, f"{SERVICE}-sim") or {}
        return [address for endpoint in current.get("endpoints") or ()
                if (endpoint.get("conditions") or {}).get("ready") for address in endpoint.get("addresses") or ()]

    async def _proxy(self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """What kube-proxy does for the ClusterIP: each new connection to one Ready endpoint, round robin."""
        ready = [self.stale_to] if self.stale_to else self.ready_endpoints()
        chosen = ready[len(self.proxied) % len(ready)] if ready else None
        self.proxied.append((port, chosen))
        if chosen is None:  # no endpoint: kube-proxy rejects the connection
            writer.close()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(chosen, self.port)
        except OSError:
            writer.close()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    @contextlib.asynccontextmanager
    async def client(self, model: str, *, every: float) -> AsyncIterator[Asked]:
        """A client in namespace poimen: a chat request for `model` through the ClusterIP every `every` s, on a new
        connection each time (kube-proxy chooses an endpoint per connection), counting what was answered and what
        failed, while the block runs."""
        asked = Asked()

        async def ask(session: aiohttp.ClientSession) -> None:
            body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            try:
                async with session.post(f"http://{self.cluster_ip}:80/v1/chat/completions", json=body) as answer:
                    if answer.status == 200:
                        asked.answered += 1
                    else:
                        asked.failed.append(f"{answer.status}: {(await answer.text())[:80]}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                asked.failed.append(repr(exc))

        async def keep_asking() -> None:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                             timeout=aiohttp.ClientTimeout(total=10)) as session:
                while True:
                    await ask(session)
                    await asyncio.sleep(every)

        task = asyncio.create_task(keep_asking(), name="client of the Service")
        try:
            yield asked
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the files a user has --------------------------------------------------------------------

    def kubeconfig(self, path: Path, *, token: str = "sim-token",  # noqa: S107 -- the simulated API's token
                   ca_file: str | None = None) -> Path:
        cluster: dict[str, Any] = {"server": self.url}
        if ca_file:
            cluster["certificate-authority"] = ca_file
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": cluster}],
            "users": [{"name": "sim", "user": {"token": token}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": JOB_NAMESPACE}}],
        }))
        return path

    def plan_text(self, *, target: str = "candle", max_wait: str = "30m", proof: str = "auto",
                  min_ready: int = 1, names: tuple[str, ...] = SERVED_NAMES, git_api_url: str | None = None,
                  slack: bool = False, git_path: str = "k8s/apps/llm-serving/reasoning-long-service.yaml",
                  git_more: str = "", git_values: Mapping[str, str] | None = None, fitness: str | None = None,
                  workloads: Mapping[str, str] | None = None, handoff: str | None = None,
                  coder: bool = False) -> str:
        """The reference scenario's plan; `git_more` adds lines under `git:` (e.g. `source: kustomize`),
        `git_values` a gitValue per backend (helm-values), `fitness` the value of `verify.fitness` (a flow
        mapping such as `{maxLatency: 2s}`), `workloads` a backend's `workload` (a flow mapping), `handoff` the
        plan's `handoff` (one), `coder` the third backend (a bridge)."""
        def selector(backend: str) -> str:
            value = f"\n    gitValue: {git_values[backend]}" if git_values else ""
            if workloads and backend in workloads:
                value += f"\n    workload: {workloads[backend]}"
            return "".join(f"\n      {key}: {value}" for key, value in BACKENDS[backend]["labels"].items()) + value

        # the double's own address, named as an API host the token may go to (git.apiHosts)
        api_line = (f"\n  apiUrl: {git_api_url}\n  apiHosts: [{urlsplit(git_api_url).hostname}]\n"
                    f"  allowInsecure: true") if git_api_url else ""
        return f"""apiVersion: cutover/v1alpha1
kind: CutoverPlan
metadata:
  name: reasoning-long
service:
  namespace: {NAMESPACE}
  name: {SERVICE}
  ports: [80, 8080]
backends:
  vllm:
    selector:{selector("vllm")}
    engine: vllm
    port: {self.port}
  candle:
    selector:{selector("candle")}
    engine: candle-vllm
    port: {self.port}{f"{chr(10)}  coder:{chr(10)}    selector:{selector('coder')}{chr(10)}    engine: vllm"
                      f"{chr(10)}    port: {self.port}" if coder else ""}
target: {target}
verify:
  servedNames: [{", ".join(names)}]
  proof: {proof}
  minReadyPods: {min_ready}
  maxWait: {max_wait}
  requestTimeout: 10s{f"{chr(10)}  fitness: {fitness}" if fitness is not None else ""}
git:
  provider: github
  url: https://github.com/acme/gitops.git{api_line}
  branch: main
  path: {git_path}
  document: {{kind: Service, name: {SERVICE}}}{"".join(f"{chr(10)}  {line}" for line in git_more.splitlines())}
argocd:
  application: llm-serving
rollback:
  auto: true
""" + ("notify:\n  slack:\n    minLevel: info\n" if slack else "") + (f"handoff: {handoff}\n" if handoff else "")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def _tls_server(context: ssl.SSLContext) -> type[test_utils.RawTestServer]:
    class TLSServer(test_utils.RawTestServer):
        async def start_server(self, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> None:
            await super().start_server(loop=loop, ssl=context, **kwargs)

    return TLSServer
