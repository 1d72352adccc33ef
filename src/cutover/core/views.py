"""Observed state as small frozen dataclasses: what the pure core decides on.

The cluster adapter builds these from API payloads (raw dicts, never SDK models), the Git providers build
`Commit`s from their history answers; readiness and the decisions read them; tests build them by hand.
No I/O here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from cutover.core.trailers import Trailers


@dataclasses.dataclass(frozen=True)
class Probe:
    """A container's startupProbe, with Kubernetes defaults for unset fields."""

    initial_delay: float = 0.0
    period: float = 10.0
    failure_threshold: int = 3
    timeout: float = 1.0

    @property
    def budget(self) -> float:
        """Seconds from container start until the kubelet gives up on startup."""
        return self.initial_delay + self.failure_threshold * self.period


@dataclasses.dataclass(frozen=True)
class ContainerView:
    name: str
    ready: bool = False
    started_at: datetime | None = None  # state.running.startedAt
    restarts: int = 0
    waiting_reason: str | None = None  # state.waiting.reason, e.g. CrashLoopBackOff
    waiting_message: str | None = None
    last_terminated_reason: str | None = None  # lastState.terminated.reason, e.g. OOMKilled
    startup_probe: Probe | None = None
    has_readiness_gate: bool = False
    argv: tuple[str, ...] = ()  # command and args as the pod spec gives them (a shell's -c string is one word)
    pre_stop_sleep: float | None = None  # seconds its preStop hook sleeps (a `sleep` action or `sleep N`)


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One matchExpression of a required node affinity term: `key` `operator` `values` (Kubernetes'
    NodeSelectorRequirement); `field` for a matchFields entry (metadata.name)."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()
    field: bool = False


@dataclasses.dataclass(frozen=True)
class Toleration:
    key: str | None = None  # None with Exists: every taint
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str | None = None  # None: every effect


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a pod may be scheduled, as far as plain label matches say it (kube/capacity.py)."""

    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    terms: tuple[tuple[Requirement, ...], ...] = ()  # required node affinity: any term, every requirement in it
    tolerations: tuple[Toleration, ...] = ()


@dataclasses.dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclasses.dataclass(frozen=True)
class NodeView:
    """A node as the capacity judgment reads it: its labels, taints and what it can hold (milli-units)."""

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    allocatable: Mapping[str, int] = dataclasses.field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False  # spec.unschedulable: cordoned
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)  # what the CNI records (dataplane)


@dataclasses.dataclass(frozen=True)
class PodView:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    phase: str = "Pending"
    ip: str | None = None
    ready: bool = False  # condition Ready
    deleting: bool = False  # metadata.deletionTimestamp set
    unschedulable_message: str | None = None  # condition PodScheduled=False, reason Unschedulable
    created_at: datetime | None = None
    containers: tuple[ContainerView, ...] = ()
    node_name: str | None = None  # spec.nodeName: where the scheduler bound it
    requests: Mapping[str, int] = dataclasses.field(default_factory=dict)  # what it holds, in milli-units
    placement: Placement | None = None  # where it may go (nodeSelector, required node affinity, tolerations)
    grace_period: float = 30.0  # spec.terminationGracePeriodSeconds: SIGTERM to SIGKILL

    def matches(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(key) == value for key, value in selector.items())

    @property
    def workload(self) -> str:
        """<namespace>/<workload> from the pod's name: a Deployment's pods end in -<pod-template-hash>-<suffix>, a
        StatefulSet's in -<ordinal>; another pod is named as it is."""
        name, template = self.name, self.labels.get("pod-template-hash")
        if template and f"-{template}-" in name:
            name = name[:name.rindex(f"-{template}-")]
        elif "statefulset.kubernetes.io/pod-name" in self.labels and name.rpartition("-")[2].isdigit():
            name = name.rpartition("-")[0]
        return f"{self.namespace}/{name}"

    @property
    def restarts(self) -> int:
        return sum(container.restarts for container in self.containers)


@dataclasses.dataclass(frozen=True)
class ServicePort:
    name: str | None
    port: int
    target_port: int | str


@dataclasses.dataclass(frozen=True)
class ServiceView:
    namespace: str
    name: str
    uid: str
    cluster_ip: str | None
    selector: Mapping[str, str]
    ports: tuple[ServicePort, ...]


@dataclasses.dataclass(frozen=True)
class EndpointView:
    """One endpoint of an EndpointSlice, as kube-proxy would route to it."""

    ip: str
    ready: bool
    pod_name: str | None


