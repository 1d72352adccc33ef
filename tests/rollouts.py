"""A fleet's RollingSync as ArgoCD keeps it in the cluster it runs in (docs/fleet.md): an ApplicationSet stepping
a canary and the world's own Application, llm-serving, each object checked against ArgoCD's CRDs. Shared by the
step-order tests (tests/flows/test_step_order.py) and the hub's API (tests/argocd/test_api_contract.py)."""

from __future__ import annotations

from typing import Any

import contracts
from cutover import plan
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.sources import yaml_edit

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
CANARY = "llm-serving-canary"  # step 1; the world's own Application, llm-serving, is step 2
APPSETS = "argoproj.io/v1alpha1/applicationsets"


def fleet_plan(world: World, **overrides: Any) -> plan.Plan:
    text = world.plan_text(**overrides).replace("target: candle\n", "").replace("rollback:\n  auto: true\n", "")
    (one,) = plan.parse("mode: fleet\n" + text)
    return one


def fleet_commit(repo: BareRepo, the_plan: plan.Plan) -> str:
    content, _ = repo.read(PATH)  # type: ignore[misc]
    edit = yaml_edit.edit_selector(content, document=the_plan.git.document, selector_path="spec.selector",
                                   selector=the_plan.backends["candle"].selector)
    return repo.commit({PATH: edit.after}, "Fleet: reasoning-long to candle-vllm everywhere\n")


def application(name: str, *, sync: str, revision: str, operation: str | None = None,
                history: tuple[str, ...] = ()) -> dict[str, Any]:
    """An Application the ApplicationSet `fleet` generated (its controller ownerReference), as ArgoCD keeps it."""
    app = sim_argocd.application(revision=revision)
    app["metadata"]["name"] = name
    app["metadata"]["ownerReferences"] = [{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                                           "name": "fleet", "uid": "5f0c4b1e-0000-4000-8000-000000000001",
                                           "controller": True, "blockOwnerDeletion": True}]
    app["spec"].pop("syncPolicy")  # RollingSync turns the generated Applications' automated sync off
    app["status"]["sync"]["status"] = sync
    app["status"]["history"] = [{"id": index, "revision": deployed, "deployedAt": "2026-12-07T05:00:00Z",
                                 "deployStartedAt": "2026-12-07T04:59:50Z", "source": app["spec"]["source"]}
                                for index, deployed in enumerate(history)]
    if operation is not None:
        app["status"]["operationState"] = {"phase": operation, "startedAt": "2026-12-07T05:00:00Z",
                                           "message": "one or more synchronization tasks completed unsuccessfully"
                                           if operation == "Failed" else "",
                                           "operation": {"sync": {"revision": revision}},
                                           "syncResult": {"revision": revision}}
    contracts.check_application(app)
    return app


def rollout(world: World, *, seed: str, fleet: str, canary: dict[str, Any], strategy: bool = True) -> None:
    """The ApplicationSet as RollingSync left it when it started step 2 from step 1's stale status: step 1 Healthy
    (for the revision before), step 2 Progressing; this cluster's Application syncing the fleet's commit."""
    appset = {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
              "metadata": {"name": "fleet", "namespace": "argocd"},
              "spec": {"generators": [{"list": {"elements": []}}],
                       "template": {"metadata": {"name": "x"}, "spec": {"project": "llm-serving", "destination": {}}},
                       **({"strategy": {"type": "RollingSync", "rollingSync": {"steps": [
                           {"matchExpressions": [{"key": "ring", "operator": "In", "values": [ring]}]}
                           for ring in ("canary", "main")]}}} if strategy else {})},
              "status": {"applicationStatus": [
                  {"application": CANARY, "step": "1", "status": "Healthy", "targetRevisions": [seed],
                   "message": "Application resource completed a sync successfully"},
                  {"application": "llm-serving", "step": "2", "status": "Progressing", "targetRevisions": [fleet],
                   "message": "Application resource became Progressing"}]}}
    assert not list(contracts.crd_validator("applicationset").iter_errors(appset))
    world.kube.apply(APPSETS, appset)
    world.kube.apply(sim_argocd.APPS, application("llm-serving", sync="OutOfSync", revision=fleet,
                                                  operation="Running", history=(seed,)))
    world.kube.apply(sim_argocd.APPS, canary)
