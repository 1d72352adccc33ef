"""The kubelet for pods whose image is cutover's: each runs as a container of the image `make image` built when
`CUTOVER_E2E_IMAGE` names it (`localhost/cutover:dev`), else as a local process of the project's own `cutover`.

kwok's Stages play the kubelet for every other pod (e2e/tier/stages.yaml) and leave these alone. For each such pod
bound to a node, the shim does what a kubelet does: it prepares the pod's volumes (ConfigMap, Secret, emptyDir and
the projected ServiceAccount token, asked of the TokenRequest API for this pod), builds its environment (values,
the downward API, Secret and ConfigMap keys, and the in-cluster service variables), starts the container's command
in a mount namespace of its own (podexec.py), reports Running, then the exit code and termination message as the
container's terminated state. The Job controller reads that status and applies `backoffLimit` and
`podFailurePolicy` itself. A pod's deletion sends SIGTERM, and SIGKILL after its grace period.

With an image, podman runs it (runc, the tier's own containers.conf from packaging/image.sh) in the tier's network
namespace (`--network host` from inside it), with the image's own entrypoint, user and PATH, its root read-only when
the container asks, and the same prepared volumes, environment and termination-message file bound in. A pod whose
tag ends in `-git` runs the with-git target (`localhost/cutover:dev-git`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes

from tier.controlplane import SERVICE_IP
from tier.images import IMAGE_GIT

IMAGE = re.compile(r"(^|/)cutover[:@]")  # the image the shim runs; every other pod is kwok's
MESSAGE_LIMIT = 4096  # bytes of termination message the kubelet keeps
LOG_TAIL = 80  # lines FallbackToLogsOnError takes from the log
PODEXEC = Path(__file__).with_name("podexec.py")
PROJECT = Path(__file__).resolve().parents[2]  # this checkout: its source and virtualenv must stay visible
CONTAINERS_CONF = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cutover-image" / \
    "containers.conf"  # packaging/image.sh's


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass
class Container:
    """One running container: its process, where its log and termination message go."""

    pod: dict[str, Any]
    process: subprocess.Popen[bytes]
    log: Path
    message: Path
    started: str
    deleted: threading.Event = dataclasses.field(default_factory=threading.Event)


class Shim:
    def __init__(self, api: kubernetes.client.ApiClient, run_dir: Path, cutover: Path) -> None:
        self.api, self.core = api, kubernetes.client.CoreV1Api(api)
        self.dir = run_dir / "pods"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cutover = cutover  # the project's own `cutover` executable
        self.image = os.environ.get("CUTOVER_E2E_IMAGE") or None  # run hook pods as containers of this image
        self.running: dict[str, Container] = {}  # pod uid → container
        self.finished: dict[str, int] = {}  # pod uid → exit code
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="shim", daemon=True)
        self.errors: list[str] = []
        self.notes: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        for container in list(self.running.values()):
            if container is not None:  # None: still starting
                self._kill(container)

    def log_of(self, namespace: str, name: str) -> str:
        path = self.dir / f"{namespace}_{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # --- the watch ---------------------------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                pods = self.core.list_pod_for_all_namespaces()
                for pod in pods.items:
                    self._sync(pod)
                watch = kubernetes.watch.Watch()
                for event in watch.stream(self.core.list_pod_for_all_namespaces, timeout_seconds=30,
                                          resource_version=pods.metadata.resource_version):
                    if self._stop.is_set():
                        return
                    self._sync(event["object"])
            except Exception as exc:
                if not self._stop.is_set():
                    self.errors.append(f"watch: {exc!r}")
                    time.sleep(0.5)

    def _sync(self, obj: Any) -> None:
        pod = self.api.sanitize_for_serialization(obj)
        spec, meta = pod.get("spec", {}), pod["metadata"]
        if not spec.get("nodeName") or not IMAGE.search(spec["containers"][0]["image"]):
            return
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):
            self._delete(pod)
        elif uid not in self.running and uid not in self.finished and pod["status"].get("phase") == "Pending":
            self.running[uid] = None  # type: ignore[assignment]  # claimed before the thread starts
            threading.Thread(target=self._run, args=(pod,), name=f"pod {meta['name']}", daemon=True).start()

    # --- one pod -----------------------------------------------------------------------------------------------

    def _run(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            container = self._start(pod)
        except Exception as exc:
            self.errors.append(f"{meta['name']}: {exc!r}")
            self._report_failed_start(pod, str(exc))
            self.finished[meta["uid"]] = 128
            self.running.pop(meta["uid"], None)
            return
        self.running[meta["uid"]] = container
        code = container.process.wait()
        self.finished[meta["uid"]] = code
        self.running.pop(meta["uid"], None)
        self._report_terminated(container, code)
        if container.deleted.is_set():
            self._remove(pod)

    def _start(self, pod: dict[str, Any]) -> Container:
        meta, spec = pod["metadata"], pod["spec"]
        base = self.dir / meta["uid"]
        base.mkdir(parents=True, exist_ok=True)
        security = spec.get("securityContext") or {}
        c = spec["containers"][0]
        c_security = c.get("securityContext") or {}
        fs_group = security.get("fsGroup")
        volumes = {v["name"]: self._volume(pod, v, base / "volumes" / v["name"], fs_group) for v in
                   spec.get("volumes", [])}
        message = base / "termination-log"
        message.write_bytes(b"")
        os.chmod(message, 0o666)
        mounts = [[str(volumes[m["name"]] / m.get("subPath", "")).rstrip("/"), m["mountPath"],
                   bool(m.get("readOnly"))] for m in c.get("volumeMounts", [])]
        mounts.append([str(message), c.get("terminationMessagePath", "/dev/termination-log"), False])
        uid = c_security.get("runAsUser", security.get("runAsUser"))
        gid = c_security.get("runAsGroup", security.get("runAsGroup"))
        if self.image:
            return self._start_container(pod, base, mounts, message, user=(uid, gid))
        if uid is not None and not reachable_by_others(Path(os.path.realpath(sys.executable))):
            # the project's Python sits where another user cannot read (a pyenv under /root): the process runs
            # as root, said in the pod's log; everything the API sees (its token, its RBAC) is the pod's all the same
            self.notes.append(f"{meta['name']}: runAsUser {uid} cannot reach {sys.executable}; ran as root")
            uid = gid = None
        plan = {
            "argv": self._argv(c),
            "env": self._env(pod, c),
            "mounts": mounts,
            "read_only_root": bool(c_security.get("readOnlyRootFilesystem")),
            "keep": sorted({sys.prefix, str(PROJECT)}),
            "working_dir": c.get("workingDir", "/"),
            "uid": uid, "gid": gid,
            "groups": sorted({g for g in (gid, fs_group, *security.get("supplementalGroups", [])) if g is not None}),
        }
        (base / "plan.json").write_text(json.dumps(plan))
        log = self.dir / f"{meta['namespace']}_{meta['name']}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--", sys.executable, str(PODEXEC),
                 str(base / "plan.json")], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started = now()
        self._running(pod, started)
        return Container(pod, process, log, message, started)

    def _running(self, pod: Mapping[str, Any], started: str) -> None:
        meta, c = pod["metadata"], pod["spec"]["containers"][0]
        self._patch_status(pod, {
            "phase": "Running", "startTime": started, "podIP": pod_ip(meta["uid"]), "hostIP": pod_ip(meta["uid"]),
            "conditions": [condition("Initialized", "True"), condition("Ready", "True"),
                           condition("ContainersReady", "True")],
            "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                                   "started": True, "restartCount": 0, "state": {"running": {"startedAt": started}}}],
        })

    def _start_container(self, pod: dict[str, Any], base: Path, mounts: list[list[Any]], message: Path, *,
                         user: tuple[int | None, int | None]) -> Container:
        """The pod's one container as a container of the image: what a kubelet asks of its runtime."""
        meta, spec = pod["metadata"], pod["spec"]
        c = spec["containers"][0]
        security, c_security = spec.get("securityContext") or {}, c.get("securityContext") or {}
        uid, gid = user
        groups = {g for g in (security.get("fsGroup"), *security.get("supplementalGroups", [])) if g is not None}
        env = {k: v for k, v in self._env(pod, c).items() if k != "PATH"}  # the image's PATH, not the host's
        (base / "env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
        argv = ["podman", "run", "--rm", "--name", f"pod-{meta['uid']}", "--pull", "never", "--network", "host",
                "--env-file", str(base / "env"), "--workdir", c.get("workingDir", "/"), "--read-only-tmpfs=false"]
        if c_security.get("readOnlyRootFilesystem"):
            argv.append("--read-only")
        if uid is not None:
            argv += ["--user", f"{uid}:{gid if gid is not None else uid}"]
        for group in sorted(groups):
            argv += ["--group-add", str(group)]
        for source, target, read_only in mounts:
            argv += ["-v", f"{source}:{target}:{'ro' if read_only else 'rw'}"]
        command = list(c.get("command") or [])
        if command and command[0] not in ("cutover", "/usr/local/bin/cutover"):
            raise ValueError(f"the shim runs the cutover image's own entrypoint, not {command[0]!r}")
        argv += [self._image_of(c["image"]), *command[1:], *c.get("args", [])]
        log = self.dir / f"{meta['namespace']}_{meta['name']}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)})
        started = now()
        self._running(pod, started)
        return Container(pod, process, log, message, started)

    def _image_of(self, asked: str) -> str:
        """The built image a pod's image stands for: the with-git target (`make image`'s `<image>-git`) for its
        digest (tier/images.py) or a tag that ends in `-git`, as `git.provider: git` needs, else the default."""
        assert self.image is not None
        with_git = asked == IMAGE_GIT or asked.rsplit(":", 1)[-1].endswith("-git")
        return f"{self.image}-git" if with_git else self.image

    def _argv(self, c: Mapping[str, Any]) -> list[str]:
        command = list(c.get("command") or ["cutover"])  # the image's ENTRYPOINT (Dockerfile)
        if command[0] not in ("cutover", "/usr/local/bin/cutover"):
            raise ValueError(f"the shim runs the cutover image's own entrypoint, not {command[0]!r}")
        return [str(self.cutover), *command[1:], *c.get("args", [])]

    # --- volumes -----------------------------------------------------------------------------------------------

    def _volume(self, pod: dict[str, Any], volume: Mapping[str, Any], target: Path, fs_group: int | None) -> Path:
        target.mkdir(parents=True, exist_ok=True)
        namespace = pod["metadata"]["namespace"]
        if "emptyDir" in volume:
            os.chmod(target, 0o777)
        elif "configMap" in volume:
            self._write(target, self._config_map(namespace, volume["configMap"]), volume["configMap"], fs_group)
        elif "secret" in volume:
            self._write(target, self._secret(namespace, volume["secret"]), volume["secret"], fs_group)
        elif "projected" in volume:
            for source in volume["projected"]["sources"]:
                self._projected(pod, source, target, volume["projected"], fs_group)
        else:
            raise ValueError(f"volume {volume['name']}: the shim knows emptyDir, configMap, secret and projected")
        return target

    def _config_map(self, namespace: str, ref: Mapping[str, Any]) -> dict[str, bytes]:
        found = self._read(self.core.read_namespaced_config_map, ref["name"], namespace, ref.get("optional"))
        return {k: v.encode() for k, v in (found.data or {}).items()} if found else {}

    def _secret(self, namespace: str, ref: Mapping[str, Any]) -> dict[str, bytes]:
        found = self._read(self.core.read_namespaced_secret, ref["secretName"], namespace, ref.get("optional"))
        return {k: base64.b64decode(v) for k, v in (found.data or {}).items()} if found else {}

    @staticmethod
    def _read(read: Any, name: str, namespace: str, optional: bool | None) -> Any:
        """The object, or None when it is missing and the pod says it may be (`optional`)."""
        try:
            return read(name, namespace)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404 and optional:
                return None
            raise

    def _projected(self, pod: dict[str, Any], source: Mapping[str, Any], target: Path,
                   projected: Mapping[str, Any], fs_group: int | None) -> None:
        meta = pod["metadata"]
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            answer = self.core.create_namespaced_service_account_token(
                pod["spec"].get("serviceAccountName", "default"), meta["namespace"],
                kubernetes.client.AuthenticationV1TokenRequest(spec=kubernetes.client.V1TokenRequestSpec(
                    audiences=[token["audience"]] if token.get("audience") else [],
                    expiration_seconds=token.get("expirationSeconds", 3607),
                    bound_object_ref=kubernetes.client.V1BoundObjectReference(
                        kind="Pod", api_version="v1", name=meta["name"], uid=meta["uid"]))))
            files = {token["path"]: answer.status.token.encode()}
            self._write(target, files, projected, fs_group)
        elif "configMap" in source:
            self._write(target, self._config_map(meta["namespace"], source["configMap"]), source["configMap"],
                        fs_group, projected.get("defaultMode"))
        elif "secret" in source:
            ref = {"secretName": source["secret"]["name"], **source["secret"]}
            self._write(target, self._secret(meta["namespace"], ref), source["secret"], fs_group,
                        projected.get("defaultMode"))
        elif "downwardAPI" in source:
            files = {item["path"]: field(pod, item["fieldRef"]["fieldPath"]).encode()
                     for item in source["downwardAPI"]["items"]}
            self._write(target, files, projected, fs_group)

    @staticmethod
    def _write(target: Path, files: Mapping[str, bytes], ref: Mapping[str, Any], fs_group: int | None,
               default_mode: int | None = None) -> None:
        """Writes the keys (or the listed items) with the modes a kubelet gives them: with an fsGroup the group
        owns the file and may read it, as the kubelet's volume ownership does."""
        mode = ref.get("defaultMode", default_mode if default_mode is not None else 0o644)
        items = ref.get("items") or [{"key": k, "path": k} for k in files]
        for item in items:
            data = files.get(item["key"])
            if data is None:
                continue
            path = target / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            file_mode = item.get("mode", mode)
            if fs_group is not None:
                os.chown(path, 0, fs_group)
                file_mode |= 0o040
            os.chmod(path, file_mode)
        if fs_group is not None:
            os.chown(target, 0, fs_group)
            os.chmod(target, 0o2750)

    # --- environment -------------------------------------------------------------------------------------------

    def _env(self, pod: dict[str, Any], c: Mapping[str, Any]) -> dict[str, str]:
        namespace = pod["metadata"]["namespace"]
        env = {
            "PATH": f"{self.cutover.parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOSTNAME": pod["metadata"]["name"],
            "HOME": "/tmp",  # noqa: S108 (the pod's emptyDir; the image's user has no home)
            # the in-cluster service variables, as the kubelet sets them for the `kubernetes` Service
            "KUBERNETES_SERVICE_HOST": SERVICE_IP, "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": f"tcp://{SERVICE_IP}:443",
            "KUBERNETES_PORT_443_TCP": f"tcp://{SERVICE_IP}:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": SERVICE_IP,
        }
        for source in c.get("envFrom", []):
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                data = self._config_map(namespace, source["configMapRef"])
            else:
                data = self._secret(namespace, {"secretName": source["secretRef"]["name"], **source["secretRef"]})
            env.update({prefix + k: v.decode() for k, v in data.items()})
        for var in c.get("env", []):
            value = self._env_value(pod, var)
            if value is not None:
                env[var["name"]] = value
        return env

    def _env_value(self, pod: dict[str, Any], var: Mapping[str, Any]) -> str | None:
        if "valueFrom" not in var:
            return expand(var.get("value", ""), {})
        source = var["valueFrom"]
        namespace = pod["metadata"]["namespace"]
        if "fieldRef" in source:
            return field(pod, source["fieldRef"]["fieldPath"])
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            data = self._secret(namespace, {"secretName": ref["name"], "optional": ref.get("optional")})
            return data[ref["key"]].decode() if ref["key"] in data else None
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = self._config_map(namespace, ref)
            return data[ref["key"]].decode() if ref["key"] in data else None
        raise ValueError(f"env {var['name']}: the shim knows fieldRef, secretKeyRef and configMapKeyRef")

    # --- status ------------------------------------------------------------------------------------------------

    def _patch_status(self, pod: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(kubernetes.client.ApiException):  # a pod deleted meanwhile has no status left
            self.core.patch_namespaced_pod_status(meta["name"], meta["namespace"], {"status": status})

    def _report_terminated(self, container: Container, code: int) -> None:
        c = container.pod["spec"]["containers"][0]
        message = container.message.read_bytes()[:MESSAGE_LIMIT].decode(errors="replace")
        if not message and code != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            lines = container.log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
            message = "\n".join(lines)[-MESSAGE_LIMIT:]
        if code < 0:  # killed by a signal: what a runtime reports as 128 + the signal
            code = 128 - code
        finished = now()
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": container.started,
                      "finishedAt": finished, **({"message": message} if message else {})}
        self._patch_status(container.pod, {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": [condition("Ready", "False", "PodCompleted"),
                           condition("ContainersReady", "False", "PodCompleted")],
            "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False,
                                   "started": False, "restartCount": 0, "state": {"terminated": terminated}}],
        })

    def _report_failed_start(self, pod: Mapping[str, Any], why: str) -> None:
        c = pod["spec"]["containers"][0]
        self._patch_status(pod, {
            "phase": "Failed",
            "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False,
                                   "started": False, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 128, "reason": "StartError",
                                                            "message": why[:MESSAGE_LIMIT],
                                                            "startedAt": now(), "finishedAt": now()}}}],
        })

    # --- deletion ----------------------------------------------------------------------------------------------

    def _delete(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        container = self.running.get(uid)
        if container is None:
            if uid in self.running:  # still starting: its thread sees the deletion when the process is up
                threading.Timer(0.5, self._delete, args=(pod,)).start()
                return
            self._remove(pod)
            return
        if container.deleted.is_set():
            return
        container.deleted.set()
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        with contextlib.suppress(ProcessLookupError):
            container.process.send_signal(signal.SIGTERM)
        threading.Timer(float(grace), self._kill, args=(container,)).start()

    def sigkill(self, container: Container) -> None:
        """What a node crash or the OOM killer does to the container: SIGKILL, no chance to say anything."""
        self._kill(container)

    def _kill(self, container: Container) -> None:
        if container.process.poll() is None:
            if self.image:  # SIGKILL to podman's client would leave its container running
                subprocess.run(["podman", "kill", "--signal", "KILL", f"pod-{container.pod['metadata']['uid']}"],
                               capture_output=True, check=False, timeout=30,
                               env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)})
                return
            with contextlib.suppress(ProcessLookupError):
                container.process.kill()

    def _remove(self, pod: Mapping[str, Any]) -> None:
        """What the kubelet does once a deleted pod's containers have stopped: delete it with no grace left. In the
        body: the apiserver reads a DELETE's options from its body when there is one, and a grace period given only
        in the query was ignored (a pod deleted while running then stayed, and a Job deleted in the foreground, as
        ArgoCD deletes a terminated hook, waited on it forever)."""
        meta = pod["metadata"]
        with contextlib.suppress(kubernetes.client.ApiException):
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"], body=kubernetes.client.V1DeleteOptions(
                grace_period_seconds=0, preconditions=kubernetes.client.V1Preconditions(uid=meta["uid"])))


