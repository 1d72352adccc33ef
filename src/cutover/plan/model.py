"""The plan's model (docs/plan.md): the vocabulary the format accepts, the dataclasses a read plan is made of,
and the rules on durations and Kubernetes labels. Pure data: no I/O; the reader builds it (`plan.reader`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from cutover.errors import InvalidInput

API_VERSION = "cutover/v1alpha1"
KIND = "CutoverPlan"
DEFAULT_PATH = "/etc/cutover/plan.yaml"
ENGINES = ("vllm", "candle-vllm", "sglang", "llama.cpp", "tgi", "openai")  # a row each in `engines.kinds`
PROOFS = ("listed", "generate", "auto")
# The plan format's vocabulary. The wings map these names to real classes (`githost.PROVIDERS`,
# `sources.SOURCES`) and tests/plan/test_plan.py keeps the two in step; the plan cannot import those registries
# (their classes import the plan).
PROVIDERS = ("github", "gitlab", "gitea", "forgejo", "git")  # the Git providers; `git`: plain Git, HTTPS or SSH
PUBLIC_HOSTS = {"github.com": "github", "gitlab.com": "gitlab", "codeberg.org": "forgejo"}  # git.provider implied


@dataclasses.dataclass(frozen=True)
class SourceFormat:
    """What the plan asks with a `git.source`: a `git.document` to find the Service by (a values file has no kind
    and name), and whether backends name the scalar the file holds (`backends.<name>.gitValue`)."""

    needs_document: bool = True
    takes_git_value: bool = False


SOURCES: Mapping[str, SourceFormat] = {  # where the selector lives: what kind of file git.path is
    "manifest": SourceFormat(),
    "kustomize": SourceFormat(),
    "helm-values": SourceFormat(needs_document=False, takes_git_value=True),
}
GIT_MODES = ("direct", "pull-request")
LOG_LEVELS = ("debug", "info", "warning", "error")

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
# Kubernetes label syntax: apimachinery/pkg/util/validation (qualified names and label values).
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "InferenceService")  # what holds a backend's GPUs (docs/capacity.md)


@dataclasses.dataclass(frozen=True)
class Workload:
    """docs/capacity.md: what holds a backend's resources in Git, and so what a handoff frees and restores."""

    kind: str  # Deployment | StatefulSet (freed at spec.replicas: 0) | InferenceService (serving.kserve.io/stop)
    name: str
    path: str | None = None  # the file that holds it, when not git.path; a kustomization.yaml: its `replicas:` entry
    values_key: str | None = None  # a Helm values key that holds its replicas (a dotted path), instead of the object


@dataclasses.dataclass(frozen=True)
class Backend:
    name: str
    selector: Mapping[str, str]  # the effective selector, as the live Service carries it (docs/sources.md)
    engine: str
    port: int
    git_value: str | None = None  # helm-values with a scalar selectorPath: what Git holds for this backend
    workload: Workload | None = None  # docs/capacity.md: what frees it, for the strategies that free a backend
    model: str | None = None  # the id or root its /v1/models must report: the weights meant (docs/engines.md)


@dataclasses.dataclass(frozen=True)
class ServiceRef:
    namespace: str
    name: str
    ports: tuple[int, ...] | None  # None: every port of the Service


@dataclasses.dataclass(frozen=True)
class Verify:
    served_names: tuple[str, ...]
    proof: str = "auto"
    min_ready_pods: int = 1
    max_wait: float = 1800.0  # seconds; a ceiling, the wait follows the pods' startupProbe
    request_timeout: float = 10.0  # seconds, per engine request
    fitness: Fitness | None = None  # docs/fitness.md; None: the names alone decide


@dataclasses.dataclass(frozen=True)
class Fitness:
    """docs/fitness.md: beyond the names, is the target warm, fast enough, streaming, and no smaller than the live
    one?"""

    requests: int = 3  # short generations per served name and Ready pod
    max_latency: float = 5.0  # seconds: each answer, or a stream's first data event, within this
    stream: bool = True  # one of them streams and must end with `data: [DONE]`
    compare: bool = True  # side by side with the backend the Service selects now


