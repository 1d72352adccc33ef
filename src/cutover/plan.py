"""The plan file (docs/plan.md): its model and its validation.

`load()` reads a YAML file and returns one or more `Plan`s; any problem raises `InvalidInput` whose
message names the field path, what was expected and what was found, so exit 2 says exactly what to fix.
Called by the CLI before anything touches a cluster, a Git host or Slack.
"""

from __future__ import annotations

import dataclasses
import io
import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cutover import profiles
from cutover.errors import InvalidInput
from cutover.yamlbounds import MAX_DEPTH, depth_bound

API_VERSION = "cutover/v1alpha1"
KIND = "CutoverPlan"
DEFAULT_PATH = "/etc/cutover/plan.yaml"
ENGINES = tuple(profiles.ENGINES)  # the engine kinds: one row each in `profiles`
PROOFS = ("listed", "generate", "auto")
# The plan format's vocabulary. The wings map these names to real classes (`githost.PROVIDERS`,
# `sources.SOURCES`) and tests/test_plan.py keeps the two in step; the plan cannot import those registries
# (their classes import the plan).
PROVIDERS = ("github", "gitlab", "gitea", "forgejo", "git")  # the Git providers; `git`: plain Git, HTTPS or SSH
PUBLIC_HOSTS = {"github.com": "github", "gitlab.com": "gitlab", "codeberg.org": "forgejo"}  # git.provider implied
SOURCES = ("manifest", "kustomize", "helm-values")  # where the selector lives: what kind of file git.path is
GIT_MODES = ("direct", "pull-request")
LOG_LEVELS = ("debug", "info", "warning", "error")

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
# Kubernetes label syntax: apimachinery/pkg/util/validation (qualified names and label values).
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CREDENTIALS = re.compile(r"^\s*[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s@]+@")  # scheme://userinfo@host


@dataclasses.dataclass(frozen=True)
class Backend:
    name: str
    selector: Mapping[str, str]  # the effective selector, as the live Service carries it (docs/sources.md)
    engine: str
    port: int
    git_value: str | None = None  # helm-values with a scalar selectorPath: what Git holds for this backend


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


def resolve_path(flag: str | None) -> str:
    return flag or os.environ.get("CUTOVER_PLAN") or DEFAULT_PATH


