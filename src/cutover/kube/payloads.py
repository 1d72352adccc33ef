"""Kubernetes API payloads (raw JSON) into the small frozen views the core decides on. Pure.

Called by `cluster`, which reads the payloads; kept apart so that the translation is testable on
plain dicts and the adapter stays about I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cutover.core.views import (
    ApplicationView,
    ContainerView,
    EndpointView,
    HydratorView,
    LeaseView,
    NodeView,
    Placement,
    PodView,
    PolicyView,
    Probe,
    Requirement,
    ServicePort,
    ServiceView,
    SourceView,
    Taint,
    Toleration,
)
from cutover.kube import capacity


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _probe(spec: Mapping[str, Any] | None) -> Probe | None:
    if not spec:
        return None
    return Probe(initial_delay=float(spec.get("initialDelaySeconds", 0)),
                 period=float(spec.get("periodSeconds", 10)),
                 failure_threshold=int(spec.get("failureThreshold", 3)),
                 timeout=float(spec.get("timeoutSeconds", 1)))


def pod_view(obj: Mapping[str, Any]) -> PodView:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}
    scheduled = conditions.get("PodScheduled") or {}
    unschedulable = (scheduled.get("message") or "unschedulable") if (
        scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable") else None
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or ()}
    containers = tuple(_container_view(c, statuses.get(c.get("name")) or {}) for c in spec.get("containers") or ())
    return PodView(
        namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""),
        labels=dict(meta.get("labels") or {}), phase=status.get("phase", "Pending"), ip=status.get("podIP"),
        ready=(conditions.get("Ready") or {}).get("status") == "True",
        deleting=bool(meta.get("deletionTimestamp")), unschedulable_message=unschedulable,
        created_at=_time(meta.get("creationTimestamp")), containers=containers,
        node_name=spec.get("nodeName") or None, requests=pod_requests(spec), placement=placement(spec),
        grace_period=float(spec.get("terminationGracePeriodSeconds", 30)),
    )


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler counts a pod as holding (its NodeResourcesFit filter): the sum of the containers' and
    the sidecars' requests, at least each plain init container's, plus the pod overhead and one `pods`; a
    request left out where a limit is set is the limit, as the API server defaults it. Milli-units."""
    def requests(container: Mapping[str, Any]) -> dict[str, int]:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {name: _quantity(value) for name, value in merged.items()}

    total: dict[str, int] = {"pods": 1000}
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    for container in [*(spec.get("containers") or ()), *sidecars]:
        for name, amount in requests(container).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") != "Always":
            for name, amount in requests(container).items():
                total[name] = max(total.get(name, 0), amount)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + _quantity(value)
    return total


def _quantity(value: Any) -> int:
    try:
        return capacity.milli(value)
    except ValueError:
        return 0  # the API server refuses a malformed quantity; nothing to count


def placement(spec: Mapping[str, Any]) -> Placement:
    """nodeSelector, the required node affinity's terms and the tolerations: what `capacity.admits` matches."""
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = tuple(
        tuple(Requirement(str(need.get("key", "")), str(need.get("operator", "")),
                          tuple(str(v) for v in need.get("values") or ()), field=kind == "matchFields")
              for kind in ("matchExpressions", "matchFields") for need in term.get(kind) or ())
        for term in affinity.get("nodeSelectorTerms") or ())
    tolerations = tuple(Toleration(key=t.get("key"), operator=t.get("operator") or "Equal", value=t.get("value") or "",
                                   effect=t.get("effect") or None) for t in spec.get("tolerations") or ())
    return Placement(node_selector=dict(spec.get("nodeSelector") or {}), terms=terms, tolerations=tolerations)


def node_view(obj: Mapping[str, Any]) -> NodeView:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    return NodeView(
        name=meta.get("name", ""), labels=dict(meta.get("labels") or {}),
        allocatable={name: _quantity(value) for name, value in (status.get("allocatable") or {}).items()},
        taints=tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
                     for t in spec.get("taints") or ()),
        unschedulable=bool(spec.get("unschedulable")),
        annotations={str(key): str(value) for key, value in (meta.get("annotations") or {}).items()},
    )


