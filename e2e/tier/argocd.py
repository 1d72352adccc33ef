"""The tier's ArgoCD: the pinned release's application-controller, repo-server, applicationset-controller and
argocd-server, run as processes beside the control plane the way ArgoCD's own local development runs them (its
Procfile: `ARGOCD_FAKE_IN_CLUSTER=true`, one multi-call binary chosen by `ARGOCD_BINARY_NAME`), with Debian's
redis-server. Its CRDs and config maps are the ones its install declares (`manifests/crds`, `manifests/base/config`
of the same module); the repo-server finds git, kustomize and helm on its PATH, and trusts the tier's Git host
through its TLS data directory, as argocd-tls-certs-cm mounted there would.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tier import cluster, controlplane

REDIS = 6379
REPO_SERVER = 8081
SERVER = 8080  # argocd-server's API and UI, plain HTTP inside the namespace (`--insecure`, as the Procfile runs it)
NAMESPACE = "argocd"
# ArgoCD polls each Application's repository every `timeout.reconciliation` (default 120 s, plus up to 60 s of
# jitter): scaled down, as the startup timelines are, so that the polling path can be timed against the refresh.
RECONCILIATION = "15s"


def module_dir(version: str) -> Path:
    """Where the Go module cache holds the argo-cd module the build step compiled (its manifests/)."""
    found = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", f"github.com/argoproj/argo-cd/v3@{version}"],
                           capture_output=True, text=True, check=False, cwd="/")
    if found.returncode != 0 or not found.stdout.strip():
        raise RuntimeError(f"argo-cd {version} is not in the Go module cache: run `e2e/build.sh argocd` "
                           f"({found.stderr.strip()[-200:]})")
    return Path(found.stdout.strip().splitlines()[-1])


class ArgoCD:
    def __init__(self, plane: controlplane.ControlPlane, version: str, git_host: str, git_ca: Path) -> None:
        self.plane, self.version = plane, version
        self.dir = plane.dir / "argocd"
        self.tls = self.dir / "tls"
        self.tls.mkdir(parents=True, exist_ok=True)
        (self.dir / "ssh").mkdir(exist_ok=True)
        # argocd-tls-certs-cm's form: one file per server name, holding the CA its certificates chain to
        shutil.copyfile(git_ca, self.tls / git_host)
        self.manifests = module_dir(version) / "manifests"
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
        settings = {"data": {"timeout.reconciliation": RECONCILIATION, "timeout.reconciliation.jitter": "0s"}}
        kubectl("-n", NAMESPACE, "patch", "configmap", "argocd-cm", "--type", "merge", "-p", json.dumps(settings))

    # --- the processes -------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._run("redis-server", ["redis-server", "--bind", "127.0.0.1", "--port", str(REDIS), "--save", "",
                                   "--appendonly", "no"], binary=None)
        self._wait_port(REDIS)
        common = ["--redis", f"127.0.0.1:{REDIS}", "--loglevel", "info"]
        self._run("argocd-repo-server", ["--port", str(REPO_SERVER), "--metrics-port", "8084", *common])
        self._wait_port(REPO_SERVER)
        repo = ["--repo-server", f"127.0.0.1:{REPO_SERVER}"]
        self._run("argocd-application-controller", [*common, *repo, "--metrics-port", "8082",
                                                    "--self-heal-timeout-seconds", "2"])
        self._run("argocd-applicationset-controller", [
            "--loglevel", "info", "--argocd-repo-server", f"127.0.0.1:{REPO_SERVER}",
            "--enable-progressive-syncs", "--metrics-addr", "127.0.0.1:12345", "--probe-addr", "127.0.0.1:12346",
            "--webhook-addr", "127.0.0.1:7000"])
        self._run("argocd-server", [*common, *repo, "--insecure", "--port", str(SERVER), "--metrics-port", "8083",
                                    "--address", "127.0.0.1"])
        self._wait_port(SERVER)

    def _run(self, name: str, args: list[str], binary: str | None = "argocd") -> None:
        env = {**os.environ, "ARGOCD_FAKE_IN_CLUSTER": "true", "KUBECONFIG": str(self.kubeconfig),
               "ARGOCD_BINARY_NAME": name, "ARGOCD_TLS_DATA_PATH": str(self.tls),
               "ARGOCD_SSH_DATA_PATH": str(self.dir / "ssh"), "ARGOCD_GPG_ENABLED": "false",
               "HOME": str(self.dir), "PATH": f"{self.plane.bin}:{os.environ['PATH']}",
               # what ArgoCD's Deployments read from argocd-cm's timeout.reconciliation (valueFrom a key ref)
               "ARGOCD_RECONCILIATION_TIMEOUT": RECONCILIATION, "ARGOCD_RECONCILIATION_JITTER": "0s"}
        argv = [str(self.plane.bin / binary), *args] if binary else args
        component = controlplane.Component(name, argv, self.plane.dir / f"{name}.log")
        component.start(env)
        self.plane.components.append(component)  # stopped with the control plane, checked with it

    def _wait_port(self, port: int) -> None:
        deadline = time.monotonic() + controlplane.STARTUP
        while True:
            self.plane.check_alive()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {controlplane.STARTUP:.0f} s "
                                       f"(logs: {self.plane.dir})") from None
                time.sleep(0.2)
            else:
                return