def load(path: str) -> list[Plan]:
    """Read and validate a plan file: one plan, or several under `cutovers:`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(
            f"plan {path}: file not found", hint="pass --plan FILE or set CUTOVER_PLAN"
        ) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"plan {path}: not UTF-8 text (byte {exc.start})", cause="invalid_plan",
                           hint="save the plan as UTF-8") from exc
    except OSError as exc:
        raise InvalidInput(f"plan {path}: cannot read: {exc.strerror}", hint="check the mount") from exc
    return parse(text, source=path)


MAX_PLAN = 1 << 20  # bytes: a plan is a few KiB, a fleet of them well under this


def parse(text: str, *, source: str = "plan") -> list[Plan]:
    if len(text) > MAX_PLAN:
        raise InvalidInput(f"{source}: {len(text)} characters: larger than the {MAX_PLAN >> 20} MiB a plan may be",
                           cause="invalid_plan", hint="mount the plan file itself, not a bundle")
    if depth_bound(text) > MAX_DEPTH:  # before libyaml can overflow the C stack
        raise InvalidInput(f"{source}: nested deeper than {MAX_DEPTH} levels", cause="invalid_plan",
                           hint="a plan is a few levels deep; fix the file")
    yaml = YAML(typ="safe")
    try:
        data = yaml.load(io.StringIO(text))
    except YAMLError as exc:
        raise InvalidInput(f"{source}: not valid YAML: {_first_line(exc)}", cause="invalid_plan",
                           hint="fix the YAML syntax; nothing was touched") from exc
    except RecursionError as exc:
        raise InvalidInput(f"{source}: nested too deeply to read", cause="invalid_plan",
                           hint="a plan is a few levels deep; fix the file") from exc
    if _is_plan_configmap(data):  # the ConfigMap a Job mounts the plan from, checked offline as it is (docs/plan.md)
        return parse(data["data"]["plan.yaml"], source=f"{source} (data.plan.yaml)")
    root = _Field(source, "", data)
    return _read_root(root)


def _is_plan_configmap(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("kind") == "ConfigMap" and isinstance(data.get("data"), Mapping) \
        and isinstance(data["data"].get("plan.yaml"), str)


def _first_line(exc: Exception) -> str:
    """The parser's message in one line, without ruamel's pointer to its own docs (not the user's concern)."""
    text = " ".join(str(exc).split())
    return re.sub(r"\s*To suppress this check see: \S+", "", text)[:300]


class _Field:
    """One node of the plan while it is being read; knows its path for error messages."""

    def __init__(self, source: str, path: str, value: Any) -> None:
        self.source, self.path, self.value = source, path, value

    def fail(self, expected: str) -> InvalidInput:
        where = self.path or "(top level)"
        return InvalidInput(
            f"{self.source}: {where}: expected {expected}, found {_describe(self.value)}",
            cause="invalid_plan",
            hint=f"fix `{where}` in the plan; nothing was touched",
        )

    def child(self, key: str | int) -> _Field:
        if isinstance(key, int):
            return _Field(self.source, f"{self.path}[{key}]", self.value[key])
        value = self.value.get(key) if isinstance(self.value, Mapping) else None
        return _Field(self.source, f"{self.path}.{key}" if self.path else key, value)

    def mapping(self, allowed: tuple[str, ...], *, required: tuple[str, ...] = ()) -> _Field:
        if not isinstance(self.value, Mapping):
            raise self.fail("a mapping")
        for key in self.value:
            if key not in allowed:
                unknown = _Field(self.source, f"{self.path}.{key}" if self.path else str(key), self.value[key])
                raise unknown.fail(f"no such key (known here: {', '.join(allowed)})")
        for key in required:
            if self.value.get(key) is None:
                raise self.child(key).fail("a value (this field is required)")
        return self

    def present(self, key: str) -> bool:
        return isinstance(self.value, Mapping) and self.value.get(key) is not None

    def string(self, *, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        if self.value is None and default is not None:
            return default
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.fail("a non-empty string" + (f", one of {', '.join(choices)}" if choices else ""))
        if choices and self.value not in choices:
            raise self.fail(f"one of {', '.join(choices)}")
        return self.value

    def boolean(self, *, default: bool) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.fail("true or false")
        return self.value

    def integer(self, *, default: int | None = None, low: int = 0, high: int = 2**31) -> int:
        if self.value is None and default is not None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int) or not low <= self.value <= high:
            raise self.fail(f"an integer from {low} to {high}")
        return self.value

    def duration(self, *, default: float) -> float:
        if self.value is None:
            return default
        try:
            seconds = parse_duration(self.value)
        except ValueError:
            raise self.fail("a duration string like '90s', '30m', '1h', '1h30m' or '500ms'") from None
        if seconds <= 0:
            raise self.fail("a duration above zero")
        return seconds

    def items(self) -> Iterator[tuple[str, _Field]]:
        for key in self.value:
            yield str(key), self.child(key)


def _describe(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "{} (an empty mapping)" if not value else f"a mapping with keys {', '.join(map(str, value))}"
    if isinstance(value, list):
        return "[] (an empty list)" if not value else f"a list of {len(value)}"
    if isinstance(value, str) and _CREDENTIALS.search(value):  # never echoed, not even cut short
        parts = urlsplit(value.strip())
        return f"'{parts.scheme}://{parts.hostname or '?'}/...' (a URL with credentials in it, not shown)"
    text = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({kinds.get(type(value), type(value).__name__)})"


_PLAN_KEYS = ("metadata", "service", "backends", "target", "verify", "git", "argocd", "rollback", "notify")


def _read_root(root: _Field) -> list[Plan]:
    root.mapping(("apiVersion", "kind", "cutovers", *_PLAN_KEYS), required=("apiVersion", "kind"))
    if root.child("apiVersion").string() != API_VERSION:
        raise root.child("apiVersion").fail(repr(API_VERSION))
    if root.child("kind").string() != KIND:
        raise root.child("kind").fail(repr(KIND))
    if not root.present("cutovers"):
        return [_read_plan(root, extra=("apiVersion", "kind"))]
    if any(root.present(key) for key in _PLAN_KEYS):
        raise root.child("cutovers").fail("either `cutovers:` or a single plan's keys at the top level, not both")
    many = root.child("cutovers")
    if not isinstance(many.value, list) or not many.value:
        raise many.fail("a non-empty list of plans")
    plans = [_read_plan(many.child(index).mapping(_PLAN_KEYS)) for index in range(len(many.value))]
    seen: dict[tuple[str, str], int] = {}
    for index, plan in enumerate(plans):
        key = (plan.service.namespace, plan.service.name)
        if key in seen:
            raise many.child(index).child("service").fail(
                f"a Service not already handled by cutovers[{seen[key]}] (one cutover per Service)"
            )
        seen[key] = index
    return plans


def _read_plan(node: _Field, *, extra: tuple[str, ...] = ()) -> Plan:
    node.mapping((*extra, *_PLAN_KEYS), required=("metadata", "service", "backends", "target", "verify", "git"))
    meta = node.child("metadata").mapping(("name",), required=("name",))
    backends = _read_backends(node.child("backends"))
    target = node.child("target")
    if target.string() not in backends:
        raise target.fail(f"the name of a backend ({', '.join(backends)})")
    rollback = node.child("rollback")
    if rollback.value is not None:
        rollback.mapping(("auto",))
    git = _read_git(node.child("git"))
    _check_git_values(backends, git, node.child("backends"))
    return Plan(
        name=_dns_label(meta.child("name")),  # it names branches and Leases: no '/' or '..' reaches a URL
        service=_read_service(node.child("service")),
        backends=backends,
        target=target.string(),
        verify=_read_verify(node.child("verify")),
        git=git,
        argocd=_read_argocd(node.child("argocd"), allow_insecure=git.allow_insecure) if node.present("argocd")
        else None,
        rollback_auto=rollback.child("auto").boolean(default=True),
        slack=_read_notify(node.child("notify")),
    )


def _check_git_values(backends: Mapping[str, Backend], git: GitSettings, node: _Field) -> None:
    """`gitValue` is what a helm-values scalar holds for a backend: only there, and then for every backend or none."""
    valued = [name for name, backend in backends.items() if backend.git_value is not None]
    if valued and git.source != "helm-values":
        raise node.child(valued[0]).child("gitValue").fail("no gitValue (it is for git.source helm-values only)")
    if valued and len(valued) != len(backends):
        missing = next(name for name in backends if name not in valued)
        raise node.child(missing).child("gitValue").fail("a gitValue on every backend, or on none")
    if len({backends[name].git_value for name in valued}) != len(valued):
        raise node.child(valued[-1]).child("gitValue").fail("a gitValue different from the other backends'")


def _dns_label(node: _Field) -> str:
    value = node.string()
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise node.fail("a DNS label (lowercase alphanumerics and '-', at most 63)")
    return value


def _read_service(node: _Field) -> ServiceRef:
    node.mapping(("namespace", "name", "ports"), required=("namespace", "name"))
    ports = node.child("ports")
    port_list: tuple[int, ...] | None = None
    if ports.value is not None:
        if not isinstance(ports.value, list) or not ports.value:
            raise ports.fail("a non-empty list of Service port numbers")
        port_list = tuple(ports.child(i).integer(low=1, high=65535) for i in range(len(ports.value)))
    return ServiceRef(namespace=_dns_label(node.child("namespace")), name=_dns_label(node.child("name")),
                      ports=port_list)


def _read_backends(node: _Field) -> dict[str, Backend]:
    if not isinstance(node.value, Mapping) or len(node.value) < 2:
        raise node.fail("a mapping of at least two backends (the one serving now and the target)")
    backends: dict[str, Backend] = {}
    for name, field in node.items():
        field.mapping(("selector", "engine", "port", "gitValue"), required=("selector", "engine", "port"))
        backends[name] = Backend(
            name=name,
            selector=_read_selector(field.child("selector")),
            engine=field.child("engine").string(choices=ENGINES),
            port=field.child("port").integer(low=1, high=65535),
            git_value=field.child("gitValue").string() if field.present("gitValue") else None,
        )
    by_selector: dict[tuple[tuple[str, str], ...], str] = {}
    for name, backend in backends.items():
        key = tuple(sorted(backend.selector.items()))
        if key in by_selector:
            raise node.child(name).child("selector").fail(
                f"a selector different from backend {by_selector[key]!r} (two backends cannot share pods)"
            )
        by_selector[key] = name
    return backends


def _read_selector(node: _Field) -> dict[str, str]:
    if not isinstance(node.value, Mapping) or not node.value:
        raise node.fail("a non-empty mapping of label keys to values")
    selector: dict[str, str] = {}
    for key, field in node.items():
        if not isinstance(field.value, str):
            raise field.fail("a string label value (quote values such as true, 1.0 or on)")
        problem = label_problem(key, field.value)
        if problem:
            raise field.fail(f"valid Kubernetes label syntax ({problem})")
        selector[key] = field.value
    return selector


def _read_verify(node: _Field) -> Verify:
    node.mapping(("servedNames", "proof", "minReadyPods", "maxWait", "requestTimeout", "fitness"),
                 required=("servedNames",))
    names = node.child("servedNames")
    if not isinstance(names.value, list) or not names.value:
        raise names.fail("a non-empty list of the model names clients send")
    served = tuple(names.child(i).string() for i in range(len(names.value)))
    if len(set(served)) != len(served):
        raise names.fail("each name once")
    return Verify(
        served_names=served,
        proof=node.child("proof").string(default="auto", choices=PROOFS),
        min_ready_pods=node.child("minReadyPods").integer(default=1, low=1, high=10_000),
        max_wait=node.child("maxWait").duration(default=1800.0),
        request_timeout=node.child("requestTimeout").duration(default=10.0),
        fitness=_read_fitness(node.child("fitness")) if "fitness" in node.value else None,
    )


def _read_fitness(node: _Field) -> Fitness:
    if node.value is None:
        return Fitness()  # `fitness:` with nothing under it: every default
    node.mapping(("requests", "maxLatency", "stream", "compare"))
    return Fitness(requests=node.child("requests").integer(default=3, low=1, high=20),
                   max_latency=node.child("maxLatency").duration(default=5.0),
                   stream=node.child("stream").boolean(default=True),
                   compare=node.child("compare").boolean(default=True))


_GIT_KEYS = ("provider", "url", "apiUrl", "apiHosts", "allowInsecure", "branch", "path", "document", "selectorPath",
             "mode", "author", "tokenFile", "source", "render", "caFile")
SECRETS_DIR = "/var/run/secrets/cutover"  # where the Jobs mount the Secrets; CUTOVER_SECRETS_DIR elsewhere
_DEFAULT_API_HOSTS = {"github.com": "api.github.com", "www.github.com": "api.github.com"}  # api_root's


def secrets_dir() -> str:
    return os.environ.get("CUTOVER_SECRETS_DIR") or SECRETS_DIR


def _read_secret_file(node: _Field) -> str | None:
    """A file a credential is read from: only under the secrets directory, so that a plan cannot have the pod's
    own ServiceAccount token (or any other file) read and sent as a credential."""
    if node.value is None:
        return None
    path = node.string()
    root = secrets_dir().rstrip("/") or "/"
    normal = posixpath.normpath(path)
    if not path.startswith("/") or not normal.startswith(root + "/"):
        raise node.fail(f"a file under {root}/ (the Secrets' mount; CUTOVER_SECRETS_DIR names another)")
    return normal


def host_of(url: str) -> str:
    """The host of an https:// URL or an SSH address (git@host:path, ssh://user@host/path), lower case."""
    scp = re.match(r"^[\w.-]+@([\w.-]+):", url)
    return (scp.group(1) if scp else urlsplit(url).hostname or "").lower()


def _check_api_host(api_url: _Field, hosts: _Field, url: str) -> tuple[str, ...]:
    """The Git token goes to git.url's host only (and to api.github.com for github.com), or to a host that
    git.apiHosts names: a plan's apiUrl cannot carry it anywhere else. The hosts git.apiHosts lists."""
    listed: tuple[str, ...] = ()
    if hosts.value is not None:
        if not isinstance(hosts.value, list) or not all(isinstance(h, str) and h.strip() for h in hosts.value):
            raise hosts.fail("a list of host names")
        listed = tuple(h.strip().lower() for h in hosts.value)
    if api_url.value is None:
        return listed
    home = host_of(url)
    found = host_of(api_url.string())
    if found not in {home, _DEFAULT_API_HOSTS.get(home, home), *listed}:
        raise api_url.fail(f"a URL on git.url's host {home} (or on a host git.apiHosts lists, to send the Git "
                           f"token there)")
    return listed


def _read_git(node: _Field) -> GitSettings:
    source = node.child("source").string(default="manifest", choices=SOURCES)
    node.mapping(_GIT_KEYS, required=("url", "path") if source == "helm-values" else ("url", "path", "document"))
    url_field = node.child("url")
    url = url_field.string()
    allow_insecure = node.child("allowInsecure").boolean(default=False)
    _check_url(url_field, url, allow_insecure=allow_insecure, ssh_ok=True)
    api_url = node.child("apiUrl")
    if api_url.value is not None:
        _check_url(api_url, api_url.string(), allow_insecure=allow_insecure, ssh_ok=False)
    _check_api_host(api_url, node.child("apiHosts"), url)
    document = node.child("document")
    if document.value is not None or source != "helm-values":  # a values file has no kind and name
        document.mapping(("kind", "name"), required=("kind", "name"))
    author = node.child("author")
    if author.value is not None:
        author.mapping(("name", "email"))
    return GitSettings(
        provider=_read_provider(node.child("provider"), url),
        url=url,
        api_url=api_url.value,
        allow_insecure=allow_insecure,
        branch=_read_branch(node.child("branch")),
        path=_read_repo_path(node.child("path")),
        document=GitDocument(kind=document.child("kind").string(), name=document.child("name").string())
        if document.value is not None else GitDocument("", ""),
        selector_path=_read_selector_path(node.child("selectorPath")),
        mode=node.child("mode").string(default="direct", choices=GIT_MODES),
        author=GitAuthor(
            name=author.child("name").string(default="cutover"),
            email=author.child("email").string(default="cutover@example.invalid"),
        ),
        token_file=_read_secret_file(node.child("tokenFile")),
        source=source,
        render_path=_read_render(node.child("render")),
        ca_file=node.child("caFile").string() if node.present("caFile") else None,
    )


def _read_render(node: _Field) -> str | None:
    if node.value is None:
        return None
    node.mapping(("path",), required=("path",))
    return _read_repo_path(node.child("path")).rstrip("/") or "."


def _check_url(node: _Field, url: str, *, allow_insecure: bool, ssh_ok: bool) -> None:
    if ssh_ok and (url.startswith("ssh://") or re.match(r"^[\w.-]+@[\w.-]+:", url)):
        return
    parts = urlsplit(url)
    if parts.scheme == "http" and not allow_insecure:
        raise node.fail("an https:// URL (plain http:// only with git.allowInsecure: true, for local test servers)")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise node.fail("an https:// URL" + (" or an SSH address" if ssh_ok else ""))
    if parts.username or parts.password:
        raise node.fail("a URL without credentials (use git.tokenFile or CUTOVER_GIT_TOKEN)")


def _read_provider(node: _Field, url: str) -> str:
    if node.value is not None:
        return node.string(choices=PROVIDERS)
    host = (urlsplit(url).hostname or "").lower()
    implied = PUBLIC_HOSTS.get(host)
    if implied is not None:
        return implied
    raise node.fail(f"one of {', '.join(PROVIDERS)} (cannot tell from the host {host!r})")


def _read_repo_path(node: _Field) -> str:
    path = node.string()
    if path.startswith("/") or ".." in PurePosixPath(path).parts or "\\" in path:
        raise node.fail("a path relative to the repository root, without '..'")
    return path


_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def _read_branch(node: _Field) -> str:
    """A branch name as `git check-ref-format --branch` accepts it: it reaches hosting URLs and refspecs."""
    branch = node.string(default="main")
    parts = branch.split("/")
    if _BAD_REF.search(branch) or branch == "@" or branch.endswith((".lock", "/", ".")) or any(
            not part or part.startswith(".") for part in parts):
        raise node.fail("a branch name (no spaces, '..', '~^:?*[\\', empty or dot-led parts, '.lock' ending)")
    return branch


def _read_selector_path(node: _Field) -> str:
    path = node.string(default="spec.selector")
    if any(not part for part in path.split(".")):
        raise node.fail("a dotted path such as spec.selector")
    return path


def _read_argocd(node: _Field, *, allow_insecure: bool) -> ArgoCD:
    node.mapping(("application", "namespace", "refresh", "server", "tokenFile"), required=("application",))
    server = node.child("server")
    if server.value is not None:  # plain http:// only with git.allowInsecure, as for the Git host
        _check_url(server, server.string(), allow_insecure=allow_insecure, ssh_ok=False)
    return ArgoCD(
        application=node.child("application").string(),
        namespace=node.child("namespace").string(default="argocd"),
        refresh=node.child("refresh").boolean(default=True),
        server=server.value,
        token_file=_read_secret_file(node.child("tokenFile")),
    )


def _read_notify(node: _Field) -> Slack | None:
    if node.value is None:
        return None
    node.mapping(("slack",))
    slack = node.child("slack")
    if slack.value is None:
        return None
    slack.mapping(("webhookFile", "botTokenFile", "channel", "minLevel"))
    if slack.present("botTokenFile") and not slack.present("channel"):
        raise slack.child("channel").fail("a channel id (required with botTokenFile)")
    if slack.present("webhookFile") and slack.present("botTokenFile"):
        raise slack.fail("either webhookFile or botTokenFile with channel, not both")
    return Slack(
        webhook_file=_read_secret_file(slack.child("webhookFile")),
        bot_token_file=_read_secret_file(slack.child("botTokenFile")),
        channel=slack.child("channel").string() if slack.present("channel") else None,
        min_level=slack.child("minLevel").string(default="info", choices=LOG_LEVELS),
    )