def _container_view(spec: Mapping[str, Any], status: Mapping[str, Any]) -> ContainerView:
    state, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated") or {}
    waiting, running = state.get("waiting") or {}, state.get("running") or {}
    return ContainerView(
        name=spec.get("name", ""), ready=bool(status.get("ready")), started_at=_time(running.get("startedAt")),
        restarts=int(status.get("restartCount", 0)), waiting_reason=waiting.get("reason"),
        waiting_message=waiting.get("message"), last_terminated_reason=last.get("reason"),
        startup_probe=_probe(spec.get("startupProbe")),
        argv=tuple(str(word) for word in (*(spec.get("command") or ()), *(spec.get("args") or ()))),
        pre_stop_sleep=_pre_stop_sleep((spec.get("lifecycle") or {}).get("preStop") or {}),
    )


_SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+(\d+(?:\.\d+)?)")


def _pre_stop_sleep(hook: Mapping[str, Any]) -> float | None:
    """Seconds a preStop hook sleeps: the `sleep` action (Kubernetes 1.30+), or an exec of `sleep N` (alone or in a
    shell line); None when it does not sleep, or waits on something else (a script polling the engine)."""
    if "sleep" in hook:
        return float((hook["sleep"] or {}).get("seconds", 0))
    found = _SLEEP.search(" ".join(str(word) for word in ((hook.get("exec") or {}).get("command") or ())))
    return float(found.group(1)) if found else None


def service_view(obj: Mapping[str, Any]) -> ServiceView:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    ports = tuple(ServicePort(name=p.get("name"), port=int(p["port"]), target_port=p.get("targetPort", p["port"]))
                  for p in spec.get("ports") or ())
    return ServiceView(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""),
                       cluster_ip=spec.get("clusterIP"), selector=dict(spec.get("selector") or {}), ports=ports)


def endpoint_views(obj: Mapping[str, Any]) -> list[EndpointView]:
    views = []
    for endpoint in obj.get("endpoints") or ():
        ready = (endpoint.get("conditions") or {}).get("ready")
        pod = (endpoint.get("targetRef") or {}).get("name")
        views += [EndpointView(ip=address, ready=ready is not False, pod_name=pod)
                  for address in endpoint.get("addresses") or ()]
    return views


def policy_view(obj: Mapping[str, Any]) -> PolicyView:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return PolicyView(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                      pod_selector=spec.get("podSelector") or {},
                      policy_types=tuple(spec.get("policyTypes") or ()),
                      ingress=tuple(spec.get("ingress") or ()))


def lease_view(obj: Mapping[str, Any]) -> LeaseView:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return LeaseView(name=meta.get("name", ""), holder=spec.get("holderIdentity"), renewed=_time(spec.get("renewTime")),
                     duration=float(spec.get("leaseDurationSeconds") or 0), transitions=int(spec.get("leaseTransitions")
                                                                                        or 0),
                     resource_version=meta.get("resourceVersion", ""),
                     annotations=dict(meta.get("annotations") or {}))


def _source(obj: Mapping[str, Any]) -> SourceView:
    return SourceView(obj.get("repoURL", ""), obj.get("targetRevision"), obj.get("path"))


def _hydrator(spec: Any, status: Mapping[str, Any]) -> HydratorView | None:
    if not isinstance(spec, Mapping):
        return None
    sync, current = spec.get("syncSource") or {}, status.get("currentOperation") or {}
    return HydratorView(dry=_source(spec.get("drySource") or {}), sync_branch=sync.get("targetBranch", ""),
                        sync_path=sync.get("path", ""), dry_sha=current.get("drySHA"),
                        hydrated_sha=current.get("hydratedSHA"), phase=current.get("phase"),
                        sync_repo=sync.get("repoURL") or None)