@dataclasses.dataclass(frozen=True)
class PolicyView:
    """A NetworkPolicy, kept close to its payload: the rules are evaluated by `netpolicy`."""

    namespace: str
    name: str
    pod_selector: Mapping[str, Any]
    policy_types: tuple[str, ...]
    ingress: tuple[Mapping[str, Any], ...]


@dataclasses.dataclass(frozen=True)
class SourceView:
    """One source of an Application: `spec.source`, or an entry of `spec.sources` (multi-source)."""

    repo_url: str
    target_revision: str | None = None
    path: str | None = None


def same_repository(one: str, other: str) -> bool:
    """Whether two repository URLs name one repository, compared as ArgoCD compares repoURLs (its
    `git.NormalizeGitURL`: lower case, no surrounding space, no trailing `/` or `.git`); ArgoCD's repoURL and the
    plan's git.url are often spelled differently."""
    def key(url: str) -> str:
        return url.strip().lower().rstrip("/").removesuffix(".git")
    return key(one) == key(other)


@dataclasses.dataclass(frozen=True)
class HydratorView:
    """ArgoCD 3.x's Source Hydrator (`spec.sourceHydrator`, `status.sourceHydrator`): the dry source people commit
    to, the branch ArgoCD writes the rendered manifests to and syncs from, and its current operation."""

    dry: SourceView  # drySource: repoURL, targetRevision, path
    sync_branch: str  # syncSource.targetBranch
    sync_path: str  # syncSource.path: the hydrated manifest is <path>/manifest.yaml there
    dry_sha: str | None = None  # status.sourceHydrator.currentOperation.drySHA
    hydrated_sha: str | None = None  # ... .hydratedSHA
    phase: str | None = None  # ... .phase: Hydrating | Failed | Hydrated
    sync_repo: str | None = None  # syncSource.repoURL: hydrated into another repository; None: the dry source's

    @property
    def elsewhere(self) -> bool:
        """Whether the rendered manifests go to another repository than the dry source's (ArgoCD 3.5)."""
        return bool(self.sync_repo) and not same_repository(self.sync_repo or "", self.dry.repo_url)

    def dry_of(self, hydrated: str) -> str | None:
        """The dry revision ArgoCD rendered into `hydrated` (a revision, or the 7-character prefix a hook Job's name
        holds), where the current operation says; else None."""
        done = self.phase == "Hydrated" and self.hydrated_sha is not None and len(hydrated) >= 7
        return self.dry_sha if done and (self.hydrated_sha or "").startswith(hydrated) else None

    @property
    def manifest(self) -> str:
        """The hydrated manifest's path on the sync branch."""
        return f"{self.sync_path.strip('/')}/manifest.yaml" if self.sync_path.strip("/") not in ("", ".") \
            else "manifest.yaml"


