"""The tier as the scenarios use it: the control plane with two kwok nodes, the repository's manifests applied
with kubectl as a user would, the shim and the engine doubles, and what the scenarios read back (Jobs, pods,
the audit log)."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import trustme

from tier import controlplane
from tier.engines import EnginePods
from tier.githost import REPO_URL, TOKEN, TierGitHost
from tier.realvllm import RealVllm
from tier.shim import Shim

ROOT = Path(__file__).resolve().parents[2]
# what cutover's token may write in the tier's repository (the Git Secret's `paths`, docs/install.md): the workloads'
# files, never the path of cutover's own Application
# files, never the path of cutover's own Application; one Secret per workload, in its credentials namespace
WRITABLE = {"cutover": "manifests/examples/llm-serving/workload/*",
            "cutover-chat-prod": "manifests/examples/kustomize-overlay/**",
            "cutover-chat-helm": "manifests/examples/helm-values/*"}
FIXTURES = ROOT / "e2e" / "fixtures"

SA = "system:serviceaccount:cutover:cutover"
GIT_HOST_IP = "10.250.0.20"


@dataclasses.dataclass
class JobResult:
    name: str
    succeeded: bool
    condition: str  # Complete, Failed (with its reason), or what it is still doing
    exit_code: int | None
    message: str  # the container's termination message
    log: str


class Tier:
    def __init__(self, plane: controlplane.ControlPlane, cutover: Path) -> None:
        self.plane = plane
        self.dir = plane.dir
        self.api = kubernetes.config.new_client_from_config(str(plane.kubeconfig))
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.batch = kubernetes.client.BatchV1Api(self.api)
        self.shim = Shim(self.api, plane.dir, cutover)
        self.engines = EnginePods(kubernetes.config.new_client_from_config(str(plane.kubeconfig)), "llm-serving")
        self.git_ca = trustme.CA(organization_name="cutover e2e git host")
        self.git = TierGitHost(ROOT, plane.dir, self.git_ca, bin_dir=plane.bin)

    # --- kubectl, as a user runs it ------------------------------------------------------------------------------

    def kubectl(self, *args: str, check: bool = True, as_sa: bool = False) -> subprocess.CompletedProcess[str]:
        argv = [str(self.plane.bin / "kubectl"), "--kubeconfig", str(self.plane.kubeconfig)]
        if as_sa:
            argv += ["--as", SA]
        done = subprocess.run([*argv, *args], capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def grant_refresh(self, application: str, *, namespace: str = "cutover", verbs: str = "get,patch") -> None:
        """docs/install.md, step 2: the administrator's Role on one Application in ArgoCD's namespace (its refresh
        and notice; `get` alone with argocd.server) for the ServiceAccount of the workload's credentials namespace,
        never part of cutover's Application. Run again: no change."""
        name = f"cutover-refresh-{application}"
        for made in (["role", name, f"--verb={verbs}", "--resource=applications.argoproj.io",
                      f"--resource-name={application}"],
                     ["rolebinding", name, f"--role={name}", f"--serviceaccount={namespace}:cutover"]):
            done = self.kubectl("-n", "argocd", "create", *made, check=False)
            assert done.returncode == 0 or "AlreadyExists" in done.stderr, done.stderr

    def apply(self, path: Path | str, *, server_side: bool = False) -> None:
        path = Path(path)
        flag = "-k" if (path / "kustomization.yaml").exists() else "-f"
        self.kubectl("apply", *(["--server-side"] if server_side else []), flag, str(path))

    # --- bring-up ------------------------------------------------------------------------------------------------

    def add_nodes(self) -> None:
        for name, ip, gpus in controlplane.NODES:
            self.add_node(name, ip, gpus, labels={"nvidia.com/gpu.present": "true"} if gpus else {})
        self.wait("both nodes Ready", lambda: all(_ready(n) for n in self.core.list_node().items)
                  and len(self.core.list_node().items) == len(controlplane.NODES))

    def add_node(self, name: str, ip: str, gpus: int, *, labels: dict[str, str],
                 taints: tuple[dict[str, str], ...] = ()) -> None:
        """A kwok node (kwok plays its kubelet) with `gpus` cards; a scenario may add one of its own (the fleet's
        full ring), waiting for it with `node_ready`."""
        capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        self.core.create_node({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok", **labels}},
            **({"spec": {"taints": list(taints)}} if taints else {}),
            "status": {"capacity": capacity, "allocatable": capacity,
                       "addresses": [{"type": "InternalIP", "address": ip}]},
        })

    def node_ready(self, name: str) -> bool:
        return _ready(self.core.read_node(name))

    def install(self) -> None:
        """The example as its docs install it: ArgoCD's namespace and kinds first (the Role there, the
        Applications cutover refreshes), then the cutover Application's contents, the out-of-band Secret, then
        the workload's namespace and contents."""
        # manifests/workload puts a Role in `llm-serving`, which exists before it applies (docs/install.md, step 2),
        # as does ArgoCD's namespace, where an administrator grants the refresh
        self.kubectl("create", "namespace", "argocd")
        self.kubectl("create", "namespace", "llm-serving")
        for crd in ("application", "appproject"):  # ArgoCD 3.6's own CRDs, as its install declares them
            path = self.dir / f"argocd-{crd}-crd.yaml"
            path.write_bytes(gzip.decompress((ROOT / "tests" / "openapi" / f"argocd-3.6.0-{crd}-crd.yaml.gz")
                                             .read_bytes()))
            self.kubectl("apply", "--server-side", "-f", str(path))
        self.wait_established("applications.argoproj.io", "appprojects.argoproj.io")
        # after the CRDs: `kubectl create role --resource=applications.argoproj.io` asks discovery for the kind (it
        # passed before them only where kubectl's discovery cache remembered an earlier run)
        self.grant_refresh("llm-serving")
        self.grant_refresh("chat-prod", namespace="cutover-chat-prod")  # a further workload's, its own identity
        example = ROOT / "manifests" / "examples" / "llm-serving"
        self.apply(example / "appproject.yaml")
        self.apply(example / "applications.yaml")
        self.apply(FIXTURES / "cutover")
        self.git_secret("cutover")
        self.apply(FIXTURES / "llm-serving")
        self.wait("kube-root-ca.crt in cutover", lambda: self._exists(self.core.read_namespaced_config_map,
                                                                      "kube-root-ca.crt", "cutover"))
        self.wait("the ServiceAccount cutover", lambda: self._exists(self.core.read_namespaced_service_account,
                                                                     "cutover", "cutover"))

    def git_secret(self, namespace: str) -> None:
        """The workload's `cutover-git` in its credentials namespace (docs/install.md, step 2): the token, where it
        may go (the repository; that workload's files alone), the Git host's CA."""
        self.kubectl("create", "secret", "generic", "cutover-git", "-n", namespace,
                     f"--from-literal=token={TOKEN}", f"--from-literal=repository={REPO_URL}",
                     f"--from-literal=paths={WRITABLE[namespace]}", f"--from-file=ca.crt={self._git_ca_file()}")

    def wait_established(self, *names: str) -> None:
        crds = kubernetes.client.ApiextensionsV1Api(self.api)
        for name in names:
            # polled, not `kubectl wait`: that fails while a new CRD has no conditions at all yet
            self.wait(f"the CRD {name} established", lambda name=name: any(
                c.type == "Established" and c.status == "True"
                for c in crds.read_custom_resource_definition(name).status.conditions or []))

    def _git_ca_file(self) -> Path:
        path = self.dir / "git-ca.crt"
        self.git_ca.cert_pem.write_to_path(str(path))
        return path

    @staticmethod
    def _exists(read: Any, name: str, namespace: str) -> bool:
        try:
            read(name, namespace)
        except kubernetes.client.ApiException:
            return False
        return True

    # --- Jobs ----------------------------------------------------------------------------------------------------

    def job_from_cronjob(self, cronjob: str, name: str, args: list[str] | None = None,
                         plan: str = "cutover-plan", *, kept: bool = False, namespace: str = "cutover") -> None:
        """`kubectl create job --from=cronjob/…`, with other args or another plan ConfigMap when a scenario runs
        another command (the Job is otherwise the CronJob's own: ServiceAccount, volumes, podFailurePolicy).
        `kept`: not owned by the CronJob, whose history limit (one successful Job) deletes an owned Job once a
        scheduled run has ended after it: a scenario that reads the Job later keeps it."""
        if args is None and plan == "cutover-plan" and not kept:
            self.kubectl("-n", namespace, "create", "job", f"--from=cronjob/{cronjob}", name)
            return
        template = self.batch.read_namespaced_cron_job(cronjob, namespace).spec.job_template
        body = self.api.sanitize_for_serialization(template)
        pod = body["spec"]["template"]["spec"]
        if args is not None:
            pod["containers"][0]["args"] = args
        for volume in pod["volumes"]:
            if volume["name"] == "plan":
                volume["configMap"]["name"] = plan
        self.batch.create_namespaced_job(namespace, {"apiVersion": "batch/v1", "kind": "Job",
                                                     "metadata": {"name": name}, "spec": body["spec"]})

    def finished(self, name: str, timeout: float = 120.0, *, namespace: str = "cutover") -> JobResult:
        def done() -> Any:
            job = self.batch.read_namespaced_job(name, namespace)
            for c in job.status.conditions or []:
                if c.type in ("Complete", "Failed") and c.status == "True":
                    return job
            return None

        job = self.wait(f"Job {name} to finish", done, timeout)
        conditions = [c for c in job.status.conditions if c.status == "True" and c.type in ("Complete", "Failed")]
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items
        terminated = [p.status.container_statuses[0].state.terminated for p in pods
                      if p.status.container_statuses and p.status.container_statuses[0].state.terminated]
        last = max(terminated, key=lambda t: t.finished_at) if terminated else None
        return JobResult(
            name=name, succeeded=conditions[0].type == "Complete",
            condition=f"{conditions[0].type} ({conditions[0].reason})" if conditions[0].reason else
            conditions[0].type,
            exit_code=last.exit_code if last else None, message=(last.message or "") if last else "",
            log=self.job_log(name, namespace=namespace))

    def job_log(self, name: str, *, namespace: str = "cutover") -> str:
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items
        return "\n".join(self.shim.log_of(namespace, p.metadata.name) for p in pods)

    # --- what the apiserver recorded -----------------------------------------------------------------------------

    def audit(self, user: str = SA) -> list[dict[str, Any]]:
        events = []
        for line in self.plane.audit_log.read_text().splitlines():
            event = json.loads(line)
            if event.get("user", {}).get("username") == user:
                events.append(event)
        return events

    # --- helpers -------------------------------------------------------------------------------------------------

    def wait(self, what: str, check: Any, timeout: float = 60.0, every: float = 0.25) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            self.plane.check_alive()
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (logs: {self.dir})")
            time.sleep(every)


@contextlib.contextmanager
def started(bin_dir: Path, run_dir: Path, *, cutover: Path, kind: type[Tier] = Tier,
            real: RealVllm | None = None) -> Iterator[Tier]:
    """The control plane with its nodes, the shim, the engines (the real vLLM's forwarders and the doubles) and the
    Git host; nothing installed."""
    with controlplane.running(bin_dir, run_dir, Path(__file__).with_name("stages.yaml")) as plane:
        tier = kind(plane, cutover)
        tier.add_nodes()
        tier.shim.start()
        if real is not None:
            real.wait()  # started with the session: its minute or two ran beside the control plane's start
            tier.engines.real = real
        tier.engines.start()
        tier.git.start(tier.engines.loop)
        try:
            yield tier
        finally:
            tier.git.stop(tier.engines.loop)
            tier.engines.stop()
            tier.shim.stop()


def _ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
