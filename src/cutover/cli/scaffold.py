"""`cutover init`: one workload's layout, written as docs/install.md lays it out (steps 3 and 4, "More Services"),
and the administrator's commands printed, not run (they need rights the writer of a repository has not).

Files a kustomization names, committed and reviewed like the rest of the GitOps repository: no chart, no runtime,
nothing that renders differently from what a person reads (ArgoCD renders kustomize as is). What it writes:

- `cutover/<application>/`: the workload's `workload.yaml` and a kustomization naming the workload Component (under
  `nameSuffix: -<application>` and with a `namespace/` of its own unless its credentials namespace is `cutover`);
- `cutover/kustomization.yaml` and `image/kustomization.yaml` when the repository has none yet (the first workload);
- `<application>/hooks/`: the hooks Component with the image's, the plan ConfigMap (a skeleton that reads), under
  the workload's suffix and in its credentials namespace; `<application>/appproject.yaml`: its project.

With `--fleet CLUSTER=RING,...` (docs/fleet.md) the workload is a fleet's: `<application>/hooks/` renders the
`fleet/` Component (the gate, the Sync-phase verifier, the mark of a verified switch) with a `mode: fleet` plan,
`<application>/mark/` is the Component whose replacement writes the Service's selector into the mark's labels, and
`<application>/applicationset.yaml` syncs the clusters ring by ring (RollingSync), in a project over those clusters.

The plan's handoff is `parallel`, or `recreate` when asked; `--strategy auto` chooses from the cluster's capacity
(`strategy_for`, on the verdict the CLI reads as the gate judges a target: docs/capacity.md). Nothing that exists is
overwritten (exit 2, naming the file). Pure but for `write`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

from cutover import __version__
from cutover.errors import InvalidInput
from cutover.kube import capacity

RELEASE = "https://github.com/<org>/cutover"  # where the release's directories are fetched from, by default


@dataclasses.dataclass(frozen=True)
class Workload:
    application: str  # the workload's ArgoCD Application, which names its hooks and CronJobs
    namespace: str  # the Service's namespace
    service: str
    port: int
    repository: str  # the workload's GitOps repository, which ArgoCD reads and cutover's token writes
    credentials: str  # where its Jobs and Secrets live: `cutover` for the first, `cutover-<application>` after
    release: str = RELEASE  # a repository URL (…?ref=v<version>) or a directory of the release's unpacked files
    backends: tuple[str, str] = ("vllm", "candle")
    fleet: tuple[tuple[str, str], ...] = ()  # (cluster, ring) in step order: a fleet's workload (docs/fleet.md)
    strategy: str = "parallel"  # the plan's handoff (docs/capacity.md): parallel, or recreate on full cards
    source_selector: Mapping[str, str] | None = None  # the live Service's selector, where --strategy auto read it

    @property
    def suffixed(self) -> bool:
        return self.credentials != "cutover"


def files(workload: Workload, *, into: Path, first: bool) -> dict[str, str]:
    """Every file, by its path under `into`: the repository's root."""
    app = workload.application
    found = {
        f"cutover/{app}/workload.yaml": _workload_object(workload),
        f"cutover/{app}/kustomization.yaml": _cutover_kustomization(workload, into),
        f"{app}/hooks/kustomization.yaml": _hooks_kustomization(workload, into),
        f"{app}/hooks/plan-configmap.yaml": _plan(workload),
        f"{app}/appproject.yaml": _project(workload),
    }
    if workload.fleet:
        found[f"{app}/hooks/plan-configmap.yaml"] = _fleet_plan(workload)
        found[f"{app}/mark/kustomization.yaml"] = _mark(workload)
        found[f"{app}/applicationset.yaml"] = _applicationset(workload)
        found[f"{app}/appproject.yaml"] = _fleet_project(workload)
    if workload.suffixed:
        found[f"cutover/{app}/namespace/kustomization.yaml"] = _namespace(workload, into)
    if first:
        found["cutover/kustomization.yaml"] = _top(workload, into)
        found["image/kustomization.yaml"] = IMAGE
    return found


