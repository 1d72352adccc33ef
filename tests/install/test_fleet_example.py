"""The fleet example (manifests/examples/fleet, docs/fleet.md), rendered by the real kustomize: the ApplicationSet
holds to ArgoCD's own CRD, each Application it generates syncs under its project, every cluster renders the fleet's
hooks and none of a single cluster's, and the mark of a verified switch carries whatever selector the fleet's commit
writes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from test_install import PROJECTS, build, violations, yaml_docs

import contracts
from cutover import plan
from cutover.plan import GitDocument
from cutover.sources import yaml_edit

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "manifests" / "examples" / "fleet"
SERVICE = "manifests/examples/llm-serving/workload/service.yaml"


def applicationset(path: str = "applicationset.yaml") -> dict[str, Any]:
    (found,) = yaml_docs((FLEET / path).read_text())
    return found


def generated(path: str = "applicationset.yaml") -> list[dict[str, Any]]:
    """The Applications the list generator makes, as the go template fills them in."""
    spec = applicationset(path)["spec"]
    template = spec["template"]
    apps = []
    for element in spec["generators"][0]["list"]["elements"]:
        text = repr(template)
        for key, value in element.items():
            text = text.replace("{{." + key + "}}", value)
        assert "{{" not in text
        apps.append(eval(text))  # noqa: S307 -- a repr of plain dicts and strings, written just above
    return apps


def labels_of(objects: list[dict[str, Any]], name: str) -> dict[str, str]:
    (found,) = [doc for doc in objects if doc["metadata"]["name"] == name]
    return dict(found["metadata"].get("labels") or {})


def test_the_applicationset_holds_to_argocds_crd_and_steps_through_the_rings() -> None:
    found = applicationset()
    errors = [error.message for error in contracts.crd_validator("applicationset").iter_errors(found)]
    assert errors == []
    steps = found["spec"]["strategy"]["rollingSync"]["steps"]
    rings = [step["matchExpressions"][0]["values"] for step in steps]
    assert found["spec"]["strategy"]["type"] == "RollingSync" and rings == [["canary"], ["main"]]
    assert "automated" not in found["spec"]["template"]["spec"].get("syncPolicy", {})  # RollingSync syncs


def test_every_cluster_renders_the_fleets_hooks_and_none_that_write() -> None:
    objects = build(FLEET / "workload")
    names = sorted(f"{doc['kind']}/{doc['metadata']['name']}" for doc in objects
                   if doc["metadata"].get("namespace") == "cutover")
    assert names == ["ConfigMap/cutover-plan", "ConfigMap/cutover-verified-fleet", "Job/cutover-presync-fleet",
                     "Job/cutover-syncfail-fleet", "Job/cutover-verify-fleet"]
    (configmap,) = [doc for doc in objects if doc["metadata"]["name"] == "cutover-plan"]
    (shared,) = plan.parse(configmap["data"]["plan.yaml"])
    assert shared.fleet and shared.target == "" and not shared.rollback_auto
    assert shared.argocd is not None and shared.argocd.application == ""  # found in each hook's tracking
    (service,) = [doc for doc in objects if doc["kind"] == "Service"]
    assert labels_of(objects, "cutover-verified-fleet") == service["spec"]["selector"]
    assert shared.git.path == SERVICE
    for app in generated():
        assert app["spec"]["project"] == "llm-fleet"
        assert violations(app, PROJECTS["llm-fleet"], objects) == [], app["metadata"]["name"]


def test_the_fleets_commit_changes_the_mark_so_no_cluster_is_synced_before_it_is_verified(tmp_path: Path) -> None:
    """The fleet's one commit (the candle selector in the shared Service file) changes the mark's labels: each
    cluster's Application is OutOfSync until the mark's wave, after the verifier's, applied it."""
    for part in ("manifests", "hooks", "jobs", "fleet"):
        shutil.copytree(ROOT / part, tmp_path / part)
    service = tmp_path / SERVICE
    candle = {"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"}
    service.write_text(yaml_edit.edit_selector(service.read_text(), document=GitDocument(
        "Service", "reasoning-long-predictor"), selector_path="spec.selector", selector=candle).after)
    objects = build(tmp_path / "manifests" / "examples" / "fleet" / "workload")
    assert labels_of(objects, "cutover-verified-fleet") == candle


# --- Kargo as the fleet's engine (manifests/examples/fleet/kargo, docs/fleet.md "Kargo") -------------------------
# Kargo's CRDs and its step schemas are not served by any registry this suite installs from (the Go module proxy
# refuses github.com/akuity/kargo): the Stages are held here to what cutover needs of them, and were checked against
# Kargo's own Stage, Warehouse and Project CRDs and its argocd-update schema by hand (docs/fleet.md says which).

KARGO = "kargo/applicationset.yaml"


def kargo() -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml_docs((FLEET / "kargo" / "kargo.yaml").read_text()):
        found.setdefault(doc["kind"], []).append(doc)
    return found


def seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(count) * units[unit] for count, unit in re.findall(r"([0-9.]+)([hms])", duration))


def test_kargos_applicationset_holds_to_argocds_crd_and_leaves_kargos_revision_alone() -> None:
    found = applicationset(KARGO)
    assert [error.message for error in contracts.crd_validator("applicationset").iter_errors(found)] == []
    assert "strategy" not in found["spec"]  # Kargo's Stages order the clusters, not RollingSync
    assert {"jsonPointers": ["/spec/source/targetRevision"]} in found["spec"]["ignoreApplicationDifferences"]
    objects = build(FLEET / "workload")
    for app in generated(KARGO):
        assert "automated" not in app["spec"].get("syncPolicy", {})  # argocd-update syncs: nothing behind it
        assert violations(app, PROJECTS["llm-fleet"], objects) == [], app["metadata"]["name"]


def test_each_stage_promotes_its_own_clusters_application_after_the_stage_before_it() -> None:
    """A Stage per cluster, in the canary's order; each updates the Application that names it as authorized, to the
    Freight's commit, and gives the sync longer than the gate may wait for its target (Kargo's default is 5 minutes,
    where cutover's verify.maxWait is 30)."""
    objects, apps = kargo(), {app["metadata"]["name"]: app for app in generated(KARGO)}
    (project,) = objects["Project"]
    stages = objects["Stage"]
    (workload_plan,) = [doc for doc in build(FLEET / "workload") if doc["metadata"]["name"] == "cutover-plan"]
    (shared,) = plan.parse(workload_plan["data"]["plan.yaml"])
    before = None
    for stage in stages:
        (freight,) = stage["spec"]["requestedFreight"]
        assert freight["sources"] == ({"direct": True} if before is None else {"stages": [before]})
        (step,) = stage["spec"]["promotionTemplate"]["spec"]["steps"]
        assert step["uses"] == "argocd-update"
        assert seconds(step["retry"]["timeout"]) >= shared.verify.max_wait + 10 * 60, step["retry"]
        (target,) = step["config"]["apps"]
        app = apps[target["name"]]
        assert app["metadata"]["annotations"]["kargo.akuity.io/authorized-stage"] == \
            f"{project['metadata']['name']}:{stage['metadata']['name']}"
        (source,) = target["sources"]
        assert source["repoURL"] == app["spec"]["source"]["repoURL"] and source["updateTargetRevision"] is True
        before = stage["metadata"]["name"]
    assert len(stages) == len(apps)


# --- GitOps Promoter as the fleet's engine (manifests/examples/fleet/promoter, docs/fleet.md "GitOps Promoter") -----
# Its CRDs are not served by any registry this suite installs from either (the Go module proxy refuses
# github.com/argoproj-labs/gitops-promoter): checked against them by hand, held here to what cutover needs.

PROMOTER = "promoter/applicationset.yaml"


def test_the_promoters_environments_are_the_clusters_in_order_gated_on_their_applications_sync() -> None:
    """Each cluster's environment branch is promoted after the one before it is `argocd-health` success: the
    promoter's ArgoCDCommitStatus, success only while every selected Application is Healthy and Synced, which a
    cluster whose gate refused or whose verifier failed is not (its mark unapplied). The Applications it selects
    are the ApplicationSet's, each syncing its environment branch, hydrated from the fleet's workload."""
    objects: dict[str, dict[str, Any]] = {doc["kind"]: doc for doc in yaml_docs(
        (FLEET / "promoter" / "promoter.yaml").read_text())}
    strategy, status = objects["PromotionStrategy"], objects["ArgoCDCommitStatus"]
    assert status["spec"]["promotionStrategyRef"]["name"] == strategy["metadata"]["name"]
    assert {"key": status["spec"]["key"]} in strategy["spec"]["activeCommitStatuses"]
    found = applicationset(PROMOTER)
    assert [error.message for error in contracts.crd_validator("applicationset").iter_errors(found)] == []
    apps = generated(PROMOTER)
    branches = [app["spec"]["sourceHydrator"]["syncSource"]["targetBranch"] for app in apps]
    assert [env["branch"] for env in strategy["spec"]["environments"]] == branches
    objects_synced = build(FLEET / "workload")
    for app in apps:
        assert status["spec"]["applicationSelector"]["matchLabels"].items() <= app["metadata"]["labels"].items()
        hydrator = app["spec"]["sourceHydrator"]
        assert hydrator["drySource"]["path"] == "manifests/examples/fleet/workload"
        assert hydrator["hydrateTo"]["targetBranch"] == hydrator["syncSource"]["targetBranch"] + "-next"
        assert app["spec"]["syncPolicy"]["automated"] == {"selfHeal": False}  # docs/install.md, step 7
        assert violations(app, PROJECTS["llm-fleet"], objects_synced) == [], app["metadata"]["name"]
