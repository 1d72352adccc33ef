"""The real control plane of the tier: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.

Every process listens inside the tier's network namespace (`e2e/netns.sh` made it: loopback, with the pod,
Service and node ranges local to it), so nothing leaves it. The apiserver serves on 0.0.0.0:443 there, which is
also the `kubernetes` Service's ClusterIP (10.96.0.1, local to the namespace): the in-cluster path of a pod the
shim runs reaches it exactly as a pod's would, through KUBERNETES_SERVICE_HOST, its token and the root CA.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SERVICE_RANGE = "10.96.0.0/16"
POD_RANGE = "10.244.0.0/16"
APISERVER_IP = "10.250.0.1"  # the control plane's "host" address; the kubernetes Service's endpoint
SERVICE_IP = "10.96.0.1"  # the kubernetes Service's ClusterIP: the first address of SERVICE_RANGE
NODES = (  # (name, IP, GPUs): one GPU node, one without
    ("kwok-gpu-0", "10.250.0.10", 2),
    ("kwok-cpu-0", "10.250.0.11", 0),
)
STARTUP = 60.0  # seconds a component may take to answer its health check


@dataclasses.dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                            env=env, start_new_session=True)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            tail = self.log.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n" + "\n".join(tail))


class PKI:
    """The cluster's CA, the apiserver's serving certificate, the admin client and the ServiceAccount key."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name="cutover e2e")
        self.ca.cert_pem.write_to_path(str(self.path("ca.crt")))
        serving = self.ca.issue_cert("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                     "kubernetes.default.svc.cluster.local", "localhost", "127.0.0.1",
                                     APISERVER_IP, SERVICE_IP, common_name="kube-apiserver")
        serving.cert_chain_pems[0].write_to_path(str(self.path("apiserver.crt")))
        serving.private_key_pem.write_to_path(str(self.path("apiserver.key")))
        admin = self.ca.issue_cert("admin", common_name="admin", organization_name="system:masters")
        admin.cert_chain_pems[0].write_to_path(str(self.path("admin.crt")))
        admin.private_key_pem.write_to_path(str(self.path("admin.key")))
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.path("sa.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.TraditionalOpenSSL,
                                                          serialization.NoEncryption()))
        self.path("sa.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def path(self, name: str) -> Path:
        return self.dir / name

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.path("ca.crt")))
        context.load_cert_chain(str(self.path("admin.crt")), str(self.path("admin.key")))
        return context


# Everything a request does, at the Metadata level (who, verb, resource, status), and nothing at all about
# the components' own chatter, so that a scenario counts exactly the requests of cutover's ServiceAccount.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/version"]
  - level: Metadata