def write(found: Mapping[str, str], *, into: Path) -> list[Path]:
    """The files, none of which may exist yet: all or none written."""
    there = [path for path in found if (into / path).exists()]
    if there:
        raise InvalidInput(f"--into: {into / there[0]} exists: cutover init writes new files only",
                           cause="invalid_arguments", hint="choose another --application or --into, or move the "
                                                           "file away")
    written = []
    for path, text in found.items():
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        written.append(target)
    return written


def commands(workload: Workload) -> list[str]:
    """What an administrator runs once for this workload (docs/install.md, step 2): nothing of it fits in Git. A
    fleet's, in every cluster: a token that reads the repository (a fleet's cluster writes nothing, so no `paths`)
    and a read-only account of the hub's ArgoCD API, where the clusters' Applications and their ApplicationSet live
    (docs/fleet.md)."""
    ns, app = workload.credentials, workload.application
    if workload.fleet:
        return [
            f"# in each cluster ({', '.join(cluster for cluster, _ in workload.fleet)}):",
            f"kubectl create namespace {ns}",
            f"kubectl label namespace {ns} cutover.dev/credentials=true pod-security.kubernetes.io/enforce=restricted",
            f"kubectl -n {ns} create secret generic cutover-git --from-file=token=./git-read-token \\\n"
            f"  --from-literal=repository={workload.repository} --from-literal=branches=main   # read only: no paths",
            f"kubectl -n {ns} create secret generic cutover-argocd --from-file=token=./hub-read-token \\\n"
            f"  --from-literal=server=https://argocd.example.invalid   # the hub's API (yours), a read-only account",
            "# on the hub, that account's policy (argocd-rbac-cm; the gate reads the steps' order, docs/fleet.md):",
            f"#   p, role:cutover-{app}, applications, get, {app}/*, allow",
            f"#   p, role:cutover-{app}, applicationsets, get, {app}/*, allow",
        ]
    return [
        f"kubectl create namespace {ns}",
        f"kubectl label namespace {ns} cutover.dev/credentials=true pod-security.kubernetes.io/enforce=restricted",
        f"kubectl -n {ns} create secret generic cutover-git --from-file=token=./git-token \\\n"
        f"  --from-literal=repository={workload.repository} --from-literal=branches=main \\\n"
        f"  --from-literal=paths='{app}/**'   # this workload's files: never cutover's own",
        f"kubectl -n argocd create role cutover-refresh-{app} --verb=get,patch \\\n"
        f"  --resource=applications.argoproj.io --resource-name={app}",
        f"kubectl -n argocd create rolebinding cutover-refresh-{app} --role=cutover-refresh-{app} \\\n"
        f"  --serviceaccount={ns}:cutover",
    ]


def _reference(workload: Workload, directory: str, *, into: Path, beside: str) -> str:
    """A release directory as the kustomization at `beside` names it: by URL, or by relative path."""
    if "://" in workload.release:
        return f"{workload.release.rstrip('/')}//{directory}?ref=v{__version__}"
    return os.path.relpath(Path(workload.release) / directory, into / beside)


def _workload_object(workload: Workload) -> str:
    return f"""# Which workload cutover's ServiceAccount in {workload.credentials} serves (manifests/workload reads it):
# never applied, read by kustomize alone. Written by `cutover init`.
apiVersion: cutover.dev/v1alpha1
kind: Workload
metadata:
  name: cutover-workload
  annotations: {{config.kubernetes.io/local-config: "true"}}
spec:
  namespace: {workload.namespace}
  service: {workload.service}
  port: {workload.port}
  cutoverNamespace: {workload.credentials}
"""


def _cutover_kustomization(workload: Workload, into: Path) -> str:
    beside = f"cutover/{workload.application}"
    suffix = f"nameSuffix: -{workload.application}\n" if workload.suffixed else ""
    return f"""# What cutover may do for the workload {workload.application} (docs/install.md, "More Services"):
# name this directory{' and namespace/' if workload.suffixed else ''} under resources: in cutover/kustomization.yaml.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
{suffix}resources:
  - workload.yaml
components:
  - {_reference(workload, "manifests/workload", into=into, beside=beside)}
""" + WORKLOAD_REPLACEMENTS


