"""Kubernetes reads, pod watches, the three writes docs/guarantees.md #3 allows, and API payloads turned into `views`.

The only module that imports `kubernetes`. The official client is synchronous: one-shot reads run
with `asyncio.to_thread`. Watch streams are read on the event loop with the official client's
configuration (see PodWatch); every wait, backoff and reconnect follows the loop's clock.
Payloads are read as raw JSON (`_preload_content=False`) and turned into small frozen views; SDK
models never leave this module. Called by `wait` and the commands.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import json
import os
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes.client
import structlog
import tenacity
import urllib3
from kubernetes.client.exceptions import ApiException

from cutover import logs, patience
from cutover.core.views import ApplicationView, EndpointView, LeaseView, NodeView, PodView, PolicyView, ServiceView
from cutover.errors import ClusterConflict, ClusterError, ClusterUnavailable, InvalidInput
from cutover.kube.payloads import (
    application_view,
    endpoint_views,
    lease_view,
    node_view,
    pod_view,
    policy_view,
    service_view,
)

log = structlog.get_logger("cutover.cluster")

SERVICEACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
FORBIDDEN_AFTER_OUTAGE = 60.0  # seconds after an outage during which a 403 is taken for caches still syncing
WATCH_SECONDS = 290  # server-side watch timeout; a fresh watch resumes from the last resourceVersion
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
SIDE_EFFECT_TIMEOUT = 4.0  # seconds per connect and read of an Event: within the 5 s exit bound (docs/guarantees.md #7)

# The retry policy for the Kubernetes API, in one place: 5xx, 429 and dropped connections are retried
# six times with jittered exponential backoff (0.5, 1, 2, 4, 8 s: about 16 s in all); everything else is
# permanent at once. Attempts, not a deadline: tenacity measures deadlines on the wall clock, which
# the event loop's clock (and fake time in tests) cannot move.
class _DaemonThreads(concurrent.futures.Executor):
    """Each call in a daemon thread of its own that nobody joins: `asyncio.run` joins the default executor's
    threads as it ends (and ThreadPoolExecutor's are joined at interpreter exit), so an Event stuck there held
    the exit. An executor still, so that `run_in_executor` (and fake time in the tests) knows the work is on."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)

        threading.Thread(target=run, name="cutover-request", daemon=True).start()
        return future


_REQUESTS = _DaemonThreads()


def retrying(*, forever: bool = False) -> tenacity.AsyncRetrying:
    # a watch outlives outages (its waiter keeps the deadline); a request gives up sooner for a person waiting
    stop = tenacity.stop_never if forever else patience.bounded(tenacity.stop_after_attempt(6))
    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(_Outage().retryable),
        wait=tenacity.wait_exponential_jitter(multiplier=0.5, max=10.0),
        stop=stop,
        before_sleep=_log_retry,
        reraise=True,
    )


class _Outage:
    """What is worth another try: an outage (5xx, 429, no answer), and a refusal right after one. An apiserver
    that has just restarted answers before its RBAC caches are synced and refuses what its Roles allow until
    they are (kubernetes/kubernetes#121635, #101422); the real tier's apiserver restart met exactly that."""

    def __init__(self) -> None:
        self.last: float | None = None  # loop time of the last outage this retry sequence met

    def retryable(self, exc: BaseException) -> bool:
        now = asyncio.get_running_loop().time()
        if isinstance(exc, ClusterUnavailable):
            self.last = now
            return True
        return (isinstance(exc, ClusterError) and exc.cause == "cluster_forbidden" and self.last is not None
                and now - self.last <= FORBIDDEN_AFTER_OUTAGE)


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning("cluster.retry", attempt=state.attempt_number, error=str(exc),
                next_in=round(state.upcoming_sleep, 2), then="retry")