@dataclasses.dataclass(frozen=True)
class GitDocument:
    kind: str
    name: str


@dataclasses.dataclass(frozen=True)
class GitAuthor:
    name: str = "cutover"
    email: str = "cutover@example.invalid"


@dataclasses.dataclass(frozen=True)
class GitSettings:
    provider: str
    url: str
    path: str
    document: GitDocument
    api_url: str | None = None
    allow_insecure: bool = False
    branch: str = "main"
    selector_path: str = "spec.selector"
    mode: str = "direct"
    author: GitAuthor = GitAuthor()
    token_file: str | None = None
    source: str = "manifest"  # manifest | kustomize | helm-values (docs/sources.md)
    render_path: str | None = None  # the directory ArgoCD builds (default: the Application's source path)
    ca_file: str | None = None  # PEM bundle of a private CA for the Git host (cutover.trust)


@dataclasses.dataclass(frozen=True)
class ArgoCD:
    application: str
    namespace: str = "argocd"
    refresh: bool = True
    refresh_always: bool = False  # also while an operation runs (docs/install.md: the fixed self-heal delay)
    server: str | None = None  # the ArgoCD API, for refreshes and rendered manifests (docs/sources.md)
    token_file: str | None = None

    def __repr__(self) -> str:  # the token file's path is no secret, but keep reprs short and plain
        return f"ArgoCD(application={self.application!r}, namespace={self.namespace!r}, server={self.server!r})"


@dataclasses.dataclass(frozen=True)
class Slack:
    webhook_file: str | None = None
    bot_token_file: str | None = None
    channel: str | None = None
    min_level: str = "info"


STRATEGIES = ("parallel", "bridge", "recreate")  # docs/capacity.md: how a handoff makes room for the target
DRAIN_TIMEOUT = 300.0  # seconds: handoff.drainTimeout's default


def unanswered(served: tuple[str, ...], bridged: tuple[str, ...]) -> tuple[str, ...]:
    """The served names a bridge that answers `bridged` leaves without an answer."""
    return tuple(name for name in served if name not in bridged)


@dataclasses.dataclass(frozen=True)
class Handoff:
    """docs/capacity.md: how the target gets room (`strategy`), and what happens to the source after the switch."""

    strategy: str = "parallel"  # parallel (make-before-break) | bridge | recreate
    bridge: str | None = None  # bridge: the backend that carries the bridged names while the source is freed
    bridge_names: tuple[str, ...] = ()  # the names the bridge must serve (default: every served name)
    max_gap: float | None = None  # recreate, and bridge with dark names: seconds of gap consented to
    drain_timeout: float = DRAIN_TIMEOUT  # seconds to wait for in-flight requests before a free
    retire_after: float | None = None  # seconds after a verified switch until the source is freed


