"""A stateful Kubernetes API over HTTP for the simulated world: kmock, extended where it falls short.

kmock 0.8 serves discovery, errors and a request log, and lets a test put reactions (faults) in front
of any request. Its own emulator lacks what a controller relies on, so this one keeps its own store:
resourceVersion, uid and timestamps on every write; label and field selectors; the namespace taken
from the URL; PUT and the status subresource; watches that resume from a resourceVersion, answer 410
Gone for a compacted one, turn objects leaving a selector into DELETED and end after timeoutSeconds;
and since state changes only in the fallback handlers, a fault injected by a reaction changes nothing.
Used by the demo and the tests; the product never imports it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import aiohttp.web
import jsonpatch
import kmock
from kmock._internal import rendering

from cutover.core.clock import Clock

Key = tuple[str, str, str]  # (resource path "group/version/plural", namespace, name)

KINDS = {  # plural -> (apiVersion, kind) for the resources the simulated world serves
    "pods": ("v1", "Pod"), "services": ("v1", "Service"), "events": ("v1", "Event"),
    "namespaces": ("v1", "Namespace"), "nodes": ("v1", "Node"),
    "endpointslices": ("discovery.k8s.io/v1", "EndpointSlice"),
    "networkpolicies": ("networking.k8s.io/v1", "NetworkPolicy"),
    "leases": ("coordination.k8s.io/v1", "Lease"),
    "applications": ("argoproj.io/v1alpha1", "Application"),
    "applicationsets": ("argoproj.io/v1alpha1", "ApplicationSet"),  # a fleet's (docs/fleet.md)
    "configmaps": ("v1", "ConfigMap"),
    "cronjobs": ("batch/v1", "CronJob"), "jobs": ("batch/v1", "Job"),  # the nudge's (docs/sources.md)
}
# Resources whose status is a subresource: as on the real apiserver, a write to the object keeps its status and a
# write to /status keeps its spec (labels and annotations still change through /status: e2e/test_contract.py).
WITH_STATUS = ("pods", "services", "applications")
SERVICE_RANGE = "10.96"  # ClusterIPs the emulator hands out to a Service created without one
HISTORY = 1000  # watch events kept for resuming; an older resourceVersion gets 410 Gone


@dataclasses.dataclass
class _Change:
    version: int
    kind: str  # ADDED | MODIFIED | DELETED
    old: dict[str, Any] | None
    new: dict[str, Any]


class KubeEmulator(kmock.KubernetesScaffold):
    """The emulated API server. Program faults with kmock reactions; read state with `get`.

    `validators` (resource path -> check) see every object written, through the API or directly, as the real
    API server's schema validation would: the tests register the ArgoCD Application CRD's schema there."""

    validators: ClassVar[dict[str, Callable[[Mapping[str, Any]], None]]] = {}

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.store: dict[Key, dict[str, Any]] = {}
        self.history: list[tuple[str, _Change]] = []  # (resource path, change)
        self.subscribers: list[tuple[str, asyncio.Queue[_Change]]] = []
        self.versions = itertools.count(1000)
        self.version = next(self.versions)
        self.epoch = datetime.now(UTC)
        self.served = 0  # requests answered, counted also when the log below is trimmed
        self.denied: set[tuple[str, str]] = set()  # (verb, resource) a SelfSubjectAccessReview says no to
        self.keep: int | None = None  # with a number, keep only that many of the latest requests in kmock's log
        self.loop0: float | None = None
        self.last_loop_time = 0.0
        self.fallback["get /version/"] << self._serve_server_version
        self.fallback[kmock.action.WATCH] << self._serve_watch
        self.fallback[kmock.action.LIST] << self._serve_list
        self.fallback[kmock.action.FETCH] << self._serve_fetch
        self.fallback[kmock.action.CREATE] << self._serve_create
        self.fallback[kmock.method.PUT] << self._serve_put
        self.fallback[kmock.action.UPDATE] << self._serve_patch
        self.fallback[kmock.action.DELETE] << self._serve_delete

    # --- the clock, shared with the simulated pods so that timestamps follow fake time -------------

    def now(self) -> datetime:
        """Wall time that advances with the loop's clock. A loop whose clock turns fake mid-way (looptime
        enables it for the test body, not the fixtures) restarts from where wall time had got to."""
        loop_time = asyncio.get_running_loop().time()
        if self.loop0 is None or loop_time < self.last_loop_time:
            self.epoch = datetime.now(UTC) if self.loop0 is None else self.epoch + timedelta(
                seconds=self.last_loop_time - self.loop0)
            self.loop0 = loop_time
        self.last_loop_time = loop_time
        ours = self.epoch + timedelta(seconds=loop_time - self.loop0)
        clocks = Clock.anchored()
        if clocks is not None and clocks > ours:
            # Never behind cutover's clocks: in fake time each clock's wall time is where the real clock was when it
            # started, and a Clock made after this one (a later act's world, a loaded machine's slow first steps)
            # would date a commit after the sync this clock stamps for it.
            self.epoch, self.loop0, ours = clocks, loop_time, clocks
        return ours

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # kmock 0.8 matches each request against each reaction by walking its whole request log, which grows
        # without end: quadratic over a 50-Service run's ~20,000 requests. Trimming the log keeps it linear.
        self.served += 1
        if self.keep is not None and len(self._requests) > 2 * self.keep:
            del self._requests[:-self.keep]
        if request.resource is not None and request.resource.plural == "selfsubjectaccessreviews":
            return self._review(request)
        if request.resource is not None and request.resource.plural not in KINDS:
            # the real apiserver knows no such resource: 404, not an empty list (e2e/test_contract.py)
            return aiohttp.web.json_response(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                 "message": "the server could not find the requested resource"}, status=404)
        response: aiohttp.web.StreamResponse = await super()._handle(request)
        if request.method == "POST" and response.status == 200 and not response.prepared:
            response.set_status(201)  # a create answers 201 Created, as the real apiserver does (e2e/test_contract)
        return response

    def _review(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """A SelfSubjectAccessReview, answered as the real apiserver does (201, the review with its status): the
        emulator has no RBAC, so everything is allowed but what a test put in `denied` ((verb, resource) pairs)."""
        review = dict(request.data or {})
        wanted = (review.get("spec") or {}).get("resourceAttributes") or {}
        allowed = (wanted.get("verb"), wanted.get("resource")) not in self.denied
        review["status"] = {"allowed": allowed, **({} if allowed else {"reason": "no RBAC rule allows it"})}
        return aiohttp.web.json_response(review, status=201)

    def align(self, now: datetime) -> None:
        """From here on, tell time as `now` does: a second world made later in the same fake-time loop would
        otherwise start from the real clock, behind the time the loop has already run through."""
        self.epoch, self.loop0 = now, asyncio.get_running_loop().time()
        self.last_loop_time = self.loop0

    def stamp(self, *, ago: float = 0.0) -> str:
        return (self.now() - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")

    # --- direct access for the simulated world (no HTTP) ------------------------------------------

    def stored(self, path: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.store.get((path, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def objects(self, path: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [copy.deepcopy(obj) for (p, ns, _), obj in sorted(self.store.items())
                if p == path and (namespace is None or ns == namespace)]

    def apply(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object as the cluster itself would (controllers, kubelet)."""
        meta = obj.setdefault("metadata", {})
        key = (path, meta.get("namespace", ""), meta["name"])
        old = self.store.get(key)
        return self._write(path, key, obj, old)

    def merge(self, path: str, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        key = (path, namespace, name)
        old = self.store[key]
        return self._write(path, key, _merge(copy.deepcopy(old), patch), old)

    def remove(self, path: str, namespace: str, name: str) -> dict[str, Any] | None:
        key = (path, namespace, name)
        old = self.store.pop(key, None)
        if old is not None:
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self._bump())
            self._publish(path, _Change(self.version, "DELETED", old, gone))
        return old

    # --- the store --------------------------------------------------------------------------------

    def _bump(self) -> int:
        self.version = next(self.versions)
        return self.version

    def _write(self, path: str, key: Key, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        plural = path.rsplit("/", 1)[-1]
        api_version, kind = KINDS.get(plural, ("v1", plural.capitalize()))
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind)
        if key[1]:
            meta["namespace"] = key[1]
        meta["name"] = key[2]
        meta["uid"] = old["metadata"]["uid"] if old else meta.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = old["metadata"]["creationTimestamp"] if old else self.stamp()
        meta["resourceVersion"] = str(self._bump())
        if old is None:
            meta.setdefault("generation", 1)
        elif obj.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        check = self.validators.get(path)
        if check is not None:
            check(obj)
        self.store[key] = obj
        self._publish(path, _Change(self.version, "MODIFIED" if old else "ADDED", old, copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    def _publish(self, path: str, change: _Change) -> None:
        self.history.append((path, change))
        del self.history[:-HISTORY]
        for wanted, queue in self.subscribers:
            if wanted == path:
                queue.put_nowait(change)

    # --- HTTP handlers (fallbacks: a test's reactions answer first, and then nothing changes) -----

    @staticmethod
    def _path(request: rendering.Request) -> str:
        res = request.resource
        assert res is not None  # only Kubernetes requests reach these handlers
        return f"{res.group}/{res.version}/{res.plural}"

    def _key(self, request: rendering.Request, name: str | None = None) -> Key:
        return (self._path(request), request.namespace or "", name or request.name or "")

    async def _serve_list(self, request: rendering.Request) -> dict[str, Any]:
        path = self._path(request)
        match = _Selectors(request.params)
        items = [copy.deepcopy(obj) for (p, ns, _), obj in sorted(self.store.items())
                 if p == path and (request.namespace is None or ns == request.namespace) and match(obj)]
        kind = KINDS.get(_plural(request), ("v1", "Object"))
        return {"apiVersion": kind[0], "kind": f"{kind[1]}List",
                "metadata": {"resourceVersion": str(self.version)}, "items": items}

    async def _serve_fetch(self, request: rendering.Request) -> dict[str, Any]:
        obj = self.store.get(self._key(request))
        if obj is None:
            raise _not_found(request)
        return copy.deepcopy(obj)

    async def _serve_create(self, request: rendering.Request) -> dict[str, Any]:
        body = request.data or {}
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = self._key(request, meta.get("name"))
        if key in self.store:
            raise kmock.KubernetesError(status=409, reason="AlreadyExists",
                                        message=f'{_plural(request)} "{key[2]}" already exists')
        if _plural(request) == "services" and not body.setdefault("spec", {}).get("clusterIP"):
            body["spec"]["clusterIP"] = f"{SERVICE_RANGE}.{self.version // 250 % 250}.{self.version % 250 + 1}"
        return self._write(key[0], key, body, None)

    async def _serve_put(self, request: rendering.Request) -> dict[str, Any]:
        key = self._key(request)
        old = self.store.get(key)
        if old is None:
            raise _not_found(request)
        body = request.data or {}
        _check_version(body, old, request)
        return self._write(key[0], key, _split_status(request, old, body), old)

    async def _serve_patch(self, request: rendering.Request) -> dict[str, Any]:
        key = self._key(request)
        old = self.store.get(key)
        if old is None:
            raise _not_found(request)
        content_type = request.headers.get("Content-Type", "")
        if "json-patch" in content_type:
            new = jsonpatch.apply_patch(copy.deepcopy(old), request.data)
        else:  # merge-patch and strategic-merge-patch: a merge patch is enough for what we send
            _check_version(request.data or {}, old, request)
            new = _merge(copy.deepcopy(old), request.data or {})
        return self._write(key[0], key, _split_status(request, old, new), old)

    async def _serve_delete(self, request: rendering.Request) -> dict[str, Any]:
        old = self.remove(*self._key(request))
        if old is None:
            raise _not_found(request)
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "metadata": {}}

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[Any]:
        yield b""  # send the headers now: a watch with nothing to say is still a watch
        path, match = self._path(request), _Selectors(request.params)
        namespace = request.namespace
        since = request.params.get("resourceVersion")
        queue: asyncio.Queue[_Change] = asyncio.Queue()
        self.subscribers.append((path, queue))
        try:
            if since in (None, "", "0"):
                backlog = [_Change(self.version, "ADDED", None, obj) for (p, ns, _), obj in sorted(self.store.items())
                           if p == path and (namespace is None or ns == namespace)]
            elif self.history and int(since) < self.history[0][1].version - 1:
                yield _gone(since)
                return
            else:
                backlog = [change for p, change in self.history if p == path and change.version > int(since)]
            for change in backlog:
                for event in _events(change, match, namespace):
                    yield event
            async with asyncio.timeout(float(request.params.get("timeoutSeconds") or 1800)):
                while True:
                    change = await queue.get()
                    for event in _events(change, match, namespace):
                        yield event
        except TimeoutError:
            return  # the server ends the watch; the client resumes from its last resourceVersion
        finally:
            self.subscribers.remove((path, queue))


def _events(change: _Change, match: _Selectors, namespace: str | None) -> list[dict[str, Any]]:
    """What a selector-filtered watch sees of one change: leaving the selector reads as DELETED."""
    obj_namespace = change.new.get("metadata", {}).get("namespace")
    if namespace is not None and obj_namespace != namespace:
        return []
    was = change.old is not None and match(change.old)
    now = change.kind != "DELETED" and match(change.new)
    if change.kind == "DELETED":
        return [{"type": "DELETED", "object": change.new}] if was else []
    if now and not was:
        return [{"type": "ADDED", "object": change.new}]
    if was and not now:
        return [{"type": "DELETED", "object": change.new}]
    return [{"type": change.kind, "object": change.new}] if now else []


def _split_status(request: rendering.Request, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What a write keeps of `new`: through /status its status and metadata, elsewhere all but the status of a
    resource whose status is a subresource."""
    if request.subresource == "status":
        return {**copy.deepcopy(old), "metadata": new.get("metadata", old.get("metadata")),
                "status": new.get("status")}
    if _plural(request) in WITH_STATUS and "status" in old:
        return {**new, "status": copy.deepcopy(old["status"])}
    return new


def _gone(since: str) -> dict[str, Any]:
    return {"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "status": "Failure",
                                        "reason": "Expired", "code": 410,
                                        "message": f"too old resource version: {since}"}}


def _not_found(request: rendering.Request) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=404, reason="NotFound",
                                 message=f'{_plural(request)} "{request.name}" not found')


def _check_version(body: Mapping[str, Any], old: Mapping[str, Any], request: rendering.Request) -> None:
    wanted = (body.get("metadata") or {}).get("resourceVersion")
    if wanted and wanted != old["metadata"]["resourceVersion"]:
        raise kmock.KubernetesError(
            status=409, reason="Conflict",
            message=f'Operation cannot be fulfilled on {_plural(request)} "{request.name}": '
                    "the object has been modified; please apply your changes to the latest version")


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            target[key] = _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


_REQUIREMENT = re.compile(r"^\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w.-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$")


class _Selectors:
    """labelSelector and fieldSelector query parameters, as the API server reads them."""

    def __init__(self, params: Mapping[str, str]) -> None:
        self.labels = _parse(params.get("labelSelector", ""))
        self.fields = _parse(params.get("fieldSelector", ""))

    def __call__(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(_holds(req, labels) for req in self.labels) and all(
            _holds(req, {req[1]: _field(obj, req[1])}) for req in self.fields)


def _parse(text: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
    requirements = []
    for part in re.split(r",(?![^(]*\))", text):
        if not part.strip():
            continue
        found = _REQUIREMENT.match(part)
        if not found:
            raise kmock.KubernetesError(status=400, reason="BadRequest", message=f"unable to parse {part!r}")
        negate, key, op, value, set_op, values = found.groups()
        if set_op:
            requirements.append((set_op, key, "", tuple(v.strip() for v in values.split(","))))
        elif op:
            requirements.append(("!=" if op == "!=" else "=", key, value or "", ()))
        else:
            requirements.append(("!exists" if negate else "exists", key, "", ()))
    return requirements


def _holds(req: tuple[str, str, str, tuple[str, ...]], labels: Mapping[str, Any]) -> bool:
    op, key, value, values = req
    present, actual = key in labels and labels[key] is not None, labels.get(key)
    return {
        "=": present and actual == value,
        "!=": not present or actual != value,
        "in": present and actual in values,
        "notin": not present or actual not in values,
        "exists": present,
        "!exists": not present,
    }[op]


def _field(obj: Mapping[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _plural(request: rendering.Request) -> str:
    assert request.resource is not None
    assert request.resource.plural is not None
    return str(request.resource.plural)
