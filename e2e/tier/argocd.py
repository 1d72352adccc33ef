"""The tier's ArgoCD: the pinned release's application-controller, repo-server, applicationset-controller and
argocd-server, run as processes beside the control plane the way ArgoCD's own local development runs them (its
Procfile: `ARGOCD_FAKE_IN_CLUSTER=true`, one multi-call binary chosen by `ARGOCD_BINARY_NAME`), with Debian's
redis-server. Its CRDs and config maps are the ones its install declares (`manifests/crds`, `manifests/base/config`
of the same module); the repo-server finds git, kustomize and helm on its PATH, and trusts the tier's Git host
through its TLS data directory, as argocd-tls-certs-cm mounted there would.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import kubernetes
import trustme

from tier import cluster, controlplane

REDIS = 6379
REPO_SERVER = 8081
# the commit-server: what pushes the Source Hydrator's rendered manifests (ArgoCD's install-with-hydrator.yaml)
COMMIT_SERVER = 8086
# argocd-server's API, at an address of its own in the namespace, over TLS with a certificate of the tier's CA
# (its Secret argocd-server-tls, as a user gives it one): what `argocd.server` mode talks to
SERVER = ("10.250.0.30", 8095)  # not 8080: it listens on every address, and the engines serve 8080 at the pod IPs
SERVER_URL = f"https://{SERVER[0]}:{SERVER[1]}"
ACCOUNT = "cutover"  # the ArgoCD account of argocd.server mode: an API key, `applications, get` on one Application
NAMESPACE = "argocd"
# ArgoCD's clock at production's proportions, scaled down as the startup timelines are (docs/testing.md): its
# periodic look every `timeout.reconciliation` (120 s by default) plus up to `timeout.reconciliation.jitter` (60 s),
# and the repo-server's cached resolution of a branch (`--revision-cache-expiration`, 3 min by default), 7.5 times
# shorter each: 16 s, 8 s, 24 s (the controller reads the jitter in whole seconds). A timing taken with the cache
# equal to the period and no jitter (what the tier ran before) is not one of production's: a hook's commit waited
# one period there and two or more under the defaults.
RECONCILIATION = "16s"
JITTER = "8s"
REVISION_CACHE = "24s"
COMMON = ("--redis", f"127.0.0.1:{REDIS}", "--loglevel", "info")  # every ArgoCD component's


# Run a command with `private` bound over /tmp, and what it needs of the system's /tmp bound back where it was (the
# tier's own directory: its kubeconfig, certificates, scripts; and the binaries' cache and $HOME where a machine
# keeps them under /tmp): in a mount namespace of its own (unshare --mount). `keep`: those paths, os.pathsep-joined.
_OWN_TMP = """
import os, subprocess, sys
private, keep, *argv = sys.argv[1:]
held = [(path, os.open(path, os.O_PATH)) for path in keep.split(os.pathsep)]
subprocess.run(["mount", "--bind", private, "/tmp"], check=True)
for path, fd in held:
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{fd}", path], check=True)
os.execv(argv[0], argv)
"""


def module_dir(version: str) -> Path:
    """Where the Go module cache holds the argo-cd module the build step compiled (its manifests/)."""
    found = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", f"github.com/argoproj/argo-cd/v3@{version}"],
                           capture_output=True, text=True, check=False, cwd="/")
    if found.returncode != 0 or not found.stdout.strip():
        raise RuntimeError(f"argo-cd {version} is not in the Go module cache: run `e2e/build.sh argocd` "
                           f"({found.stderr.strip()[-200:]})")
    return Path(found.stdout.strip().splitlines()[-1])


class ArgoCD:
    def __init__(self, plane: controlplane.ControlPlane, version: str, git_host: str, ca: trustme.CA) -> None:
        self.plane, self.version, self.ca = plane, version, ca
        self._token: str | None = None  # the `cutover` account's API key, once made
        self.dir = plane.dir / "argocd"
        self.tls = self.dir / "tls"
        self.tls.mkdir(parents=True, exist_ok=True)
        (self.dir / "ssh").mkdir(exist_ok=True)
        # argocd-tls-certs-cm's form: one file per server name, holding the CA its certificates chain to
        self.ca_file = self.tls / git_host
        ca.cert_pem.write_to_path(str(self.ca_file))
        self.manifests = module_dir(version) / "manifests"
        # What ArgoCD's image puts beside the binary (its Dockerfile: COPY hack/gpg-wrapper.sh
        # hack/git-verify-wrapper.sh /usr/local/bin/): from v3.5 the repo-server runs git-verify-wrapper.sh on every
        # manifest generation, GPG or not, and answers "permission denied" when it is missing.
        self.scripts = self.dir / "bin"
        self.scripts.mkdir(parents=True, exist_ok=True)
        for script in ("gpg-wrapper.sh", "git-verify-wrapper.sh"):
            source = module_dir(version) / "hack" / script
            if source.exists():
                (self.scripts / script).write_bytes(source.read_bytes())
                (self.scripts / script).chmod(0o755)
        # the admin's kubeconfig with ArgoCD's namespace as its context's: where every component looks for its
        # Applications, config maps and Secrets (the repo-server takes no --namespace)
        self.kubeconfig = self.dir / "kubeconfig"
        context = "context: {cluster: tier, user: admin"
        self.kubeconfig.write_text(plane.kubeconfig.read_text().replace(f"{context}}}",
                                                                        f"{context}, namespace: {NAMESPACE}}}"))

    # --- install, as its manifests declare it --------------------------------------------------------------------

    def install(self, tier: cluster.Tier) -> None:
        kubectl = tier.kubectl
        kubectl("apply", "--server-side", "-k", str(self.manifests / "crds"))
        tier.wait_established("applications.argoproj.io", "appprojects.argoproj.io", "applicationsets.argoproj.io")
        kubectl("apply", "-n", NAMESPACE, "-k", str(self.manifests / "base" / "config"))
        settings = {"data": {"timeout.reconciliation": RECONCILIATION, "timeout.reconciliation.jitter": JITTER,
                             f"accounts.{ACCOUNT}": "apiKey"}}
        kubectl("-n", NAMESPACE, "patch", "configmap", "argocd-cm", "--type", "merge", "-p", json.dumps(settings))
        # the account may read the workloads' Applications (their manifests included) and nothing else
        policy = {"data": {"policy.csv": "".join(f"p, {ACCOUNT}, applications, get, {project}/{app}, allow\n"
                                                 for project, app in (("llm-serving", "llm-serving"),
                                                                      ("chat-helm", "chat-helm")))}}
        kubectl("-n", NAMESPACE, "patch", "configmap", "argocd-rbac-cm", "--type", "merge", "-p", json.dumps(policy))
        served = self.ca.issue_cert(SERVER[0])
        (self.dir / "server.crt").write_bytes(b"".join(blob.bytes() for blob in served.cert_chain_pems))
        served.private_key_pem.write_to_path(str(self.dir / "server.key"))
        kubectl("-n", NAMESPACE, "create", "secret", "tls", "argocd-server-tls", f"--cert={self.dir / 'server.crt'}",
                f"--key={self.dir / 'server.key'}")

    # --- the processes -------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._run("redis-server", ["redis-server", "--bind", "127.0.0.1", "--port", str(REDIS), "--save", "",
                                   "--appendonly", "no"], binary=None)
        self._wait_port("127.0.0.1", REDIS)
        self._run("argocd-repo-server", ["--port", str(REPO_SERVER), "--metrics-port", "8084",
                                         "--revision-cache-expiration", REVISION_CACHE, *COMMON])
        self._wait_port("127.0.0.1", REPO_SERVER)
        self._run("argocd-commit-server", ["--address", "127.0.0.1", "--port", str(COMMIT_SERVER),
                                           "--metrics-address", "127.0.0.1", "--metrics-port", "8087",
                                           "--loglevel", "info"])
        self._wait_port("127.0.0.1", COMMIT_SERVER)
        self._start_controller()
        self._run("argocd-applicationset-controller", [
            "--loglevel", "info", "--argocd-repo-server", f"127.0.0.1:{REPO_SERVER}",
            "--enable-progressive-syncs", "--metrics-addr", "127.0.0.1:12345", "--probe-addr", "127.0.0.1:12346",
            "--webhook-addr", "127.0.0.1:7000"])
        # on every address of the namespace: its REST gateway dials its own gRPC at localhost:<port> (a 503 for
        # every call when it listens on one address only, found here)
        self._run("argocd-server", [*COMMON, "--repo-server", f"127.0.0.1:{REPO_SERVER}", "--port", str(SERVER[1]),
                                    "--metrics-port", "8083"])
        self._wait_port(*SERVER)

    def _start_controller(self, sync_timeout: int = 0, *, fixed_delay: bool = False) -> controlplane.Component:
        # ArgoCD's own self-heal backoff (its first attempt at once), as a cluster runs it by default. With
        # `fixed_delay` (docs/install.md's two argocd-cmd-params-cm keys, for `refresh: always`): a hop committed while
        # its sync runs and compared by ArgoCD before that sync ended is then synced by the comparison with Git the
        # delay asks for, hooks and all, instead of by an immediate hook-less self-heal (argo-cd#27875).
        delay = ["--self-heal-timeout-seconds", "2", "--self-heal-backoff-timeout-seconds", "0"] if fixed_delay else []
        return self._run("argocd-application-controller", [
            *COMMON, "--repo-server", f"127.0.0.1:{REPO_SERVER}", "--metrics-port", "8082",
            "--commit-server", f"127.0.0.1:{COMMIT_SERVER}", *delay, "--sync-timeout", str(sync_timeout)])

    @contextlib.contextmanager
    def sync_timeout(self, seconds: int) -> Iterator[None]:
        """The application-controller restarted with `--sync-timeout` (argocd-cmd-params-cm's
        controller.sync.timeout.seconds), as an operator sets it, and back to none (its default) afterwards."""
        self._restart_controller(seconds)
        try:
            yield
        finally:
            self._restart_controller(0)

    @contextlib.contextmanager
    def fixed_self_heal_delay(self) -> Iterator[None]:
        """The application-controller restarted with the fixed self-heal delay (docs/install.md's two
        argocd-cmd-params-cm keys, what `refresh: always` needs), and back to ArgoCD's own backoff after."""
        self._restart_controller(0, fixed_delay=True)
        try:
            yield
        finally:
            self._restart_controller(0)

    def _restart_controller(self, sync_timeout: int, *, fixed_delay: bool = False) -> None:
        running = next(c for c in self.plane.components if c.name == "argocd-application-controller")
        running.stop()
        self.plane.components.remove(running)
        self._start_controller(sync_timeout, fixed_delay=fixed_delay)

    def _run(self, name: str, args: list[str], binary: str | None = "argocd") -> controlplane.Component:
        # The repo-server clones into os.TempDir()/_argocd-repo and, on start, adopts the clones it finds there by
        # their remote URL (reposerver/server.go, repository.Service.Init): with the system's /tmp, every tier run
        # fetched into the previous run's clone of a repository with another history at the same URL, and one run
        # never got past "fatal: expected 'acknowledgments'". A temporary directory of the run's own.
        tmp = self.dir / "tmp"
        tmp.mkdir(exist_ok=True)
        env = {**os.environ, "TMPDIR": str(tmp), "ARGOCD_FAKE_IN_CLUSTER": "true", "KUBECONFIG": str(self.kubeconfig),
               "ARGOCD_BINARY_NAME": name, "ARGOCD_TLS_DATA_PATH": str(self.tls),
               "ARGOCD_SSH_DATA_PATH": str(self.dir / "ssh"), "ARGOCD_GPG_ENABLED": "false",
               "HOME": str(self.dir), "PATH": f"{self.plane.bin}:{self.scripts}:{os.environ['PATH']}",
               # what ArgoCD's Deployments read from argocd-cm's timeout.reconciliation (valueFrom a key ref)
               "ARGOCD_RECONCILIATION_TIMEOUT": RECONCILIATION, "ARGOCD_RECONCILIATION_JITTER": JITTER,
               # argocd-cmd-params-cm's hydrator.enabled, read by the controller and the server (the Source
               # Hydrator is off by default; scenario h turns an Application to it)
               "ARGOCD_HYDRATOR_ENABLED": "true",
               # The repo-server's git credential socket, /tmp/reposerver-ask-pass.sock unless set (util/askpass):
               # a second tier on the machine took it over, and every fetch of this one failed with "unknown
               # nonce" (seen here). The commit-server's is fixed (util/askpass/common.go,
               # /tmp/commit-server-ask-pass.sock): below, a /tmp of its own.
               "ARGOCD_ASK_PASS_SOCK": str(self.dir / "askpass.sock")}
        argv = [str(self.plane.bin / binary), *args] if binary else args
        if name == "argocd-commit-server":
            # Two tiers side by side (CI's two shards) each start a commit-server, and the one that starts last
            # takes the fixed socket over: the other's every hydration failed with "unknown nonce" for the whole run
            # (seen here; CI passed when the hydrator's shard started last). Its own mount namespace, with a /tmp of
            # this tier's bound over the system's, as a pod of its own would have.
            private = self.dir / "commit-server-tmp"
            private.mkdir(exist_ok=True)
            keep = [self.plane.dir, *(path for path in (self.plane.bin, Path.home())
                                      if path.resolve().is_relative_to("/tmp"))]  # noqa: S108 -- the bind's
            argv = ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _OWN_TMP, str(private),
                    os.pathsep.join(str(path) for path in keep), *argv]
        component = controlplane.Component(name, argv, self.plane.dir / f"{name}.log")
        component.start(env)
        self.plane.components.append(component)  # stopped with the control plane, checked with it
        return component

    def account_token(self) -> str:
        """An API key of the `cutover` account, made as an admin makes one (`argocd account generate-token`):
        a session with the initial admin password, then the account's token. Made once: each workload's
        `cutover-argocd` gets the same key (ArgoCD refuses a second token of the same id)."""
        if self._token is None:
            with self._as_admin() as client:
                made = client.post(f"/api/v1/account/{ACCOUNT}/token", json={"name": ACCOUNT, "id": "e2e"})
                made.raise_for_status()
                self._token = str(made.json()["token"])
        return self._token

    def terminate(self, app: str) -> bool:
        """What `argocd app terminate-op` asks of argocd-server (`DELETE .../operation`): the controller stops the
        running operation and, from 3.4 on, deletes its running hook Jobs. False when no operation was running any
        more (argocd-server answers 400: the operation ended before the request reached it)."""
        with self._as_admin() as client:
            # argocd-server refuses a write without a JSON content type (415), its guard against cross-site requests
            answer = client.delete(f"/api/v1/applications/{app}/operation", params={"appNamespace": NAMESPACE},
                                   headers={"Content-Type": "application/json"})
            if answer.status_code == 400 and "no operation is in progress" in answer.text.lower():
                return False
            answer.raise_for_status()
            return True

    @contextlib.contextmanager
    def _as_admin(self) -> Iterator[httpx.Client]:
        """A client of argocd-server with a session of the initial admin."""
        secret = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(self.plane.kubeconfig)))
        found = secret.read_namespaced_secret("argocd-initial-admin-secret", NAMESPACE)
        password = base64.b64decode(found.data["password"]).decode()
        verify = ssl.create_default_context(cafile=str(self.ca_file))  # the one CA of the tier signs both
        with httpx.Client(base_url=SERVER_URL, verify=verify, timeout=30) as client:
            session = client.post("/api/v1/session", json={"username": "admin", "password": password})
            session.raise_for_status()
            client.headers["Authorization"] = f"Bearer {session.json()['token']}"
            yield client

    def _wait_port(self, host: str, port: int) -> None:
        deadline = time.monotonic() + controlplane.STARTUP
        while True:
            self.plane.check_alive()
            try:
                socket.create_connection((host, port), timeout=1).close()
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing listens on {host}:{port} after {controlplane.STARTUP:.0f} s "
                                       f"(logs: {self.plane.dir})") from None
                time.sleep(0.2)
            else:
                return