# manifests/workload's placeholders, replaced with the directory's workload.yaml (the same in every workload's
# directory; tests/cli/test_init.py renders them against the example's and the tier's)
WORKLOAD_REPLACEMENTS = """replacements:
  - source: {kind: Workload, name: cutover-workload, fieldPath: spec.namespace}
    targets:
      - select: {kind: Role, name: cutover}
        fieldPaths: [metadata.namespace]
      - select: {kind: RoleBinding, name: cutover}
        fieldPaths: [metadata.namespace]
      - select: {kind: NetworkPolicy, name: cutover-to-workload}
        fieldPaths: [spec.egress.0.to.0.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name]
  - source: {kind: Workload, name: cutover-workload, fieldPath: spec.service}
    targets:
      - select: {kind: Role, name: cutover}
        fieldPaths: [rules.4.resourceNames.0]
        options: {delimiter: "-", index: 1}   # cutover-service: the part after the first dash
  - source: {kind: Workload, name: cutover-workload, fieldPath: spec.port}
    targets:
      - select: {kind: NetworkPolicy, name: cutover-to-workload}
        fieldPaths: [spec.egress.0.ports.0.port]
  - source: {kind: Workload, name: cutover-workload, fieldPath: spec.cutoverNamespace}
    targets:
      - select: {kind: RoleBinding}
        fieldPaths: [subjects.0.namespace]
      - select: {kind: NetworkPolicy, name: cutover-to-workload}
        fieldPaths: [metadata.namespace]
"""


def _namespace(workload: Workload, into: Path) -> str:
    beside = f"cutover/{workload.application}/namespace"
    return f"""# The credentials namespace of {workload.application}: its ServiceAccount, its Secrets, its hooks.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {workload.credentials}
resources:
  - {_reference(workload, "manifests/namespace", into=into, beside=beside)}
"""


def _top(workload: Workload, into: Path) -> str:
    more = f"  - {workload.application}/namespace\n" if workload.suffixed else ""
    return f"""# cutover's own Application: the base, one directory per workload, the image (docs/install.md, step 3).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {_reference(workload, "manifests/base", into=into, beside="cutover")}
  - {workload.application}
{more}components:
  - ../image
replacements:
  - source: {{kind: Image, name: cutover-image, fieldPath: "spec.containers.[name=cutover].image"}}
    targets:
      - select: {{kind: ValidatingAdmissionPolicy, name: cutover-pod-pinned}}
        fieldPaths: ["spec.variables.[name=image].expression"]
        options: {{delimiter: "'", index: 1}}
  - source: {{kind: Image, name: cutover-image, fieldPath: "spec.containers.[name=also].image"}}
    targets:
      - select: {{kind: ValidatingAdmissionPolicy, name: cutover-pod-pinned}}
        fieldPaths: ["spec.variables.[name=also].expression"]
        options: {{delimiter: "'", index: 1}}
"""


IMAGE = """# The image's one name and digest (docs/install.md, step 1): set yours, as your push printed it.
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
images:
  # yours: {name: cutover.invalid/cutover, newName: <registry>/cutover, digest: "sha256:<digest>"}
  - {name: cutover.invalid/cutover, newName: cutover.invalid/cutover}
"""


def _hooks_kustomization(workload: Workload, into: Path) -> str:
    beside = f"{workload.application}/hooks"
    namespace = f"namespace: {workload.credentials}   # beside its own Secrets\n" if workload.suffixed else ""
    return f"""# The hooks and CronJobs of {workload.application}, and the plan they act on (docs/install.md, step 4):
# name this directory under resources: in the kustomization its Application renders. No `namespace:` there.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
nameSuffix: -{workload.application}
{namespace}resources:
  - plan-configmap.yaml
components:
  - {_reference(workload, "fleet" if workload.fleet else "hooks", into=into, beside=beside)}
  - {os.path.relpath(into / "image", into / beside)}
"""


