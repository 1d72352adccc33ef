"""How each command's typed result reads: a summary (the outcome line's tail), lines for people, data for
machines (`--output json`). Pure; called by the CLI only, the one place a `Report` is built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from cutover.argocd.rollout import ClusterStep
from cutover.core.results import (
    Advanced,
    Audited,
    Awaiting,
    Completed,
    Dark,
    Diffed,
    Freed,
    Gated,
    Held,
    Nudged,
    Proven,
    Restored,
    Result,
    Shown,
    Status,
    SyncFailed,
    Unowned,
    Verified,
    WouldAdvance,
    runs_on,
)
from cutover.plan import Plan


@dataclasses.dataclass
class Report:
    """What a command found: a summary line, text lines for people, and data for machines."""

    summary: str
    lines: list[str] = dataclasses.field(default_factory=list)
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    headline: bool = True  # print the summary above the lines (not above a patch meant for `git apply`)
    raw: str | None = None  # text printed as it is after the lines (a patch: its CR and newlines are its own)
    blocked: dict[str, Any] | None = None  # `cutover plan` as a pre-flight gate: why the plan cannot go ahead now


def render(result: Result, plan: Plan | None) -> Report:
    """`plan` is None only for `cutover diff --selector` without a plan."""
    if isinstance(result, Diffed):
        return _diffed(result)
    assert plan is not None
    renderer: Callable[[Any, Plan], Report] = _RENDERERS[type(result)]
    return renderer(result, plan)


def _proven(proven: Proven, plan: Plan) -> Report:
    names = ", ".join(plan.verify.served_names)
    return Report(f"backend {proven.backend} proven: {len(proven.pods)} pod(s) serve {names} "
                  f"(waited {proven.waited:.0f}s)",
                  lines=[f"  {proof.pod} {proof.address}: {proof.method} {', '.join(proof.proven)}"
                         for proof in proven.proofs] + _table(proven),
                  data=proven.as_data())


def _table(proven: Proven) -> list[str]:
    """The fitness table, old beside new (docs/fitness.md), under a proof."""
    return ["  fitness:", *(f"    {line}" for line in proven.fitness.table())] if proven.fitness else []


def _gated(gated: Gated, plan: Plan) -> Report:
    if gated.backend is not None and gated.after is not None:
        return Report(f"{gated.revision} stops {gated.after} and starts {gated.backend}, the selector as it is (a "
                      f"fleet's recreate): {gated.backend} fits once {gated.after} is gone; the fleet's next commit "
                      f"switches to it, proven first (the name unanswered meanwhile, handoff.maxGap "
                      f"{plan.handoff.max_gap or 0:g}s)",
                      data={"changed": False, "backend": gated.backend, "stops": gated.after})
    if not gated.changed:
        return Report(f"no selector change in {gated.revision}: nothing to gate", data={"changed": False})
    if gated.backend is None or gated.proven is None:
        return Report(f"the selector in {gated.revision} is no backend of the plan: not gated",
                      data={"changed": True, "backend": None})
    return Report(f"{gated.revision} switches the Service to {gated.backend}: proven on {len(gated.proven.pods)} "
                  f"pod(s)", data={"changed": True, "backend": gated.backend, "proof": gated.proven.as_data()})


def _advanced(advanced: Advanced, plan: Plan) -> Report:
    verb = "committed" if advanced.committed else "already in Git at"
    data: dict[str, object] = {"committed": advanced.committed, "commit": advanced.sha, "url": advanced.url,
                               "id": advanced.id, "to": advanced.to}
    if advanced.toward is None:
        return Report(f"{advanced.source} -> {advanced.to}: {verb} {advanced.sha[:12]}", data=data)
    names = ", ".join(plan.handoff.bridge_names)
    return Report(f"{advanced.source} -> {advanced.to} (the bridge, for {names}): {verb} {advanced.sha[:12]}; the "
                  f"next sync checks it, then frees {advanced.source} for {advanced.toward}",
                  data={**data, "toward": advanced.toward})


def _freed(freed: Freed, plan: Plan) -> Report:
    if freed.dry_run:
        return Report(f"dry run: {freed.backend} would be drained and freed for {freed.to}; nothing was written",
                      data={"dryRun": True, "freed": freed.backend, "to": freed.to})
    verb = "freed in" if freed.committed else "already freed in Git"
    drained = freed.drained
    how = (f"drained in {drained.get('seconds')}s" if drained.get("complete") else
           f"drain timed out with {drained.get('running')} still running") if drained else "not drained"
    within = f"while {plan.handoff.bridge} serves {', '.join(plan.handoff.bridge_names)}" \
        if plan.handoff.strategy == "bridge" else "within handoff.maxGap"
    return Report(f"{freed.backend} {verb} {freed.sha[:12]} ({how}) to make room for {freed.to}; the next sync "
                  f"waits for {freed.to} {within}",
                  data={"freed": freed.backend, "to": freed.to, "committed": freed.committed, "commit": freed.sha,
                        "url": freed.url, "drain": drained})


def _restored(restored: Restored, plan: Plan) -> Report:
    if restored.dry_run:
        return Report(f"dry run: {restored.backend}'s workload would be restored first; nothing was written",
                      data={"dryRun": True, "restored": restored.backend, "to": restored.to})
    verb = "restored in" if restored.committed else "already restored in Git"
    return Report(f"{restored.backend} {verb} {restored.sha[:12]}; the next step waits for its pods",
                  data={"restored": restored.backend, "to": restored.to, "committed": restored.committed,
                        "commit": restored.sha, "url": restored.url, "value": restored.value})


def _would_advance(would: WouldAdvance, plan: Plan) -> Report:
    return Report(f"dry run: {would.source} -> {would.to} would be committed (proven on {len(would.proven.pods)} "
                  "pod(s)); nothing was written", lines=would.diff.splitlines(),
                  data={"dryRun": True, "to": would.to, "diff": would.diff, "proof": would.proven.as_data()})


def _held(held: Held, plan: Plan) -> Report:
    # the commit and its author, named: a Cutover-Hold trailer is only text, and anyone who can push writes it
    by = f" ({held.author})" if held.author else ""
    return Report(f"held on {held.on} by rollback {held.commit[:12]}{by}: {plan.resume(held.on)}, or revert "
                  f"that commit if nobody here made it", data={"held": held.on})


def _awaiting(awaiting: Awaiting, plan: Plan) -> Report:
    if awaiting.restore is not None:
        return Report(f"{awaiting.to} restored in {awaiting.restore[:12]}, which this sync "
                      f"({(awaiting.syncing or '?')[:12]}) does not hold: the sync of it starts {awaiting.to}'s pods "
                      f"and its PostSync takes the next step", data={"applied": False, "restore": awaiting.restore})
    return Report(f"Git selects {awaiting.to}; waiting for ArgoCD to apply it", data={"applied": False})


def _completed(completed: Completed, plan: Plan) -> Report:
    report = _verified(completed.verified, plan)
    report.data.update(commit=completed.commit, to=completed.to)
    return report


def fleet(name: str, steps: list[ClusterStep]) -> Report:
    """`cutover status --fleet`: a line per cluster, in step order."""
    done = sum(1 for step in steps if step.status == "Healthy" and step.sync == "Synced")
    return Report(f"fleet {name}: {done} of {len(steps)} cluster(s) Healthy and Synced",
                  lines=[f"  {step.said()}" for step in steps],
                  data={"fleet": name, "clusters": [step.as_data() for step in steps]})


def _dark(dark: Dark, plan: Plan) -> Report:
    return Report(f"{dark.revision} stopped {dark.backend}, which the Service still selects, and started {dark.to} (a "
                  f"fleet's recreate): the name is unanswered until the fleet's next commit switches to {dark.to}, "
                  f"which its gate proves first (handoff.maxGap {plan.handoff.max_gap or 0:g}s)",
                  data={"backend": dark.backend, "to": dark.to, "dark": True})


def _unowned(unowned: Unowned, plan: Plan) -> Report:
    return Report(f"the selector in {unowned.revision} is no backend of the plan: not {unowned.what}",
                  data={"backend": None})


def _verified(verified: Verified, plan: Plan) -> Report:
    gap = f"; the gap in service lasted {verified.gap:.0f}s" if verified.gap is not None else ""
    same = "same object, " if verified.same_object else ""
    return Report(f"verified: the Service selects {verified.backend}, {same}{len(verified.endpoints)} "
                  f"endpoint(s){gap}{_retired_said(verified.retired)}",
                  data={"verified": True, "endpoints": list(verified.endpoints),
                        **({"gapSeconds": round(verified.gap, 1)} if verified.gap is not None else {}),
                        **_retired_data(verified.retired)})


def _retired_said(retired: Freed | None) -> str:
    if retired is None:
        return ""
    return f"; {retired.backend} retired (drained and freed in {retired.sha[:12]})" if retired.sha else \
        f"; {retired.backend} retired (freed in Git already)"


def _retired_data(retired: Freed | None) -> dict[str, Any]:
    return {} if retired is None else {"retired": {"backend": retired.backend, "commit": retired.sha,
                                                   "drain": retired.drained}}


def _sync_failed(failed: SyncFailed, plan: Plan) -> Report:
    waits = f"; {runs_on(failed.waiting)}" if failed.waiting else ""
    waiting = {"waiting": list(failed.waiting)} if failed.waiting else {}
    if failed.rollback_commit is None:
        return Report(f"{failed.message}; the Service still selects {failed.serving}; nothing changed{waits}",
                      data={"rolledBack": False, **waiting})
    return Report(f"{failed.message}; Git goes back to {failed.serving} (held) in {failed.rollback_commit[:12]}"
                  f"{waits}", data={"rolledBack": True, "commit": failed.rollback_commit, **waiting})


def _audited(audited: Audited, plan: Plan) -> Report:
    summaries = {"continued": f"took the handoff's next hop toward {audited.backend}, after "
                              f"{(audited.commit or '')[:12]} was synced without hooks: {audited.detail}",
                 "verified": f"verified the switch to {audited.backend} that no hook verified "
                             f"({(audited.commit or '')[:12]})",
                 "checked": f"the live backend {audited.backend} still serves every name",
                 "skipped": f"nothing to audit: {audited.detail}"}
    return Report(summaries[audited.state] + _retired_said(audited.retired),
                  data={"audit": audited.state, "backend": audited.backend, "commit": audited.commit,
                        "detail": audited.detail, **_retired_data(audited.retired)})


def _nudged(nudged: Nudged, plan: Plan) -> Report:
    commit = (nudged.commit or "")[:12]
    summaries = {"taken": f"ArgoCD started the sync of {commit} (after {nudged.waited:g}s, {nudged.refreshes} "
                          "refresh(es))",
                 "nothing": f"nothing to nudge: ArgoCD holds {commit or 'every commit of this plan'} already",
                 "running": f"the operation before {commit} still runs: ArgoCD syncs it when that ends",
                 "not_taken": f"ArgoCD did not start a sync of {commit} after {nudged.refreshes} refreshes"}
    return Report(summaries[nudged.state], data={"nudge": nudged.state, "commit": nudged.commit,
                                                 "waited": nudged.waited, "refreshes": nudged.refreshes})


def _status(status: Status, plan: Plan) -> Report:
    state = status.state
    live = state["liveBackend"]
    aimed = "the fleet's commits choose the backend" if plan.fleet else f"target {plan.target}"
    lines = [f"Service {plan.service.namespace}/{plan.service.name}: selector {state['selector']} "
             f"→ backend {live or '(none of the plan)'}; {aimed}"]
    lines += [f"  backend {name}: {info['ready']}/{info['pods']} Ready ({', '.join(info['states']) or 'no pods'})"
              for name, info in state["backends"].items()]
    lines += [f"  capacity: {info['capacity']['summary']}" for info in state["backends"].values() if "capacity" in info]
    lines += [f"  proof of {name}: {info['proofNote']}" for name, info in state["backends"].items()
              if info.get("proofNote")]
    if state.get("lease"):
        held = state["lease"]
        lines.append(f"  in progress: the Lease is held by {held['holder']} (until {held['expires']})")
    if state.get("handoff"):
        lines.append(f"  handoff: {_handoff_line(state['handoff'])}")
    summary = (f"a fleet's cluster: the Service selects {live or 'no plan backend'}; the fleet's commits choose "
               f"the backend, cutover gates and verifies each sync (docs/fleet.md)" if plan.fleet else
               "nothing to do: the Service already selects the target" if live == plan.target
               else f"the Service selects {live or 'no plan backend'}; the plan's target is {plan.target}")
    return Report(summary=summary, lines=lines, data=state)


def _shown(shown: Shown, plan: Plan) -> Report:
    report = _status(shown.status, plan)
    report.data = dict(report.data)
    if shown.proven is not None:
        report.lines.append(f"  target {plan.target}: proven now on {len(shown.proven.pods)} pod(s)")
        report.lines += _table(shown.proven)
        report.data["targetProof"] = shown.proven.as_data()
    elif shown.started_by_handoff:
        report.lines.append(f"  target {plan.target}: stopped in Git; the handoff starts it (strategy "
                            f"{plan.handoff.strategy}), then waits for it on its startup timeline and proves it")
        report.data["targetProof"] = {"stopped": True, "strategy": plan.handoff.strategy}
    elif shown.unprovable is not None:
        report.lines.append(f"  target {plan.target}: not provable now: {shown.unprovable['error']} "
                            f"[{shown.unprovable['cause']}]")
        report.data["targetProof"] = shown.unprovable
    report.blocked = shown.blocked
    report.data["ready"] = report.blocked is None
    report.lines += _diff_lines(shown, plan, report.data)
    report.lines += [f"  drain safety: {warning}" for warning in shown.drain]
    report.data["drainSafety"] = list(shown.drain)
    report.lines += [f"  jobs: {line}" for line in shown.jobs]
    report.data["jobs"] = {"notes": list(shown.jobs), "syncTimeoutAtLeast": shown.sync_timeout}
    report.lines += [f"  sync order: {found['message']} [{found['cause']}] — hint: {found['hint']}"
                     for found in shown.sync_order]
    report.data["syncOrder"] = list(shown.sync_order)
    return report


def _handoff_line(state: dict[str, Any]) -> str:
    if "error" in state:
        return f"not readable: {state['error']} [{state['cause']}]"
    steps = "; ".join(f"{name} {step['step']} in {step['commit'][:12]}" + (f" (holds on {step['hold']})"
                                                                           if step.get("hold") else "")
                      for name, step in sorted(state["steps"].items()))
    gap = state.get("gap")
    since = f"({', '.join(gap['names'])} unanswered since the switch to the bridge)" if gap and gap.get("names") \
        else f"since {gap['source']} was freed" if gap else ""
    open_gap = f"; gap open for {gap['seconds']}s {since}, {gap['left']}s of maxGap left" if gap else ""
    bridge = state.get("bridge")
    on_bridge = (f"; on the bridge {bridge['backend']} toward {bridge['toward']} since {bridge['commit'][:12]}"
                 if bridge else "")
    return (f"strategy {state['strategy']}" + (f", Git selects {state['git']}" if state.get("git") else "")
            + f", freed in Git: {', '.join(state['freed']) or 'none'}"
            + (f"; last steps: {steps}" if steps else "") + open_gap + on_bridge
            + (f"; next: {state['next']}" if state.get("next") else "")
            + (f"; {state['retire']['backend']} retired from {state['retire']['at']}" if state.get("retire") else ""))


def _diff_lines(shown: Shown, plan: Plan, data: dict[str, Any]) -> list[str]:
    diff = shown.diff
    if diff is None:
        return ["  diff: no Git host configured"]
    data["diff"] = diff
    if "error" in diff:
        return [f"  diff: not available: {diff['error']} [{diff['cause']}]"]
    if not diff["changed"]:
        return [f"  diff: none, {shown.path} already selects {plan.target} (at {diff['version'][:12]})"]
    return [f"  diff against {shown.path} at {diff['version'][:12]}:",
            *(f"    {line}" for line in diff["patch"].splitlines())]


def _diffed(diffed: Diffed) -> Report:
    if not diffed.patch:
        return Report(f"nothing to change: {diffed.file} already selects {diffed.selector}", data={"changed": False},
                      headline=False)  # said once, by the outcome line
    changed = sum(1 for line in diffed.patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
    return Report(f"{changed} line(s) change in {diffed.file}, all inside {diffed.selector_path}",
                  raw=diffed.patch, data={"changed": True, "diff": diffed.patch}, headline=False)


_RENDERERS: dict[type, Callable[[Any, Plan], Report]] = {
    Proven: _proven, Gated: _gated, Held: _held, Advanced: _advanced, Freed: _freed, Restored: _restored,
    WouldAdvance: _would_advance,
    Awaiting: _awaiting, Verified: _verified, Completed: _completed, SyncFailed: _sync_failed, Audited: _audited,
    Nudged: _nudged, Unowned: _unowned, Dark: _dark,
    Status: _status,
    Shown: _shown,
}