def translate(exc: Exception, *, what: str, server: str = "") -> ClusterError:
    """The most specific own error for a failure of the Kubernetes client; `server` names the API it spoke to."""
    if isinstance(exc, ApiException):
        status = exc.status or 0
        if status >= 500 or status == 429:
            return ClusterUnavailable(f"Kubernetes API answered {status} to {what}",
                                      hint="the API server is overloaded or restarting; retried")
        if status in (401, 403):
            return ClusterError(f"Kubernetes API refused {what} ({status})", cause="cluster_forbidden",
                                hint="check the cutover ServiceAccount's Role and RoleBinding")
        if status == 404:
            return ClusterError(f"{what}: not found", cause="cluster_not_found",
                                hint="check the namespace and name in the plan")
        if status == 409:
            return ClusterConflict(f"{what}: the object changed meanwhile (409)", hint="read again and retry")
        return ClusterError(f"Kubernetes API answered {status} to {what}: {exc.reason}")
    at = f" at {server}" if server else ""
    return ClusterUnavailable(f"Kubernetes API{at} unreachable during {what}: {type(exc).__name__}",
                              hint="check the API server address (--kubeconfig, --context) and the Job's "
                                   "NetworkPolicy egress")


class Cluster:
    """One Kubernetes API through the official client: reads and watches, and the only writes cutover makes
    (docs/guarantees.md #3: the Lease, Events on the Service, the refresh annotation and the notice on the
    Application)."""

    def __init__(self, api: kubernetes.client.ApiClient, *, own_namespace: str) -> None:
        # The generic request path of the official client (auth, TLS, proxies, token refresh) rather than
        # CoreV1Api & co.: importing those builds ~300 pydantic models, 0.7 s and 30 MB for reads we
        # take as raw JSON anyway.
        self.api = api
        self.own_namespace = own_namespace
        self._streams: httpx.AsyncClient | None = None

    def close(self) -> None:
        self.api.close()

    async def aclose(self) -> None:
        if self._streams is not None:
            await self._streams.aclose()
        self.close()

    def streams(self) -> httpx.AsyncClient:
        """An HTTP client for watch streams, with the official client's host and TLS settings."""
        if self._streams is None:
            config = self.api.configuration
            verify: ssl.SSLContext | bool = False
            if config.verify_ssl:
                verify = ssl.create_default_context(cafile=config.ssl_ca_cert)
                if config.cert_file:
                    verify.load_cert_chain(config.cert_file, config.key_file)
            self._streams = httpx.AsyncClient(
                base_url=config.host, verify=verify, trust_env=False,
                timeout=httpx.Timeout(CONNECT_TIMEOUT, read=WATCH_SECONDS + 30))
        return self._streams

    def auth_headers(self) -> dict[str, str]:
        """Credentials as the official client would send them (refreshing a rotated token)."""
        settings = self.api.configuration.auth_settings().get("BearerToken")
        return {"Authorization": settings["value"]} if settings and settings.get("value") else {}

    async def get(self, path: str, *, query: Mapping[str, str] | None = None, what: str) -> Any:
        """GET one API path off the loop, retried per `retrying`, and return its JSON body."""
        return await self.request("GET", path, query=query, what=what)

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                      body: Mapping[str, Any] | None = None, content_type: str = "application/json",
                      what: str, side_effect: float | None = None) -> Any:
        """One API request off the loop, retried per `retrying`; its JSON body. A `side_effect` (an Event: best
        effort, docs/guarantees.md #7) runs in a daemon thread with that many seconds per connect and read: the default
        executor's threads are joined when `asyncio.run` ends, so one stuck there would hold the exit."""
        waiting = patience.limit.get()  # a person waiting reads no answer for longer than they wait in all
        read = READ_TIMEOUT if waiting is None else min(READ_TIMEOUT, waiting)
        call = functools.partial(self._call, method, path, query=dict(query or {}), body=body,
                                 content_type=content_type, what=what,
                                 timeout=(side_effect, side_effect) if side_effect else (CONNECT_TIMEOUT, read))
        if side_effect:  # one try: a second after a timeout would hold the exit past the side effect's budget
            return await asyncio.get_running_loop().run_in_executor(_REQUESTS, call)
        async for attempt in retrying():
            with attempt:
                # never the default executor: a request abandoned at a deadline (an API that accepts and never
                # answers) would hold the exit until its read timeout
                return await asyncio.get_running_loop().run_in_executor(_REQUESTS, call)
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, method: str, path: str, *, query: dict[str, str], body: Mapping[str, Any] | None,
              content_type: str, what: str, timeout: tuple[float, float]) -> Any:
        try:
            headers = {"Accept": "application/json", **({"Content-Type": content_type} if body is not None else {})}
            request = self.api.param_serialize(method, path, query_params=list(query.items()),
                                               header_params=headers, body=body, auth_settings=["BearerToken"])
            response = self.api.call_api(*request, _request_timeout=timeout)
            payload = response.read()
            if not 200 <= response.status < 300:
                raise ApiException(http_resp=response)
            return json.loads(payload)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise translate(exc, what=what, server=self.api.configuration.host) from exc
        except ValueError as exc:
            raise ClusterUnavailable(f"Kubernetes API sent a body that is not JSON for {what}",
                                     hint="a proxy in front of the API server may be interfering") from exc

    async def pods(self, namespace: str, selector: Mapping[str, str]) -> tuple[list[PodView], str]:
        body = await self.get(f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": selector_text(selector)},
                              what=f"list pods in {namespace}")
        return [pod_view(item) for item in body.get("items", [])], body["metadata"].get("resourceVersion", "")

    async def may(self, verb: str, resource: str) -> bool:
        """Whether this identity may `verb` a core `resource` cluster-wide: a SelfSubjectAccessReview (which every
        authenticated identity may create), asked before an optional read so that a read the operator did not
        grant is never a refusal in the audit log. An answer that cannot be had counts as no."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": verb, "group": "", "resource": resource}}}
        try:
            answer = await self.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                        body=review, what=f"ask whether cutover may {verb} {resource}")
        except ClusterError as exc:
            log.info("cluster.access_unknown", verb=verb, resource=resource, error=exc.message)
            return False
        return bool((answer.get("status") or {}).get("allowed"))

    async def nodes(self) -> list[NodeView] | None:
        """Every node, or None where the optional ClusterRole cutover-capacity is not granted (docs/capacity.md)."""
        if not await self.may("list", "nodes"):
            return None
        body = await self.get("/api/v1/nodes", what="list nodes")
        return [node_view(item) for item in body.get("items", [])]

    async def kube_proxy_runs(self) -> bool | None:
        """Whether a kube-proxy pod runs (kube-system, `k8s-app=kube-proxy`, as kubeadm and most installers label
        it); None where cutover-capacity is not granted (docs/capacity.md)."""
        if not await self.may("list", "pods"):
            return None
        body = await self.get("/api/v1/namespaces/kube-system/pods", query={"labelSelector": "k8s-app=kube-proxy"},
                              what="list the kube-proxy pods")
        return bool(body.get("items"))

    async def bound_pods(self, namespace: str) -> tuple[list[PodView], bool]:
        """The non-terminal pods bound to a node, cluster-wide where cutover-capacity is granted (True), else only
        `namespace`'s (False): what the capacity judgment counts as held."""
        query = {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
        if await self.may("list", "pods"):
            body, everywhere = await self.get("/api/v1/pods", query=query, what="list pods of every namespace"), True
        else:
            body, everywhere = await self.get(f"/api/v1/namespaces/{namespace}/pods", query=query,
                                              what=f"list pods in {namespace}"), False
        pods = [pod_view(item) for item in body.get("items", [])]
        return [pod for pod in pods if pod.node_name], everywhere

    async def pod(self, namespace: str, name: str) -> PodView | None:
        """One pod by name, or None when there is none (a Lease holder's pod, say)."""
        try:
            body = await self.get(f"/api/v1/namespaces/{namespace}/pods/{name}", what=f"read pod {namespace}/{name}")
        except ClusterError as exc:
            if exc.cause == "cluster_not_found":
                return None
            raise
        return pod_view(body)

    async def service(self, namespace: str, name: str) -> ServiceView:
        """The plan's Service; its absence is a plan that names the wrong thing (exit 2), not an outage."""
        try:
            body = await self.get(f"/api/v1/namespaces/{namespace}/services/{name}",
                                  what=f"read Service {namespace}/{name}")
        except ClusterError as exc:
            if exc.cause != "cluster_not_found":
                raise
            raise InvalidInput(f"service: expected an existing Service {namespace}/{name}, found none",
                               cause="service_not_found",
                               hint="check service.namespace and service.name in the plan (cutover never creates "
                                    "the Service: ArgoCD does)") from exc
        return service_view(body)

    async def endpoints(self, namespace: str, service: str) -> list[EndpointView]:
        body = await self.get(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                              query={"labelSelector": f"kubernetes.io/service-name={service}"},
                              what=f"list EndpointSlices of {namespace}/{service}")
        return [endpoint for item in body.get("items", []) for endpoint in endpoint_views(item)]

    async def lease(self, namespace: str, name: str) -> LeaseView | None:
        try:
            body = await self.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
                                  what=f"read Lease {namespace}/{name}")
        except ClusterError as exc:
            if exc.cause == "cluster_not_found":
                return None
            raise
        return lease_view(body)

    async def write_lease(self, namespace: str, name: str, *, spec: Mapping[str, Any],
                          annotations: Mapping[str, str], previous: LeaseView | None) -> LeaseView:
        """Create the Lease, or replace it only if it is still at `previous` (ClusterConflict otherwise)."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": dict(annotations)}
        collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": dict(spec)}
        if previous is None:
            body = await self.request("POST", collection, body=lease, what=f"create Lease {namespace}/{name}")
        else:
            metadata["resourceVersion"] = previous.resource_version
            body = await self.request("PUT", f"{collection}/{name}", body=lease,
                                      what=f"update Lease {namespace}/{name}")
        return lease_view(body)

    async def application(self, namespace: str, name: str) -> ApplicationView:
        body = await self.get(f"/apis/argoproj.io/v1alpha1/namespaces/{namespace}/applications/{name}",
                              what=f"read Application {namespace}/{name}")
        return application_view(body)

    async def argocd_object(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """An ApplicationSet or an Application as the API holds it (`cutover status --fleet`); None when absent."""
        return await self._found(f"/apis/argoproj.io/v1alpha1/namespaces/{namespace}/{plural}/{name}",
                                 what=f"read {plural} {namespace}/{name}")

    async def request_refresh(self, namespace: str, name: str, *, hydrate: bool = False) -> None:
        """Ask ArgoCD to compare with Git now (the annotation it removes once it has refreshed); with the Source
        Hydrator, to hydrate the dry source now too (argocd.argoproj.io/hydrate; docs/sources.md)."""
        notes = {"argocd.argoproj.io/refresh": "normal"}
        if hydrate:
            notes["argocd.argoproj.io/hydrate"] = "normal"
        await self.request("PATCH", f"/apis/argoproj.io/v1alpha1/namespaces/{namespace}/applications/{name}",
                           body={"metadata": {"annotations": notes}},
                           content_type="application/merge-patch+json",
                           what=f"request a refresh of Application {namespace}/{name}")

    async def cronjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A CronJob of cutover's own namespace, as the API holds it (the nudge's Job is made from it); None when there
        is none by that name."""
        return await self._found(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}",
                                 what=f"read CronJob {namespace}/{name}")

    async def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Job of cutover's own namespace (a hook's own, for the tracking ArgoCD wrote on it); None when there is
        none by that name."""
        return await self._found(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
                                 what=f"read Job {namespace}/{name}")

    async def _found(self, path: str, *, what: str) -> dict[str, Any] | None:
        """An object as the API holds it; None when there is none at `path`."""
        try:
            body: dict[str, Any] = await self.get(path, what=what)
        except ClusterError as exc:
            if exc.cause == "cluster_not_found":
                return None
            raise
        return body

    async def create_job(self, job: Mapping[str, Any]) -> bool:
        """Create a Job of cutover's own (the nudge, docs/guarantees.md #3); False when one of that name exists
        (made already for this commit)."""
        namespace = job["metadata"]["namespace"]
        try:
            await self.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=job,
                               what=f"create Job {namespace}/{job['metadata']['name']}")
        except ClusterConflict:
            return False
        return True

    async def write_notice(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        """The Application's notice (core.notice: ArgoCD 3.5 shows it on the Application's page), best effort: a few
        seconds per try, like an Event (cutover-application-refresh-only admits exactly these annotations)."""
        await self.request("PATCH", f"/apis/argoproj.io/v1alpha1/namespaces/{namespace}/applications/{name}",
                           body={"metadata": {"annotations": dict(annotations)}},
                           content_type="application/merge-patch+json",
                           what=f"write the notice of Application {namespace}/{name}", side_effect=5.0)

    async def record_event(self, service: ServiceView, *, reason: str, message: str, warning: bool = False,
                           at: datetime) -> None:
        """A core/v1 Event on the Service, so that `kubectl describe service` tells the story."""
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{service.name}.cutover-", "namespace": service.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Service", "name": service.name,
                               "namespace": service.namespace, "uid": service.uid},
            "reason": reason, "message": logs.redact(message)[:1024], "type": "Warning" if warning else "Normal",
            "source": {"component": "cutover"}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "reportingComponent": "cutover", "reportingInstance": self.own_namespace,
        }
        await self.request("POST", f"/api/v1/namespaces/{service.namespace}/events", body=event,
                           what=f"record an Event on Service {service.namespace}/{service.name}",
                           side_effect=SIDE_EFFECT_TIMEOUT)

    async def network_policies(self, namespace: str) -> list[PolicyView]:
        body = await self.get(f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies",
                              what=f"list NetworkPolicies in {namespace}")
        return [policy_view(item) for item in body.get("items", [])]

    @asynccontextmanager
    async def watch_pods(self, namespace: str, selector: Mapping[str, str]) -> AsyncIterator[PodWatch]:
        watch = PodWatch(self, namespace, selector)
        task = asyncio.create_task(watch.run(), name=f"watch pods {namespace}/{selector_text(selector)}")
        try:
            yield watch
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    incluster_dir: Path = SERVICEACCOUNT_DIR,
    environ: Mapping[str, str] = os.environ,
) -> Cluster:
    """In a pod, the in-cluster ServiceAccount; elsewhere the kubeconfig (KUBECONFIG, ~/.kube/config)."""
    if kubeconfig is not None and not Path(kubeconfig).is_file():  # the flag's: name it, and the path
        raise InvalidInput(f"--kubeconfig: expected a kubeconfig file, found nothing at {kubeconfig}",
                           cause="invalid_arguments", hint="point --kubeconfig at a file, or leave it out to use "
                                                           "$KUBECONFIG or ~/.kube/config")
    config = kubernetes.client.Configuration()
    try:
        if environ.get("KUBERNETES_SERVICE_HOST") and kubeconfig is None:
            _in_cluster(config, incluster_dir, environ)
            own = (incluster_dir / "namespace").read_text().strip()
        else:
            own = _from_kubeconfig(config, kubeconfig, context, environ)
    except (ValueError, OSError) as exc:
        raise ClusterError(f"no Kubernetes configuration: {exc}", cause="cluster_config",
                           hint="run in a pod with a ServiceAccount, or set KUBECONFIG") from exc
    config.retries = False  # tenacity owns retries (`retrying` above)
    return Cluster(kubernetes.client.ApiClient(config), own_namespace=own)


def _in_cluster(config: kubernetes.client.Configuration, directory: Path, environ: Mapping[str, str]) -> None:
    """The pod's own ServiceAccount, as the official in-cluster loader sets it, without importing the kubeconfig
    loader a pod never uses (it, and the requests, OAuth and YAML stacks it pulls in, took 0.2 to 0.4 s of each
    hook's start). The token is read afresh for every request: the kubelet rotates a bound token in place."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ValueError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set in a pod")
    token, ca = directory / "token", directory / "ca.crt"
    if not ca.is_file():
        raise OSError(f"no ServiceAccount CA at {ca}")

    def refresh(configuration: kubernetes.client.Configuration) -> None:
        value = token.read_text().strip()
        if not value:
            raise OSError(f"the ServiceAccount token at {token} is empty")
        configuration.api_key["authorization"] = value

    config.host = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    config.ssl_ca_cert = str(ca)
    config.api_key_prefix["authorization"] = "Bearer"
    refresh(config)
    config.refresh_api_key_hook = refresh  # type: ignore[assignment]  # typed as None in the client


def _from_kubeconfig(config: kubernetes.client.Configuration, kubeconfig: str | None, context: str | None,
                     environ: Mapping[str, str]) -> str:
    """A person's kubeconfig (KUBECONFIG, ~/.kube/config, --kubeconfig): its namespace, the client configured."""
    import kubernetes.config  # noqa: PLC0415 -- a pod never reads a kubeconfig: not paid for at a hook's start

    # KUBECONFIG read now, not when the kubernetes package was imported (its default is fixed then)
    kubeconfig = kubeconfig or environ.get("KUBECONFIG") or None
    namespace = _kubeconfig_namespace(kubeconfig, context, environ)  # and the file checked, once
    try:
        kubernetes.config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=config)
    except kubernetes.config.ConfigException as exc:
        raise ValueError(str(exc)) from exc
    return environ.get("POD_NAMESPACE") or namespace