def reachable_by_others(path: Path) -> bool:
    """Whether a user other than root can read `path`: every directory above it searchable by others."""
    return all(os.stat(p).st_mode & 0o001 for p in path.parents) and bool(os.stat(path).st_mode & 0o004)


def condition(kind: str, status: str, reason: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": now()}
    if reason:
        found["reason"] = reason
    return found


def pod_ip(uid: str) -> str:
    """An address of the pod range's last /24s for a shim pod (kwok hands out the low ones)."""
    n = int(uid.replace("-", ""), 16)
    return f"10.244.{200 + n % 50}.{1 + (n >> 8) % 250}"


def field(pod: Mapping[str, Any], path: str) -> str:
    """The downward API's fieldPath of a pod."""
    meta = pod["metadata"]
    found = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if found:
        return str((meta.get(found[1]) or {}).get(found[2], ""))
    simple = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"], "metadata.uid": meta["uid"],
              "spec.nodeName": pod["spec"].get("nodeName", ""),
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
              "status.podIP": pod_ip(meta["uid"]), "status.hostIP": pod_ip(meta["uid"])}
    if path not in simple:
        raise ValueError(f"fieldPath {path}: not a field the shim knows")
    return str(simple[path])


def expand(value: str, env: Mapping[str, str]) -> str:
    """$(VAR) references, as the kubelet expands them; $$ escapes."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]), value)