def strategy_for(verdict: capacity.Verdict | None) -> str:
    """`cutover init --strategy auto`: `recreate` where the target, judged as one more pod like the source's, fits
    only once the source's pods are gone (the cards are full); `parallel` where it fits beside them, and where it fits
    nowhere or the nodes could not be read (the verdict is printed for a person to choose; docs/capacity.md)."""
    return "recreate" if verdict is not None and verdict.held_by_source else "parallel"


def _selector(workload: Workload, name: str) -> str:
    if name == workload.backends[0] and workload.source_selector:
        found = "".join(f"          {json.dumps(key)}: {json.dumps(value)}\n"
                        for key, value in sorted(workload.source_selector.items()))
        return "        selector:   # the Service's selector in the cluster (cutover init --strategy auto)\n" + found
    return (f"        selector:\n          app.kubernetes.io/name: {workload.service}-{name}   # the labels of "
            f"{name}'s pods: set them\n")


def _workload_of(workload: Workload, name: str) -> str:
    if workload.strategy != "recreate":
        return ""
    return (f"        workload: {{kind: Deployment, name: {workload.service}-{name}, path: {workload.application}/"
            f"kustomization.yaml}}   # its Deployment and the file with its replicas: set them\n")


def _handoff(workload: Workload) -> str:
    if workload.strategy != "recreate":
        return ""
    source, target = workload.backends
    return f"""    handoff:
      strategy: recreate   # {target} cannot start beside {source}: {source}'s card is freed first (docs/capacity.md)
      maxGap: 45m          # the name may go unanswered this long: {target}'s startup, its proof, ArgoCD's sync
    # commit {target} stopped (its replicas 0 in that file) before `target: {target}`
"""


def _plan(workload: Workload) -> str:
    source, target = workload.backends
    backends = "".join(f"""      {name}:
{_selector(workload, name)}        engine: {"vllm" if name == "vllm" else "candle-vllm" if name == "candle" else "vllm"}
        port: {workload.port}
{_workload_of(workload, name)}""" for name in (source, target))
    return f"""# The plan of {workload.application} (docs/plan.md, every key): a skeleton that reads. Set each backend's
# selector to its pods' labels and the names your clients send; `target: {target}` later starts the cutover.
apiVersion: v1
kind: ConfigMap
metadata:
  name: cutover-plan
  namespace: cutover
data:
  plan.yaml: |
    apiVersion: cutover/v1alpha1
    kind: CutoverPlan
    metadata:
      name: {workload.application}
    service:
      namespace: {workload.namespace}
      name: {workload.service}
    backends:
{backends}    target: {source}
    verify:
      servedNames: [{workload.service}]   # the model names clients send
      maxWait: 30m
    git:
      provider: github
      url: {workload.repository}
      branch: main
      path: {workload.application}/service.yaml   # the file that holds the Service
      document: {{kind: Service, name: {workload.service}}}
      tokenFile: /var/run/secrets/cutover/git/token
    argocd:
      application: {workload.application}
      namespace: argocd
{_handoff(workload)}"""


def _project(workload: Workload) -> str:
    destinations = "".join(f"    - server: https://kubernetes.default.svc\n      namespace: {namespace}\n"
                           for namespace in (workload.namespace, workload.credentials))
    return _project_of(workload, f"""# The project of the Application {workload.application}: its namespace, and \
{workload.credentials}
# for its hooks and plan (docs/install.md, step 5). Apply it as ArgoCD's administrator.
""", destinations, ("batch", "Job"), ("batch", "CronJob"))


def _project_of(workload: Workload, comment: str, destinations: str, *kinds: tuple[str, str]) -> str:
    """An AppProject for the workload's repository and these destinations: the kinds its render holds and nothing
    else (the workload's engines and Service, its plan, then `kinds`)."""
    whitelist = "".join(f"    - {{group: {group}, kind: {kind}}}\n" for group, kind in (
        ("apps", "Deployment"), ('""', "Service"), ('""', "ConfigMap"), *kinds))
    return f"""{comment}apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: {workload.application}
  namespace: argocd
spec:
  sourceRepos:
    - {workload.repository}
  destinations:
{destinations}  clusterResourceWhitelist: []
  namespaceResourceWhitelist:
{whitelist}"""