def application_view(obj: Mapping[str, Any]) -> ApplicationView:
    """Single- and multi-source: `revision` or `revisions[]` in the operation, its result and the sync status."""
    meta, status, spec = obj.get("metadata") or {}, obj.get("status") or {}, obj.get("spec") or {}
    operation = status.get("operationState") or {}
    requested_op = (obj.get("operation") or {}).get("sync") or {}
    state_op = (operation.get("operation") or {}).get("sync") or {}
    result = operation.get("syncResult") or {}
    requested, synced = requested_op.get("revision"), result.get("revision")
    revisions = result.get("revisions") or state_op.get("revisions") or requested_op.get("revisions") or ()
    return ApplicationView(
        namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        sync_status=(status.get("sync") or {}).get("status"), sync_revision=(status.get("sync") or {}).get("revision"),
        health=(status.get("health") or {}).get("status"), operation_phase=operation.get("phase"),
        operation_revision=synced or ((operation.get("operation") or {}).get("sync") or {}).get("revision")
        or requested,
        operation_started=_time(operation.get("startedAt")), operation_finished=_time(operation.get("finishedAt")),
        refresh_requested="argocd.argoproj.io/refresh" in (meta.get("annotations") or {}),
        sources=tuple(_source(s) for s in spec.get("sources") or ()),
        source=_source(spec["source"]) if isinstance(spec.get("source"), Mapping) else None,
        hydrator=_hydrator(spec.get("sourceHydrator"), status.get("sourceHydrator") or {}),
        operation_revisions=tuple(revisions), sync_revisions=tuple((status.get("sync") or {}).get("revisions") or ()),
        operation_message=operation.get("message"), operation_failures=_failures(result),
        operation_selective=bool(state_op.get("resources")),
        operation_hooks_running=_hooks_running(result), operation_waiting=_waiting(result),
        self_heal=_self_heal(spec), applicationset=_generated_by(meta), deployed=_deployed(status),
    )


def _generated_by(meta: Mapping[str, Any]) -> str | None:
    """The ApplicationSet that controls this Application (its controller ownerReference), or None."""
    return next((str(owner.get("name")) for owner in meta.get("ownerReferences") or ()
                 if isinstance(owner, Mapping) and owner.get("kind") == "ApplicationSet" and owner.get("controller")
                 and str(owner.get("apiVersion", "")).startswith("argoproj.io/")), None)


def _deployed(status: Mapping[str, Any]) -> tuple[str, ...]:
    """Every revision in the Application's history (each source's, for a multi-source one)."""
    return tuple(str(revision) for entry in status.get("history") or () if isinstance(entry, Mapping)
                 for revision in ([entry["revision"]] if entry.get("revision") else entry.get("revisions") or ()))


def _self_heal(spec: Mapping[str, Any]) -> bool | None:
    automated = (spec.get("syncPolicy") or {}).get("automated")
    return bool(automated.get("selfHeal")) if isinstance(automated, Mapping) else None


FAILED_HOOK = ("Failed", "Error")
ENDED_HOOK = ("Succeeded", *FAILED_HOOK)


def _hooks_running(result: Mapping[str, Any]) -> bool:
    """Whether a hook of the sync result has not ended (a Job ArgoCD created and still waits for)."""
    return any(isinstance(r, Mapping) and r.get("hookType") and r.get("hookPhase") not in ENDED_HOOK
               for r in result.get("resources") or ())


def _waiting(result: Mapping[str, Any]) -> tuple[str, ...]:
    """The resources (no hook) the sync applied whose health ArgoCD still waits for: their task is Running."""
    return tuple(f"{r.get('kind', '?')}/{r.get('name', '?')}" for r in result.get("resources") or ()
                 if isinstance(r, Mapping) and not r.get("hookType") and r.get("hookPhase") == "Running")


def _failures(result: Mapping[str, Any]) -> tuple[str, ...]:
    """The resources (hooks included) of a sync result that failed: status SyncFailed, or a hook phase Failed/Error."""
    return tuple(f"{r.get('kind', '?')}/{r.get('name', '?')}: {r.get('message') or 'no message'}"
                 for r in result.get("resources") or () if isinstance(r, Mapping)
                 and (r.get("status") == "SyncFailed" or r.get("hookPhase") in FAILED_HOOK))
