"""What in the rendered Application would delay or break a hop's sync (docs/install.md, "Sync waves and deadlines").
Pure: reads the documents a render yields.

ArgoCD runs a sync phase by phase (PreSync, Sync, PostSync) and, inside a phase, wave by wave: a wave starts when
every resource of the waves before it is Healthy and every hook of them has completed, and hooks of one wave run
side by side (gitops-engine `pkg/sync/sync_tasks.go`, `sync_context.go`; argo-cd `docs/user-guide/sync-waves.md`).
cutover's gate ships at PreSync wave -1000 and its PostSync at wave 1000 (hooks/), so a user's own hooks run after
the gate decided and end before cutover verifies and commits the next hop. What can still go wrong is in the
user's render, and this module names it: a PreSync hook ordered at or before the gate, a PostSync hook at or after
cutover's, PostSync hooks that run on every hop of a handoff, engines in different waves (a recreate's swap
deadlocks: the target waits for the card the source, in a later wave, still holds), the Service in a later wave
than the engines (the switch waits for the health of everything before it), and a Deployment whose progress
deadline ends before its startup probe's budget (ArgoCD marks it Degraded and fails the sync long before the
engine's startup is over), and a recreate's `maxGap` shorter than the startup and the two pickups inside the gap.
Called by `cutover plan` and the PreSync gate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cutover.core.views import Probe
from cutover.plan import Backend, Plan

__all__ = ["Finding", "engine", "findings", "freed", "replicas"]

HOOK = "argocd.argoproj.io/hook"
WAVE = "argocd.argoproj.io/sync-wave"
HELM_HOOK = "helm.sh/hook"
HELM_WEIGHT = "helm.sh/hook-weight"
# Helm hooks ArgoCD maps to its phases (argo-cd docs/user-guide/helm.md, "Helm Hooks").
HELM_PHASES = {"pre-install": "PreSync", "pre-upgrade": "PreSync", "post-install": "PostSync",
               "post-upgrade": "PostSync"}
PROGRESS_DEADLINE = 600.0  # seconds: a Deployment's progressDeadlineSeconds when unset (apps/v1 defaults)
ENGINE_KINDS = ("Deployment", "StatefulSet", "InferenceService")
# What a recreate's gap holds beyond the target's startup (docs/install.md, "How long a switch takes"): per commit,
# seconds from the hook's commit to its sync's start, with the nudge (pod start, the operation's end, the refresh)
# and by ArgoCD's own look under its defaults (two periods and the jitter: the tail seen in ArgoCD's code); and the
# hooks around the two hops (the gate, the PostSync's proof and commit).
PICKUP = 30.0
PICKUP_BY_LOOK = 480.0
HOOKS = 30.0


@dataclasses.dataclass(frozen=True)
class Finding:
    cause: str  # a snake_case name, as causes are everywhere (docs/causes.md)
    message: str
    hint: str
    refuse: bool = False  # True: a hop of this plan cannot complete; `cutover plan` exits 2, the gate refuses


@dataclasses.dataclass(frozen=True)
class _Hook:
    kind: str
    name: str
    phases: frozenset[str]
    wave: int
    ours: str | None  # cutover's component (presync, postsync, syncfail) or None: the user's own

    def __str__(self) -> str:
        return f"{self.kind}/{self.name} (wave {self.wave})"


def findings(docs: Sequence[Mapping[str, Any]], plan: Plan) -> list[Finding]:
    """What the render `docs` (the Application's, as ArgoCD builds it) holds that would delay or break a hop."""
    hooks = [hook for doc in docs if (hook := _hook(doc)) is not None]
    return [*_around_gate(hooks), *_around_postsync(hooks, plan), *_engines(docs, plan), *_deadlines(docs, plan),
            *_gap(docs, plan), *_dark(docs, plan)]


def _around_gate(hooks: Sequence[_Hook]) -> Iterable[Finding]:
    gate = next((hook for hook in hooks if hook.ours == "presync"), None)
    if gate is None:
        return
    early = [hook for hook in hooks if hook.ours is None and "PreSync" in hook.phases and hook.wave <= gate.wave]
    if early:
        order = _order(early, gate, earlier=True)
        yield Finding("hook_before_gate", f"PreSync {_listed(early)} runs {order} cutover's gate {gate}: it acts "
                                          "on a revision the gate may then refuse",
                      f"give it a sync-wave above {gate.wave}, unless the gate must see it done (docs/install.md, "
                      "\"Sync waves and deadlines\")")


def _around_postsync(hooks: Sequence[_Hook], plan: Plan) -> Iterable[Finding]:
    ours = next((hook for hook in hooks if hook.ours == "postsync"), None)
    theirs = [hook for hook in hooks if hook.ours is None and "PostSync" in hook.phases]
    if ours is not None and (late := [hook for hook in theirs if hook.wave >= ours.wave]):
        order = _order(late, ours, earlier=False)
        yield Finding("hook_after_postsync", f"PostSync {_listed(late)} runs {order} cutover's PostSync {ours}: "
                                             "cutover may verify and commit the next hop while it still runs or "
                                             "fails", f"give it a sync-wave below {ours.wave}")
    if theirs and plan.handoff.strategy in ("bridge", "recreate"):
        yield Finding("hooks_on_every_hop", f"PostSync {_listed(theirs)} runs on every hop of a "
                                            f"{plan.handoff.strategy} handoff, also in the sync that frees "
                                            f"{'the source' if plan.handoff.strategy == 'recreate' else 'it'} while "
                                            "the Service still selects it: a smoke test through the Service fails "
                                            "that sync", "let such a test pass while the Service has no ready "
                                                         "endpoints, or run it from cutover's verification instead")


def _engines(docs: Sequence[Mapping[str, Any]], plan: Plan) -> Iterable[Finding]:
    found = {name: doc for name, backend in plan.backends.items() if (doc := engine(docs, backend)) is not None}
    waves = {name: _wave(doc) for name, doc in found.items()}
    if len(set(waves.values())) > 1:
        swap = plan.handoff.strategy == "recreate"
        yield Finding("engines_in_two_waves",
                      f"the engines sit in different sync waves ({_waves(waves, found)}): "
                      + ("a recreate's swap frees one and starts the other in one sync, and ArgoCD waits for the "
                         "earlier wave's engine to become Healthy while the later wave's still holds its cards: "
                         "the sync hangs until the progress deadline fails it" if swap else
                         "ArgoCD starts one only after the other is Healthy"),
                      "give the engines one argocd.argoproj.io/sync-wave", refuse=swap)
    service = next((doc for doc in docs if _named(doc, "Service", plan.service.name)), None)
    if service is not None and waves and _wave(service) > max(waves.values()):
        yield Finding("service_after_engines",
                      f"Service/{plan.service.name} (wave {_wave(service)}) sits in a later wave than the engines "
                      f"({_waves(waves, found)}): every switch waits until everything before it is Healthy, and a "
                      "Degraded resource there fails the switch's sync", "give the Service the engines' sync-wave "
                                                                         "or an earlier one")


def _deadlines(docs: Sequence[Mapping[str, Any]], plan: Plan) -> Iterable[Finding]:
    for name, backend in plan.backends.items():
        doc = engine(docs, backend)
        if doc is None or doc.get("kind") != "Deployment":  # a StatefulSet has no progress deadline
            continue
        spec = doc.get("spec") or {}
        deadline = float(spec.get("progressDeadlineSeconds", PROGRESS_DEADLINE))
        budget = _budget(doc)
        startup = min(budget, plan.verify.max_wait) if budget else 0.0
        if startup > deadline:
            unset = "" if "progressDeadlineSeconds" in spec else ", the default"
            yield Finding("progress_deadline_before_startup",
                          f"Deployment/{_name(doc)} ({name}) has progressDeadlineSeconds {deadline:g}{unset}, and "
                          f"its startup probe allows {budget:g}s: a sync that starts it fails at {deadline:g}s, "
                          "before any hook runs, while the engine may still be loading",
                          f"set progressDeadlineSeconds to at least {startup + 60:g}")


def _gap(docs: Sequence[Mapping[str, Any]], plan: Plan) -> Iterable[Finding]:
    """recreate: handoff.maxGap against what the gap holds (docs/install.md, "How long a switch takes"): the
    target's startup, two commits picked up by ArgoCD (the free's, the switch's) and the hooks around them."""
    if plan.handoff.strategy != "recreate" or plan.handoff.max_gap is None:
        return
    budget = _budget(engine(docs, plan.backends[plan.target]))
    if not budget:
        return  # no startup probe in the render: nothing to add up
    nudged, pickup = _pickup(plan)
    need = min(budget, plan.verify.max_wait) + 2 * pickup + HOOKS
    if plan.handoff.max_gap < need:
        how = "the nudge's" if nudged else "ArgoCD's own look at Git (argocd.refresh: false), up to"
        yield Finding("max_gap_short",
                      f"handoff.maxGap ({plan.handoff.max_gap:g}s) is shorter than the gap a recreate holds: the "
                      f"target's startup ({min(budget, plan.verify.max_wait):g}s), two commits picked up by ArgoCD "
                      f"({how} {pickup:g}s each) and {HOOKS:g}s of hooks: {need:g}s; a gap that runs out restores "
                      "the source", f"set handoff.maxGap to at least {need:g}s")


def _dark(docs: Sequence[Mapping[str, Any]], plan: Plan) -> Iterable[Finding]:
    """bridge: the served names the bridge does not carry (`plan.dark_names`) go unanswered from the switch to the
    bridge until the switch off it: the far end's startup, three commits picked up (to the bridge, the free and
    restore, off it) and the hooks; as long again on a way back through the bridge. handoff.maxGap is the consent
    to the way there (a target not proven within it sends the path back): shorter than that figure, it is said."""
    bridge, dark = plan.handoff.bridge, plan.dark_names
    if bridge is None or not dark:
        return
    _, pickup = _pickup(plan)

    def lasting(backend: str) -> tuple[float, str]:
        budget = _budget(engine(docs, plan.backends[backend]))
        startup = min(budget, plan.verify.max_wait) if budget else plan.verify.max_wait
        need = startup + 3 * pickup + HOOKS
        return need, f"up to about {need:g}s ({backend}'s startup {startup:g}s, three commits picked up, the hooks)"

    there, said = lasting(plan.target)
    others = [name for name in plan.backends if name not in (plan.target, bridge)]
    back = f"; on a way back through the bridge to {others[0]}, {lasting(others[0])[1]}" if len(others) == 1 else ""
    one = len(dark) == 1
    yield Finding("bridge_names_dark",
                  f"{', '.join(dark)} {'is' if one else 'are'} not among handoff.bridgeNames: the bridge {bridge} "
                  f"does not answer {'it' if one else 'them'}, so from the switch to {bridge} until the switch to "
                  f"{plan.target} {'it goes' if one else 'they go'} unanswered, {said}{back}; handoff.maxGap "
                  f"({plan.handoff.max_gap or 0.0:g}s) is the consent to it",
                  "add them to handoff.bridgeNames where the bridge can serve them; otherwise this is a gap in "
                  "service for those names, as recreate's is (docs/capacity.md)")
    if plan.handoff.max_gap is not None and plan.handoff.max_gap < there:
        yield Finding("max_gap_short",
                      f"handoff.maxGap ({plan.handoff.max_gap:g}s) is shorter than the gap the bridge leaves for "
                      f"{', '.join(dark)}: {there:g}s; a gap that runs out sends the path back to the source",
                      f"set handoff.maxGap to at least {there:g}s")


def _hook(doc: Mapping[str, Any]) -> _Hook | None:
    annotations = _annotations(doc)
    phases = {phase.strip() for phase in str(annotations.get(HOOK, "")).split(",") if phase.strip()}
    if not phases:
        phases = {HELM_PHASES[hook.strip()] for hook in str(annotations.get(HELM_HOOK, "")).split(",")
                  if hook.strip() in HELM_PHASES}
    if not phases:
        return None
    labels = ((((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})
    ours = labels.get("app.kubernetes.io/component") if labels.get("app.kubernetes.io/name") == "cutover" else None
    return _Hook(str(doc.get("kind", "")), _name(doc), frozenset(phases), _wave(doc), ours)


def engine(docs: Sequence[Mapping[str, Any]], backend: Backend) -> Mapping[str, Any] | None:
    """The backend's workload in the render: the one its `workload:` names, else the one whose pods its selector
    picks."""
    for doc in docs:
        if backend.workload is not None:
            if _named(doc, backend.workload.kind, backend.workload.name):
                return doc
        elif doc.get("kind") in ENGINE_KINDS and _selects(backend.selector, _pod_labels(doc)):
            return doc
    return None


def freed(docs: Sequence[Mapping[str, Any]], plan: Plan) -> list[Backend]:
    """The backends other than the target whose workload the render stops (replicas 0): their pods go in the sync
    that applies it (a recreate's swap, a bridge's hop)."""
    return [backend for backend in plan.backends.values() if backend.name != plan.target and
            (doc := engine(docs, backend)) is not None and replicas(doc) == 0]


def replicas(doc: Mapping[str, Any]) -> int | None:
    """How many pods a rendered Deployment or StatefulSet asks for (1 when unset, as the API defaults it); None for
    another kind (an InferenceService scales by its own rules)."""
    if doc.get("kind") not in ("Deployment", "StatefulSet"):
        return None
    value = (doc.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) else None


def _selects(selector: Mapping[str, str], labels: Mapping[str, Any]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _pod_labels(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})


def _budget(doc: Mapping[str, Any] | None) -> float:
    """An engine's startup budget, by its longest startup probe (0: no engine, or no startup probe in it)."""
    return max((probe.budget for probe in _probes(doc)), default=0.0) if doc is not None else 0.0


def _pickup(plan: Plan) -> tuple[bool, float]:
    """Whether a hop's commit is nudged (argocd.refresh), and so how long ArgoCD takes to pick it up at most."""
    nudged = plan.argocd is not None and plan.argocd.refresh
    return nudged, PICKUP if nudged else PICKUP_BY_LOOK


def _probes(doc: Mapping[str, Any]) -> Iterable[Probe]:
    pod = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {})
    for container in pod.get("containers") or ():
        spec = container.get("startupProbe")
        if spec:
            yield Probe(initial_delay=float(spec.get("initialDelaySeconds", 0)),
                        period=float(spec.get("periodSeconds", 10)),
                        failure_threshold=int(spec.get("failureThreshold", 3)))


def _wave(doc: Mapping[str, Any]) -> int:
    """ArgoCD's reading (gitops-engine `pkg/sync/syncwaves/waves.go`): the sync-wave annotation, else Helm's hook
    weight, else 0; a value that is not an integer counts as 0."""
    annotations = _annotations(doc)
    text = annotations.get(WAVE, annotations.get(HELM_WEIGHT, "0"))
    try:
        return int(str(text).strip())
    except ValueError:
        return 0


def _annotations(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return (doc.get("metadata") or {}).get("annotations") or {}


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name", ""))


def _named(doc: Mapping[str, Any], kind: str, name: str) -> bool:
    return doc.get("kind") == kind and _name(doc) == name


def _listed(hooks: Sequence[_Hook]) -> str:
    return ", ".join(str(hook) for hook in hooks)


def _order(hooks: Sequence[_Hook], ours: _Hook, *, earlier: bool) -> str:
    same = {hook.wave == ours.wave for hook in hooks}
    other = "before" if earlier else "after"
    return "beside" if same == {True} else other if same == {False} else f"{other} or beside"


def _waves(waves: Mapping[str, int], found: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"{name}'s {found[name].get('kind')}/{_name(found[name])} at {wave}"
                     for name, wave in sorted(waves.items()))