def _fleet_plan(workload: Workload) -> str:
    """One plan for every cluster of the fleet: no target (the fleet's commit chooses the backend), no rollback of
    cutover's (the revert is the rollback), no argocd.application (each hook finds its own in ArgoCD's tracking)."""
    single = _plan(workload)
    head, _, _ = single.partition("    apiVersion: cutover/v1alpha1\n")
    body = single[len(head):].replace(f"    target: {workload.backends[0]}\n", "")
    body = body.replace("    kind: CutoverPlan\n", "    kind: CutoverPlan\n    mode: fleet\n", 1)
    body = body.replace(f"    argocd:\n      application: {workload.application}\n      namespace: argocd\n",
                        "    argocd:\n      namespace: argocd\n"
                        "      server: https://argocd.example.invalid   # yours: the hub's API\n"
                        "      tokenFile: /var/run/secrets/cutover/argocd/token\n")
    head = (f"# The plan of the fleet {workload.application} (docs/fleet.md), one for every cluster: set each "
            f"backend's selector\n# and the names your clients send; the fleet's commit of the Service's selector "
            f"starts a handoff.\n") + head.split("\n", 2)[2]
    return head + body


def _mark(workload: Workload) -> str:
    return f"""# The mark of a verified switch (docs/fleet.md): its labels are the Service's selector, so that every
# selector change leaves the Application OutOfSync until the verifier passed and the mark's wave applied it. Name
# this directory under components: in the kustomization beside the Service (the replacement reads the Service).
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
replacements:
  - source: {{kind: Service, name: {workload.service}, fieldPath: spec.selector}}
    targets:
      - select: {{kind: ConfigMap, name: cutover-verified-{workload.application}}}
        fieldPaths: [metadata.labels]
        options: {{create: true}}
"""


def _applicationset(workload: Workload) -> str:
    rings = list(dict.fromkeys(ring for _, ring in workload.fleet))
    elements = "".join(f"          - {{cluster: {cluster}, ring: {ring}}}\n" for cluster, ring in workload.fleet)
    steps = "".join(f"        - matchExpressions: [{{key: ring, operator: In, values: [{ring}]}}]\n"
                    for ring in rings)
    return f"""# One Application per cluster of the fleet {workload.application}, synced ring by ring (RollingSync,
# ArgoCD 3.3+ with --enable-progressive-syncs): a step moves on when every Application of the steps before it
# is Healthy and Synced, which a cluster whose switch cutover did not verify never is (docs/fleet.md). Apply it
# on the hub.
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: {workload.application}
  namespace: argocd
spec:
  goTemplate: true
  goTemplateOptions: ["missingkey=error"]
  generators:
    - list:
        elements:
{elements}  strategy:
    type: RollingSync
    rollingSync:
      steps:
{steps}  template:
    metadata:
      name: "{workload.application}-{{{{.cluster}}}}"
      labels: {{ring: "{{{{.ring}}}}"}}
    spec:
      project: {workload.application}   # appproject.yaml
      source:
        repoURL: {workload.repository}
        targetRevision: main
        path: {workload.application}   # the kustomization beside the Service and the engines: hooks, mark/
      destination:
        name: "{{{{.cluster}}}}"
        namespace: {workload.namespace}
      syncPolicy:
        retry: {{limit: 0}}   # a refused gate is the step's verdict, not something to try again
"""


def _fleet_project(workload: Workload) -> str:
    destinations = "".join(f"    - {{name: {cluster}, namespace: {namespace}}}\n" for cluster, _ in workload.fleet
                           for namespace in (workload.namespace, workload.credentials))
    return _project_of(workload, f"""# The project of the fleet {workload.application}'s Applications: the workloads' \
repository, each
# cluster's {workload.namespace} and, for the hooks and the plan, {workload.credentials}; no CronJob (a fleet's
# cluster writes nothing). Apply it on the hub as ArgoCD's administrator.
""", destinations, ("networking.k8s.io", "NetworkPolicy"), ("batch", "Job"))