@dataclasses.dataclass(frozen=True)
class ApplicationView:
    """What a cutover reads of an ArgoCD Application (argoproj.io/v1alpha1). For a multi-source Application the
    revisions are per source (`revisions[]`, in the order of `spec.sources`); `for_source` picks ours."""

    namespace: str
    name: str
    sync_status: str | None  # status.sync.status: Synced | OutOfSync | Unknown
    sync_revision: str | None  # status.sync.revision: the latest revision compared
    health: str | None  # status.health.status: Healthy | Progressing | Degraded | ...
    operation_phase: str | None  # status.operationState.phase: Running | Succeeded | Failed | Error | Terminating
    operation_revision: str | None  # status.operationState.syncResult.revision, else operation.sync.revision
    operation_started: datetime | None
    operation_finished: datetime | None
    refresh_requested: bool  # metadata.annotations["argocd.argoproj.io/refresh"] is set
    sources: tuple[SourceView, ...] = ()  # spec.sources (multi-source); empty for a single source
    operation_revisions: tuple[str, ...] = ()  # syncResult.revisions, else operation.sync.revisions
    sync_revisions: tuple[str, ...] = ()  # status.sync.revisions
    source: SourceView | None = None  # spec.source (single source)
    hydrator: HydratorView | None = None  # spec.sourceHydrator, with its status
    operation_message: str | None = None  # status.operationState.message
    # "<Kind>/<name>: <message>" of each resource or hook of the operation that failed: what ArgoCD shows of a
    # failed hook is its Job's condition ("... failed with exit code 4 matching FailJob rule ...")
    operation_failures: tuple[str, ...] = ()
    # status.operationState.operation.sync.resources named any: a selective sync, which runs no hook (ArgoCD's
    # controller/sync.go skips hooks then), as a self-heal sync is
    operation_selective: bool = False
    # a hook of the operation that has not ended (its hookPhase neither Succeeded, Failed nor Error)
    operation_hooks_running: bool = False
    # "<Kind>/<name>" of each resource the operation applied and still waits for to be healthy (its task Running)
    operation_waiting: tuple[str, ...] = ()
    # spec.syncPolicy.automated.selfHeal (None: no automated sync): with it, a comparison during a hop's sync may
    # make the next one a selective self-heal that runs no hook (argo-cd#27875, docs/install.md step 7)
    self_heal: bool | None = None
    # the ApplicationSet that generated it (its controller ownerReference; argo-cd v3.5 applicationset_controller.go
    # sets it on every Application it makes): a fleet's step order is read there (docs/fleet.md)
    applicationset: str | None = None
    # status.history's revisions: ArgoCD records a sync there only once it succeeded, whole (no resources named, so
    # hooks ran) and not a dry run (argo-cd v3.5 controller/sync.go, SyncAppState's persistRevisionHistory)
    deployed: tuple[str, ...] = ()

    @property
    def failed_waiting(self) -> bool:
        """A Running operation that can only end Failed and has nothing left but a wait: a resource failed to apply,
        every hook it started has ended (SyncFail's, when ArgoCD ran it before waiting), no retry is pending, and ArgoCD
        waits for the rest to be healthy (gitops-engine's sync_context.go keeps the operation Running while any task
        runs), which may never be: a target Pending for the card that a refused free was to give back. ArgoCD's own
        retry sets `finishedAt` on a Running operation until it tries again (controller/appcontroller.go)."""
        return self.operation_phase == "Running" and self.operation_finished is None and \
            bool(self.operation_failures) and not self.operation_hooks_running

    @property
    def failed_waits_on(self) -> tuple[str, ...]:
        """What an operation with a failed resource still waits for to be healthy: it runs on until then."""
        return self.operation_waiting if self.operation_failures else ()

    def failure(self) -> str:
        """What the operation says went wrong: while the SyncFail hooks run it is still Running (the real
        ArgoCD's order: they are its last step), so the failed resources say it, not the phase."""
        revision = (self.operation_revision or "?")[:12]
        if self.operation_failures:
            return f"ArgoCD's sync of {revision} failed: {'; '.join(self.operation_failures)}"
        if self.operation_phase in ("Failed", "Error"):
            return f"ArgoCD's sync of {revision} ended {self.operation_phase}: {self.operation_message or 'no message'}"
        return f"ArgoCD's sync of {revision} failed (phase {self.operation_phase or 'unknown'}, no failed resource " \
               f"recorded yet)"

    def position(self, repo_url: str, branch: str) -> int | None:
        """Which of `spec.sources` is the plan's repository (on its branch, where a repository is there twice)."""
        found = [index for index, source in enumerate(self.sources) if same_repository(source.repo_url, repo_url)]
        on_branch = [index for index in found if self.sources[index].target_revision in (branch, f"refs/heads/"
                                                                                                 f"{branch}")]
        chosen = on_branch or found
        return chosen[0] if chosen else None

    def source_path(self, repo_url: str, branch: str) -> str | None:
        """The directory ArgoCD renders for the plan's repository: spec.source.path, or its source's (the dry
        source's, with the Source Hydrator)."""
        if self.hydrator is not None:
            return self.hydrator.dry.path
        if self.sources:
            index = self.position(repo_url, branch)
            return self.sources[index].path if index is not None else None
        return self.source.path if self.source is not None else None

    def for_source(self, repo_url: str, branch: str) -> ApplicationView:
        """The view with the revisions of the plan's source: itself for a single-source Application."""
        index = self.position(repo_url, branch) if self.sources else None
        if index is None:
            return self

        def at(revisions: tuple[str, ...]) -> str | None:
            return revisions[index] if index < len(revisions) else None

        return dataclasses.replace(self, operation_revision=at(self.operation_revisions),
                                   sync_revision=at(self.sync_revisions))


@dataclasses.dataclass(frozen=True)
class LeaseView:
    name: str
    holder: str | None
    renewed: datetime | None
    duration: float
    transitions: int
    resource_version: str
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)

    def expires(self) -> datetime | None:
        return self.renewed + timedelta(seconds=self.duration) if self.renewed else None


@dataclasses.dataclass(frozen=True)
class Commit:
    """A commit that touched the plan's file, as a Git host's history tells it."""

    sha: str
    title: str
    author: str
    date: datetime | None
    trailers: Trailers = dataclasses.field(default_factory=Trailers)