def _kubeconfig_namespace(kubeconfig: str | None, context: str | None, environ: Mapping[str, str]) -> str:
    """The namespace of the context in use, read with the file's contexts in one pass. A kubeconfig that is there
    but is not one (broken YAML, a list where a mapping goes), or a --context it does not hold: a named input error
    (exit 2), not an internal error or a hint to set KUBECONFIG."""
    path = kubeconfig or str(Path(environ.get("HOME") or Path.home()) / ".kube" / "config")
    if not any(Path(part).is_file() for part in path.split(os.pathsep)):
        return "default"  # nothing there: the loader says so (cluster_config)
    import kubernetes.config  # noqa: PLC0415 -- as in _from_kubeconfig

    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=path)
    except kubernetes.config.ConfigException as exc:
        if "Invalid kube-config file. Expected key contexts" in str(exc) and context is None:
            return "default"  # no contexts at all: the loader's own message names what is missing
        raise InvalidInput(f"kubeconfig {path}: expected a kubeconfig with contexts, found: {exc}",
                           cause="invalid_input", hint="point KUBECONFIG or --kubeconfig at a working "
                                                       "kubeconfig (kubectl config view checks one)") from exc
    except Exception as exc:  # the loader raises whatever its YAML parser or a wrong type does
        raise InvalidInput(f"kubeconfig {path}: expected a kubeconfig (YAML with clusters, users and contexts), "
                           f"found what cannot be read as one: {type(exc).__name__}: {exc}", cause="invalid_input",
                           hint="fix the file, or point KUBECONFIG or --kubeconfig at another") from exc
    names = [str(entry.get("name")) for entry in contexts or []]
    if context is not None and context not in names:
        raise InvalidInput(f"--context: expected one of {', '.join(names) or '(none)'} (the contexts of {path}), "
                           f"found {context!r}", cause="invalid_arguments",
                           hint="name a context of that file (kubectl config get-contexts lists them)")
    chosen = next((entry for entry in contexts or [] if entry.get("name") == context), active) if context else active
    return str((chosen or {}).get("context", {}).get("namespace") or "default")


def selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items()))


@dataclasses.dataclass
class _Event:
    kind: str  # RESET | ADDED | MODIFIED | DELETED | BOOKMARK
    pods: list[PodView] = dataclasses.field(default_factory=list)
    resource_version: str | None = None


class PodWatch:
    """The live set of pods matching a selector, kept current by list + watch.

    Survives dropped streams (resume from the last resourceVersion), expired versions (410 Gone:
    re-list) and API errors (backoff per `retrying`). `changed()` wakes on any change.

    The stream is read on the event loop (httpx, with the official client's host, TLS and
    credentials), not in a thread: a thread delivers events at a moment the loop cannot see, so
    under fake time the clock ran minutes past a pod's start before the wait heard of it.
    """

    def __init__(self, cluster: Cluster, namespace: str, selector: Mapping[str, str]) -> None:
        self.cluster, self.namespace, self.selector = cluster, namespace, dict(selector)
        self.pods: dict[str, PodView] = {}
        self.synced = asyncio.Event()  # set once the first list has arrived
        self.ever_seen = False
        self._changed = asyncio.Event()
        self.error: Exception | None = None  # a permanent failure: every waiter gets it

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    async def changed(self, at_most: float | None) -> bool:
        """Wait until the pod set changes or `at_most` seconds pass (loop clock); True on a change.

        `asyncio.timeout`, not `wait_for`: before Python 3.12, `wait_for` swallows a cancel that lands as the
        change does (python/cpython#86296), so a SIGTERM met a pod update and the Job waited on, Lease held."""
        try:
            async with asyncio.timeout(at_most):
                await self._changed.wait()
        except TimeoutError:
            return False
        self._changed.clear()
        self.raise_if_failed()
        return True

    async def relist(self) -> None:
        """Replace the view with a fresh list: used before a decision that cannot be taken back."""
        pods, _ = await self.cluster.pods(self.namespace, self.selector)
        self._apply(_Event("RESET", pods))

    async def run(self) -> None:
        try:
            await self._run()
        except Exception as exc:
            self.error = exc
            self.synced.set()
            self._changed.set()

    async def _run(self) -> None:
        version: str | None = None
        async for attempt in retrying(forever=True):  # a watch outlives outages; its waiter has the deadline
            with attempt:
                while True:
                    if version is None:
                        pods, version = await self.cluster.pods(self.namespace, self.selector)
                        self._apply(_Event("RESET", pods))
                    version = await self._stream(version)

    async def _stream(self, version: str) -> str | None:
        """One watch request, until the server ends it; the version to resume from (None: re-list)."""
        what = f"watch pods in {self.namespace}"
        params = {"watch": "true", "labelSelector": selector_text(self.selector), "resourceVersion": version,
                  "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
        try:
            async with self.cluster.streams().stream(
                    "GET", f"/api/v1/namespaces/{self.namespace}/pods", params=params,
                    headers=self.cluster.auth_headers()) as response:
                if response.status_code == 410:  # the version expired before the stream began: Gone, as a status
                    log.info("cluster.watch_expired", namespace=self.namespace, then="re-list")
                    return None
                if response.status_code != 200:
                    await response.aread()
                    raise ApiException(status=response.status_code, reason=response.text[:200])
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    payload = json.loads(line)
                    if payload.get("type") == "ERROR":
                        status = (payload.get("object") or {}).get("code")
                        if status == 410:
                            log.info("cluster.watch_expired", namespace=self.namespace, then="re-list")
                            return None
                        raise ApiException(status=status, reason=(payload.get("object") or {}).get("message"))
                    event = _watch_event(payload)
                    self._apply(event)
                    version = event.resource_version or version
        except ApiException as exc:
            raise translate(exc, what=what) from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise ClusterUnavailable(f"{what}: the stream broke ({type(exc).__name__})",
                                     hint="resumed from the last resourceVersion") from exc
        return version

    def _apply(self, event: _Event) -> None:
        if event.kind == "RESET":
            self.pods = {pod.name: pod for pod in event.pods}
            self.synced.set()
        elif event.kind == "DELETED":
            for pod in event.pods:
                self.pods.pop(pod.name, None)
        elif event.kind in ("ADDED", "MODIFIED"):
            for pod in event.pods:
                self.pods[pod.name] = pod
        else:  # BOOKMARK: only moves the resume point
            return
        self.ever_seen = self.ever_seen or bool(self.pods)
        self._changed.set()


def _watch_event(payload: Mapping[str, Any]) -> _Event:
    kind, obj = payload.get("type", ""), payload.get("object") or {}
    version = (obj.get("metadata") or {}).get("resourceVersion")
    if kind == "BOOKMARK":
        return _Event("BOOKMARK", resource_version=version)
    return _Event(kind, [pod_view(obj)], resource_version=version)