@dataclasses.dataclass(frozen=True)
class Plan:
    name: str
    service: ServiceRef
    backends: Mapping[str, Backend]
    target: str
    verify: Verify
    git: GitSettings
    argocd: ArgoCD | None = None
    rollback_auto: bool = True
    slack: Slack | None = None
    handoff: Handoff = Handoff()
    jobs_namespace: str = "cutover"  # where this workload's Jobs run: in a pod, the pod's own (cutover-<application>)
    branch_scope: str = ""  # in a pod "<its namespace>/": the branches cutover makes are this workload's alone
    # docs/fleet.md, `mode: fleet`: the fleet's engine writes (one commit for every cluster), cutover gates and
    # verifies each cluster's sync and commits nothing; `target` is then the backend a sync's revision selects,
    # set by `aimed` once that revision is read ("" until then)
    fleet: bool = False

    def aimed(self, backend: str) -> Plan:
        """A fleet plan aimed at the backend the revision being synced (or the live Service) selects: what the
        switch's proofs, capacity and drain checks call the target."""
        self.backend(backend)
        return dataclasses.replace(self, target=backend)

    def for_bridge(self) -> Plan:
        """The plan the bridge is held to (docs/capacity.md): handoff.bridgeNames proven, compared with no other
        backend (it carries the names for a while; it replaces no engine)."""
        fitness = self.verify.fitness and dataclasses.replace(self.verify.fitness, compare=False)
        return dataclasses.replace(self, verify=dataclasses.replace(
            self.verify, served_names=self.handoff.bridge_names or self.verify.served_names, fitness=fitness))

    @property
    def dark_names(self) -> tuple[str, ...]:
        """strategy bridge: the served names the bridge does not answer (outside handoff.bridgeNames), unanswered
        from the switch to the bridge until the switch off it: a gap for them, consented to by handoff.maxGap."""
        if self.handoff.strategy != "bridge" or not self.handoff.bridge_names:
            return ()
        return unanswered(self.verify.served_names, self.handoff.bridge_names)

    def job(self, command: str) -> str:
        """How a person runs `command` (run, rollback) for this workload: a Job from its own CronJob, which the
        hooks Component names after the workload's Application (jobs/, docs/install.md step 9)."""
        suffix = self.argocd.application if self.argocd else "<application>"
        return (f"the cutover-{command}-{suffix} Job (kubectl -n {self.jobs_namespace} create job "
                f"--from=cronjob/cutover-{command}-{suffix} cutover-{command}-$(date +%s))")

    def branch(self, name: str) -> str:
        """A branch cutover makes, moves and deletes (a pull request's, a render check's scratch branch): under
        `cutover/`, and in a pod under the workload's own credentials namespace, which the pod reads from its own
        fields, so that no plan can name (and reset) another workload's branch (docs/security.md)."""
        return f"cutover/{self.branch_scope}{name}"

    def resume(self, hold: str) -> str:
        """How a person goes on after a rollback to `hold`: a run by hand lifts its hold, and so does a change of the
        plan's target (noted once seen: set back later, it does not hold again)."""
        return (f"to go to {self.target} again once it is fixed, run {self.job('run')}; to stay on {hold}, set the "
                f"plan's target to {hold} (and back to {self.target} later: the hold ends once the target changed)")

    def backend(self, name: str, *, field: str = "--backend") -> Backend:
        if name not in self.backends:
            raise InvalidInput(
                f"{field}: expected one of {', '.join(sorted(self.backends))}, found {name!r}",
                hint="name a key under `backends:` in the plan",
            )
        return self.backends[name]


def parse_duration(text: str) -> float:
    """Read '90s', '30m', '1h', '1h30m' or '500ms' (a latency bound) as seconds; ValueError otherwise."""
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if not match or not any(match.groups()):
        raise ValueError(text)
    hours, minutes, seconds, millis = (int(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def label_problem(key: str, value: str) -> str | None:
    """Why a label key or value breaks Kubernetes label syntax (saying which rule), or None when it is fine."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"label key prefix {prefix!r} is not a DNS subdomain (lowercase alphanumerics, '-' and '.')"
    if problem := _name_problem(name):
        return f"label key {key!r}: its name {problem}"
    if value and (problem := _name_problem(value)):
        return f"label value {value!r} {problem}"
    return None


def _name_problem(text: str) -> str | None:
    """What is wrong with a label name or value: its length, a character, or its ends; None when it is fine."""
    if not text or len(text) > 63:
        return f"is {len(text)} characters long: 1 to 63 allowed"
    if bad := sorted({c for c in text if not (c.isascii() and (c.isalnum() or c in "-_."))}):
        return f"holds {', '.join(repr(c) for c in bad)}: only alphanumerics, '-', '_' and '.' are allowed"
    if not _LABEL_NAME.match(text):
        return "must begin and end with an alphanumeric"
    return None