"""


class ControlPlane:
    """Starts the components in order, each after the one before it answers; stops them in reverse."""

    def __init__(self, bin_dir: Path, run_dir: Path, stages: Path) -> None:
        self.bin, self.dir, self.stages = bin_dir, run_dir, stages
        self.pki = PKI(run_dir / "pki")
        self.kubeconfig = run_dir / "admin.kubeconfig"
        self.audit_log = run_dir / "audit.log"
        self.components: list[Component] = []
        self.restarts: list[tuple[datetime, datetime]] = []  # when the apiserver was down or not yet ready

    def start(self) -> None:
        self.kubeconfig.write_text(self._kubeconfig())
        (self.dir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        self._run("etcd", self._etcd())
        self._wait_http("etcd", "http://127.0.0.1:2379/health")
        self._run("kube-apiserver", self._apiserver())
        self._wait_http("kube-apiserver", f"https://{APISERVER_IP}/readyz", self.pki.client_context())
        self._run("kube-controller-manager", self._controller_manager())
        self._run("kube-scheduler", self._scheduler())
        self._run("kwok", self._kwok())
        self._run("kube-proxy", self._proxy())

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()

    @contextlib.contextmanager
    def stopped(self, name: str) -> Iterator[None]:
        """A component stopped for a while, as a crash-looping one is, and started again afterwards; not a crash of
        the tier meanwhile (check_alive does not look at it)."""
        component = next(c for c in self.components if c.name == name)
        component.stop()
        self.components.remove(component)
        try:
            yield
        finally:
            component.start()
            self.components.append(component)

    def restart_apiserver(self) -> None:
        """What an upgrade or a crash does to clients: every watch ends, every request in flight fails."""
        apiserver = next(c for c in self.components if c.name == "kube-apiserver")
        began = datetime.now(UTC)
        apiserver.stop()
        apiserver.start()
        self._wait_http("kube-apiserver", f"https://{APISERVER_IP}/readyz", self.pki.client_context())
        self.restarts.append((began, datetime.now(UTC)))

    def compact_etcd(self) -> int:
        """Compacts etcd at its current revision (etcd's JSON gateway): older resourceVersions are gone."""
        def call(path: str, body: dict[str, object]) -> dict[str, object]:
            request = urllib.request.Request(f"http://127.0.0.1:2379{path}", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
                return dict(json.load(answer))

        found = call("/v3/kv/range", {"key": base64.b64encode(b"/registry").decode()})
        revision = int(found["header"]["revision"])  # type: ignore[index]
        call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def check_alive(self) -> None:
        for component in self.components:
            component.check_alive()

    def _run(self, name: str, argv: list[str]) -> None:
        component = Component(name, argv, self.dir / f"{name}.log")
        component.start()
        self.components.append(component)

    def _wait_http(self, name: str, url: str, context: ssl.SSLContext | None = None) -> None:
        deadline = time.monotonic() + STARTUP
        while True:
            self.check_alive()
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2, context=context) as answer:  # noqa: S310
                if answer.status == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer {url} within {STARTUP:.0f} s (log: {self.dir})")
            time.sleep(0.2)

    def _bin(self, name: str) -> str:
        return str(self.bin / name)

    def _etcd(self) -> list[str]:
        return [self._bin("etcd"), "--data-dir", str(self.dir / "etcd"), "--name", "tier",
                "--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
                "--listen-peer-urls", "http://127.0.0.1:2380",
                "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                "--initial-cluster", "tier=http://127.0.0.1:2380", "--log-level", "warn",
                "--unsafe-no-fsync"]  # a throwaway store: fsync only slows the tier on a shared disk

    def _apiserver(self) -> list[str]:
        pki = self.pki.path
        return [self._bin("kube-apiserver"), "--etcd-servers", "http://127.0.0.1:2379",
                "--bind-address", "0.0.0.0", "--secure-port", "443",
                "--advertise-address", APISERVER_IP, "--service-cluster-ip-range", SERVICE_RANGE,
                "--tls-cert-file", str(pki("apiserver.crt")), "--tls-private-key-file", str(pki("apiserver.key")),
                "--client-ca-file", str(pki("ca.crt")),
                "--service-account-key-file", str(pki("sa.pub")),
                "--service-account-signing-key-file", str(pki("sa.key")),
                "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
                "--authorization-mode", "RBAC", "--allow-privileged",
                "--audit-policy-file", str(self.dir / "audit-policy.yaml"),
                "--audit-log-path", str(self.audit_log), "--audit-log-format", "json",
                "--audit-log-mode", "blocking"]  # every request in the log before its answer: counts are exact

    def _controller_manager(self) -> list[str]:
        pki = self.pki.path
        return [self._bin("kube-controller-manager"), "--kubeconfig", str(self.kubeconfig),
                "--service-account-private-key-file", str(pki("sa.key")), "--root-ca-file", str(pki("ca.crt")),
                "--use-service-account-credentials", "--leader-elect=false",
                "--bind-address", "127.0.0.1", "--secure-port", "10257",
                "--cluster-cidr", POD_RANGE, "--service-cluster-ip-range", SERVICE_RANGE,
                "--controllers", "*,-nodeipam,-cloud-node-lifecycle,-service,-route"]

    def _scheduler(self) -> list[str]:
        return [self._bin("kube-scheduler"), "--kubeconfig", str(self.kubeconfig), "--leader-elect=false",
                "--bind-address", "127.0.0.1", "--secure-port", "10259"]

    def _kwok(self) -> list[str]:
        return [self._bin("kwok"), "--kubeconfig", str(self.kubeconfig),
                "--config", str(self.bin / "kwok-node-stages.yaml"), "--config", str(self.stages),
                "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
                "--cidr", POD_RANGE, "--node-ip", APISERVER_IP, "--server-address", "127.0.0.1:10247",
                # the nodes' heartbeat: without a Lease renewed, the node lifecycle controller marks each node
                # NotReady after its 40 s grace, and every pod on it unready (seen before this flag)
                "--node-lease-duration-seconds", "40"]

    def _proxy(self) -> list[str]:
        """The real data plane: iptables rules in the namespace route each ClusterIP to the Ready endpoints. The
        node's address is given (kube-proxy waits 30 s for a kwok node's otherwise), and no --cluster-cidr: every
        client here is local, and masquerading local traffic to a local pod address breaks the connection."""
        return [self._bin("kube-proxy"), "--kubeconfig", str(self.kubeconfig), "--proxy-mode", "iptables",
                "--hostname-override", NODES[0][0], "--bind-address", NODES[0][1],
                "--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249",
                # conntrack's limits are the host's, not the namespace's to set
                "--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0s",
                "--conntrack-tcp-timeout-close-wait", "0s"]

    def _kubeconfig(self) -> str:
        pki = self.pki.path
        return f"""\
apiVersion: v1
kind: Config
clusters:
  - name: tier
    cluster: {{server: "https://{APISERVER_IP}", certificate-authority: "{pki('ca.crt')}"}}
users:
  - name: admin
    user: {{client-certificate: "{pki('admin.crt')}", client-key: "{pki('admin.key')}"}}
contexts:
  - name: tier
    context: {{cluster: tier, user: admin}}
current-context: tier
"""


@contextlib.contextmanager
def running(bin_dir: Path, run_dir: Path, stages: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(bin_dir, run_dir, stages)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
