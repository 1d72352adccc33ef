"""The commands that read and prove: verify, status, plan, diff. Each returns a `Report` for the CLI to print.

The phases that write (presync, postsync, run, rollback, syncfail) arrive with the orchestration;
they will live beside these and reuse `wait.prove_backend`. Called by `cli`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from cutover import engines, manifest, readiness
from cutover.cluster import Cluster
from cutover.errors import CutoverError, InvalidInput, TargetNotReady
from cutover.githost.base import GitHost
from cutover.plan import Plan
from cutover.wait import prove_backend

log = structlog.get_logger("cutover")


@dataclasses.dataclass
class Report:
    """What a command found: a summary line, text lines for people, and data for machines."""

    summary: str
    lines: list[str] = dataclasses.field(default_factory=list)
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    headline: bool = True  # print the summary above the lines (not above a patch meant for `git apply`)


async def verify(cluster: Cluster, plan: Plan, *, backend: str, wait: bool) -> Report:
    chosen = plan.backend(backend)
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name)
    proven = await prove_backend(cluster, plan, chosen, wait=wait)
    names = ", ".join(plan.verify.served_names)
    return Report(
        summary=(f"backend {backend} proven: {len(proven.pods)} pod(s) serve {names} "
                 f"(waited {proven.waited:.0f}s)"),
        lines=[f"  {proof.pod} {proof.address}: {proof.method} {', '.join(proof.proven)}" for proof in proven.proofs],
        data=proven.as_data(),
    )


async def status(cluster: Cluster, plan: Plan) -> Report:
    state = await _observe(cluster, plan)
    lines = [f"Service {plan.service.namespace}/{plan.service.name}: selector {state['selector']} "
             f"→ backend {state['liveBackend'] or '(none of the plan)'}; target {plan.target}"]
    lines += [f"  backend {name}: {info['ready']}/{info['pods']} Ready ({', '.join(info['states']) or 'no pods'})"
              for name, info in state["backends"].items()]
    live = state["liveBackend"]
    summary = ("nothing to do: the Service already selects the target" if live == plan.target
               else f"the Service selects {live or 'no plan backend'}; the plan's target is {plan.target}")
    return Report(summary=summary, lines=lines, data=state)


async def show_plan(cluster: Cluster, plan: Plan, *, host: GitHost | None) -> Report:
    """State, whether the target is provable right now, and the exact diff that would be committed."""
    report = await status(cluster, plan)
    target = plan.backend(plan.target)
    try:
        proven = await prove_backend(cluster, plan, target, wait=False)
        report.lines.append(f"  target {plan.target}: proven now on {len(proven.pods)} pod(s)")
        report.data["targetProof"] = proven.as_data()
    except (TargetNotReady, CutoverError) as exc:
        report.lines.append(f"  target {plan.target}: not provable now: {exc.message} [{exc.cause}]")
        report.data["targetProof"] = {"error": exc.message, "cause": exc.cause, "hint": exc.hint}
    report.lines += await _planned_diff(plan, host, report.data)
    return report


async def _planned_diff(plan: Plan, host: GitHost | None, data: dict[str, Any]) -> list[str]:
    if host is None:
        return ["  diff: no Git host configured"]
    try:
        current = await host.read(plan.git.path)
        edit = manifest.edit_selector(current.content, document=plan.git.document,
                                      selector_path=plan.git.selector_path,
                                      selector=plan.backend(plan.target).selector, source=plan.git.path)
    except CutoverError as exc:
        data["diff"] = {"error": exc.message, "cause": exc.cause, "hint": exc.hint}
        return [f"  diff: not available: {exc.message} [{exc.cause}]"]
    data["diff"] = {"changed": edit.changed, "patch": edit.diff(plan.git.path), "version": current.version}
    if not edit.changed:
        return [f"  diff: none, {plan.git.path} already selects {plan.target} (at {current.version[:12]})"]
    return [f"  diff against {plan.git.path} at {current.version[:12]}:",
            *(f"    {line}" for line in edit.diff(plan.git.path).splitlines())]


async def _observe(cluster: Cluster, plan: Plan) -> dict[str, Any]:
    service = await cluster.service(plan.service.namespace, plan.service.name)
    pods = await asyncio.gather(*(cluster.pods(plan.service.namespace, backend.selector)
                                  for backend in plan.backends.values()))
    live = next((name for name, backend in plan.backends.items() if dict(backend.selector) == service.selector),
                None)
    backends: dict[str, Any] = {}
    for (name, backend), (views, _) in zip(plan.backends.items(), pods, strict=True):
        backends[name] = {
            "engine": backend.engine, "engineProof": engines.method_for(backend.engine, plan.verify.proof),
            "pods": len(views), "ready": sum(1 for pod in views if pod.ready),
            "states": [f"{pod.name}={readiness.pod_state(pod)}" for pod in sorted(views, key=lambda p: p.name)],
        }
    return {"service": {"uid": service.uid, "clusterIP": service.cluster_ip,
                        "ports": [port.port for port in service.ports]},
            "selector": _selector_text(service.selector), "liveBackend": live, "target": plan.target,
            "backends": backends}


def _selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in selector.items()) or "(empty)"


def diff(plan: Plan, *, file: str, to: str | None, selector: str | None) -> Report:
    """Offline: the unified diff of the selector edit on a local copy of the file."""
    wanted = _wanted_selector(plan, to=to, selector=selector)
    try:
        text = Path(file).read_bytes().decode("utf-8")  # bytes, so CRLF line ends survive
    except OSError as exc:
        raise InvalidInput(f"--file {file}: cannot read: {exc.strerror}", hint="pass a local copy of the file") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"--file {file}: not UTF-8 text", hint="pass the YAML file itself") from exc
    edit = manifest.edit_selector(text, document=plan.git.document, selector_path=plan.git.selector_path,
                                  selector=wanted, source=file)
    if not edit.changed:
        return Report(summary=f"nothing to change: {file} already selects {_selector_text(wanted)}",
                      data={"changed": False})
    patch = edit.diff(plan.git.path)
    changed = sum(1 for line in patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    return Report(summary=f"{changed} line(s) change in {file}, all inside {plan.git.selector_path}",
                  lines=patch.splitlines(), data={"changed": True, "diff": patch}, headline=False)


def _wanted_selector(plan: Plan, *, to: str | None, selector: str | None) -> dict[str, str]:
    if (to is None) == (selector is None):
        raise InvalidInput("diff: expected exactly one of --to BACKEND or --selector K=V,K=V",
                           hint="name a backend of the plan, or spell the selector out")
    if to is not None:
        return dict(plan.backend(to, field="--to").selector)
    pairs = [part.partition("=") for part in (selector or "").split(",") if part.strip()]
    if not pairs or any(not key.strip() or sep != "=" for key, sep, _ in pairs):
        raise InvalidInput(f"--selector: expected K=V pairs separated by commas, found {selector!r}",
                           hint="e.g. --selector app.kubernetes.io/name=llm-reasoning-candle,component=predictor")
    return {key.strip(): value.strip() for key, _, value in pairs}
