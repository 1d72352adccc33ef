"""Reading a plan file: `load()` reads YAML and returns one or more `Plan`s; any problem raises `InvalidInput`
whose message names the field path, what was expected and what was found, so exit 2 says exactly what to fix.
Each section has a reader of its own (`plan.service`, `plan.verify`, `plan.git`, `plan.argocd`, `plan.notify`)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cutover.errors import InvalidInput
from cutover.plan.argocd import read_argocd
from cutover.plan.field import Field
from cutover.plan.git import read_git
from cutover.plan.handoff import read_handoff
from cutover.plan.model import API_VERSION, DEFAULT_PATH, KIND, SOURCES, Backend, GitSettings, Plan, ServiceRef
from cutover.plan.notify import read_notify
from cutover.plan.service import dns_label, read_backends, read_service
from cutover.plan.verify import read_verify
from cutover.plan.yamlbounds import MAX_DEPTH, depth_bound


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
        raise InvalidInput(f"{source}: not valid YAML: {_where(exc)}", cause="invalid_plan",
                           hint="fix the YAML syntax; nothing was touched") from exc
    except RecursionError as exc:
        raise InvalidInput(f"{source}: nested too deeply to read", cause="invalid_plan",
                           hint="a plan is a few levels deep; fix the file") from exc
    if _is_plan_configmap(data):  # the ConfigMap a Job mounts the plan from, checked offline as it is (docs/plan.md)
        return parse(data["data"]["plan.yaml"], source=f"{source} (data.plan.yaml)")
    if not isinstance(data, Mapping):  # told by its shape, never quoted: the file named may hold a secret
        raise InvalidInput(f"{source}: expected a plan (a YAML mapping: apiVersion, kind, metadata, ...), found "
                           f"{_shape(data)}", cause="invalid_plan",
                           hint="name the plan file (--plan, CUTOVER_PLAN); docs/plan.md shows its shape")
    root = Field(source, "", data)
    return _read_root(root)


def _where(exc: YAMLError) -> str:
    """The parser's complaint and where, never the text around it (the file may be a Secret's)."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if not problem:
        return "cannot be parsed"
    return f"{problem}" + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else "")


def _shape(data: Any) -> str:
    if data is None:
        return "nothing (an empty document)"
    if isinstance(data, str):
        return f"a string of {len(data)} characters (not shown)"
    if isinstance(data, list):
        return f"a list of {len(data)} items"
    return f"a single {type(data).__name__} value (not shown)"


def _is_plan_configmap(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("kind") == "ConfigMap" and isinstance(data.get("data"), Mapping) \
        and isinstance(data["data"].get("plan.yaml"), str)


_PLAN_KEYS = ("metadata", "service", "backends", "target", "verify", "git", "argocd", "rollback", "notify",
              "handoff", "mode")
MODES = ("single", "fleet")  # docs/fleet.md: who writes the switch, cutover (single) or a fleet's engine


def _read_root(root: Field) -> list[Plan]:
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


def _read_plan(node: Field, *, extra: tuple[str, ...] = ()) -> Plan:
    fleet = node.child("mode").string(default="single", choices=MODES) == "fleet"
    node.mapping((*extra, *_PLAN_KEYS), required=("metadata", "service", "backends", "verify", "git",
                                                  *(() if fleet else ("target",))))
    meta = node.child("metadata").mapping(("name",), required=("name",))
    backends = read_backends(node.child("backends"))
    target = node.child("target")
    if fleet:
        _check_fleet(node)
    elif target.string() not in backends:
        raise target.fail(f"the name of a backend ({', '.join(backends)})")
    rollback = node.child("rollback")
    if rollback.value is not None:
        rollback.mapping(("auto",))
    git = read_git(node.child("git"))
    _check_git_values(backends, git, node.child("backends"))
    name = dns_label(meta.child("name"))  # it names branches and Leases: no '/' or '..' reaches a URL
    service, verify = read_service(node.child("service")), read_verify(node.child("verify"))
    _check_edited(git, service, node.child("git"))
    return Plan(
        name=name,
        service=service,
        backends=backends,
        target=target.string(default=""),  # "" under mode: fleet, until `Plan.aimed`
        verify=verify,
        git=git,
        argocd=read_argocd(node.child("argocd"), allow_insecure=git.allow_insecure, fleet=fleet)
        if node.present("argocd") else None,
        rollback_auto=rollback.child("auto").boolean(default=not fleet),
        slack=read_notify(node.child("notify")),
        handoff=read_handoff(node.child("handoff"), backends=backends, target=target.string(default=""),
                             served=verify.served_names),
        fleet=fleet,
    )


def _check_fleet(node: Field) -> None:
    """docs/fleet.md: under `mode: fleet` the fleet's commit chooses the backend (the Service's selector) for every
    cluster, and its revert is the rollback; cutover writes nothing, so what would make it write is refused."""
    if node.present("target"):
        raise node.child("target").fail("no target under mode: fleet (the fleet's commit chooses the backend: the "
                                        "Service's selector in the revision being synced)")
    rollback = node.child("rollback")
    if rollback.value is not None and rollback.child("auto").boolean(default=False):
        raise rollback.child("auto").fail("false or absent under mode: fleet (the rollback is the revert of the "
                                          "fleet's commit, which the engine replays cluster by cluster)")
    handoff = node.child("handoff")
    if handoff.value is None:
        return
    strategy = handoff.child("strategy")
    if strategy.value == "bridge":  # a bridge's hops, and retiring, are commits of cutover's own
        raise strategy.fail("parallel or recreate under mode: fleet (a bridge's hops are commits cutover makes; in "
                            "a fleet the fleet's commit is the only writer: docs/fleet.md)")
    if handoff.present("retire"):
        raise handoff.child("retire").fail("no retire under mode: fleet (retiring the engine left is a commit; in a "
                                           "fleet the fleet's next commit stops it: docs/fleet.md)")


def _check_edited(git: GitSettings, service: ServiceRef, node: Field) -> None:
    """cutover edits the plan's own Service's selector and nothing else (docs/security.md): not another document of
    the file, not another field of it (the plan is written by a workload's writers; the token is cutover's)."""
    if not SOURCES[git.source].needs_document:
        return  # helm-values: the values key, render-checked where ArgoCD's API renders the chart
    document = node.child("document")
    if git.document.kind != "Service":
        raise document.child("kind").fail(f"Service (cutover edits the plan's Service, {service.name}, and nothing "
                                          f"else)")
    if git.document.name != service.name:
        raise document.child("name").fail(f"{service.name} (the plan's service.name: cutover edits that Service "
                                          f"and nothing else)")
    if git.selector_path != "spec.selector":
        raise node.child("selectorPath").fail("spec.selector (cutover edits a Service's selector and nothing else)")


def _check_git_values(backends: Mapping[str, Backend], git: GitSettings, node: Field) -> None:
    """`gitValue` is what a helm-values scalar holds for a backend: only there, and then for every backend or none."""
    valued = [name for name, backend in backends.items() if backend.git_value is not None]
    if valued and not SOURCES[git.source].takes_git_value:
        takers = " or ".join(name for name, source in SOURCES.items() if source.takes_git_value)
        raise node.child(valued[0]).child("gitValue").fail(f"no gitValue (it is for git.source {takers} only)")
    if valued and len(valued) != len(backends):
        missing = next(name for name in backends if name not in valued)
        raise node.child(missing).child("gitValue").fail("a gitValue on every backend, or on none")
    if len({backends[name].git_value for name in valued}) != len(valued):
        raise node.child(valued[-1]).child("gitValue").fail("a gitValue different from the other backends'")
