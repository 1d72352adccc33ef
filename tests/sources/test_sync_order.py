"""What in a rendered Application would delay or break a hop's sync (pure): the shipped example renders clean, and
each finding is a row: a user hook around cutover's, engines in two waves, the Service after the engines, a
progress deadline shorter than the startup."""

from __future__ import annotations

import copy
import dataclasses
import io
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cutover import plan
from cutover.plan import Plan
from cutover.sources import kustomize_build, sync_order

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "llm-serving" / "workload"
WAVE = "argocd.argoproj.io/sync-wave"


def build(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run([*kustomize_build.require(), str(directory)], capture_output=True, text=True, timeout=60,
                          check=True)
    return [doc for doc in YAML(typ="safe").load_all(done.stdout) if doc]


def example_plan(**handoff: str) -> Plan:
    """The example's plan; with `handoff` settings, the engines' Deployments named as its workloads."""
    text = YAML(typ="safe").load((EXAMPLE / "plan-configmap.yaml").read_text())["data"]["plan.yaml"]
    data = YAML(typ="safe").load(text)
    if handoff:
        data["handoff"] = handoff
        for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle")):
            data["backends"][backend]["workload"] = {"kind": "Deployment", "name": name}
    out = io.StringIO()
    YAML(typ="safe").dump(data, out)
    (parsed,) = plan.parse(out.getvalue())
    assert parsed.handoff.strategy == handoff.get("strategy", "parallel")
    return parsed


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return build(EXAMPLE)  # real kustomize: the engines, the Service, the hooks as the Component ships them


def hook(name: str, phase: str, wave: int | None = None, *, helm: bool = False) -> dict[str, Any]:
    annotations = ({"helm.sh/hook": phase} if helm else {"argocd.argoproj.io/hook": phase})
    if wave is not None:
        annotations["helm.sh/hook-weight" if helm else WAVE] = str(wave)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": annotations},
            "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": []}}}}


def waved(docs: list[dict[str, Any]], kind: str, name: str, wave: int) -> list[dict[str, Any]]:
    docs = copy.deepcopy(docs)
    (doc,) = [doc for doc in docs if doc["kind"] == kind and doc["metadata"]["name"] == name]
    doc["metadata"].setdefault("annotations", {})[WAVE] = str(wave)
    return docs


def causes(found: list[sync_order.Finding]) -> list[str]:
    return [finding.cause for finding in found]


def test_the_shipped_example_renders_with_nothing_to_say(rendered: list[dict[str, Any]]) -> None:
    waves = {doc["metadata"]["name"]: doc["metadata"]["annotations"].get(WAVE) for doc in rendered
             if doc["kind"] == "Job"}
    assert waves == {"cutover-presync-llm-serving": "-1000", "cutover-postsync-llm-serving": "1000",
                     "cutover-syncfail-llm-serving": None}  # SyncFail hooks run all at once, waves or not
    assert sync_order.findings(rendered, example_plan()) == []
    assert sync_order.findings(rendered, example_plan(strategy="recreate", maxGap="45m")) == []


@pytest.mark.parametrize(("wave", "order"), [(-1000, "beside"), (-2000, "before")])
def test_a_user_presync_hook_at_or_before_the_gate_is_named(rendered: list[dict[str, Any]], wave: int,
                                                            order: str) -> None:
    found = sync_order.findings([*rendered, hook("migrate", "PreSync", wave)], example_plan())
    assert causes(found) == ["hook_before_gate"]
    assert f"PreSync Job/migrate (wave {wave}) runs {order} cutover's gate Job/cutover-presync-llm-serving " \
           "(wave -1000)" in found[0].message
    assert found[0].hint.startswith("give it a sync-wave above -1000") and not found[0].refuse


@pytest.mark.parametrize("user", [hook("migrate", "PreSync", -1), hook("migrate", "PreSync"),
                                  hook("warm", "pre-install,pre-upgrade", 5, helm=True)],
                         ids=["wave-1", "wave-0", "helm-weight-5"])
def test_a_user_presync_hook_after_the_gate_is_fine(rendered: list[dict[str, Any]], user: dict[str, Any]) -> None:
    """ArgoCD's DB-migration example sits at -1: with the gate at -1000 it runs after the gate decided."""
    assert sync_order.findings([*rendered, user], example_plan()) == []


def test_user_postsync_hooks_at_or_after_cutovers_and_on_every_hop(rendered: list[dict[str, Any]]) -> None:
    docs = [*rendered, hook("smoke", "PostSync"), hook("late", "PostSync", 1000)]
    assert causes(sync_order.findings(docs, example_plan())) == ["hook_after_postsync"]
    found = sync_order.findings(docs, example_plan(strategy="recreate", maxGap="45m"))
    assert causes(found) == ["hook_after_postsync", "hooks_on_every_hop"]
    assert "PostSync Job/late (wave 1000) runs beside cutover's PostSync" in found[0].message
    assert "Job/smoke (wave 0), Job/late (wave 1000) runs on every hop of a recreate handoff" in found[1].message
    helm = [*rendered, hook("test", "post-upgrade", helm=True)]
    assert causes(sync_order.findings(helm, example_plan(strategy="recreate", maxGap="45m"))) == \
        ["hooks_on_every_hop"]


@pytest.mark.parametrize(("strategy", "refuse"), [({"strategy": "recreate", "maxGap": "45m"}, True), ({}, False)],
                         ids=["recreate-refused", "parallel-said"])
def test_engines_in_two_waves(rendered: list[dict[str, Any]], strategy: dict[str, str], refuse: bool) -> None:
    docs = waved(rendered, "Deployment", "llm-reasoning", 1)
    (found,) = sync_order.findings(docs, example_plan(**strategy))
    assert found.cause == "engines_in_two_waves" and found.refuse is refuse
    assert "candle's Deployment/llm-reasoning-candle at 0, vllm's Deployment/llm-reasoning at 1" in found.message
    assert ("the sync hangs until the progress deadline fails it" in found.message) is refuse


def test_engines_found_by_their_selector_without_a_workload(rendered: list[dict[str, Any]]) -> None:
    docs = waved(rendered, "Deployment", "llm-reasoning-candle", -1)
    assert causes(sync_order.findings(docs, example_plan())) == ["engines_in_two_waves"]


def test_the_service_in_a_later_wave_than_the_engines(rendered: list[dict[str, Any]]) -> None:
    docs = waved(rendered, "Service", "reasoning-long-predictor", 1)
    (found,) = sync_order.findings(docs, example_plan())
    assert found.cause == "service_after_engines" and "Service/reasoning-long-predictor (wave 1)" in found.message
    assert sync_order.findings(waved(rendered, "Service", "reasoning-long-predictor", -1), example_plan()) == []


def test_a_progress_deadline_shorter_than_the_startup(rendered: list[dict[str, Any]]) -> None:
    docs = copy.deepcopy(rendered)
    (candle,) = [doc for doc in docs if doc["metadata"]["name"] == "llm-reasoning-candle"]
    del candle["spec"]["progressDeadlineSeconds"]
    (found,) = sync_order.findings(docs, example_plan())
    assert found.cause == "progress_deadline_before_startup"
    assert re.search(r"Deployment/llm-reasoning-candle \(candle\) has progressDeadlineSeconds 600, the default, "
                     r"and its startup probe allows 1800s: a sync that starts it fails at 600s", found.message)
    assert found.hint == "set progressDeadlineSeconds to at least 1860"
    candle["kind"] = "StatefulSet"  # no progress deadline: ArgoCD waits for as long as it loads
    assert sync_order.findings(docs, example_plan()) == []


def test_a_wave_that_is_no_integer_counts_as_zero(rendered: list[dict[str, Any]]) -> None:
    docs = copy.deepcopy(rendered)
    (gate,) = [doc for doc in docs if doc["metadata"]["name"] == "cutover-presync-llm-serving"]
    gate["metadata"]["annotations"][WAVE] = "first"
    assert causes(sync_order.findings([*docs, hook("migrate", "PreSync")], example_plan())) == ["hook_before_gate"]


def test_the_documented_patch_moves_the_gate(tmp_path: Path) -> None:
    """docs/install.md, "Sync waves and deadlines": the patch it shows, added to the example's hooks kustomization
    and built by real kustomize, moves the gate to -2000: a user hook at -1500 runs after it, one at -2500 before."""
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "install.md").read_text()
    (block,) = re.findall(r"```yaml\n# workload/hooks/kustomization.yaml, added:\n"
                          r"(patches: +# beside components: the gate's wave\n.*?sync-wave.*?)```", docs,
                          flags=re.DOTALL)
    for part in ("manifests", "hooks", "jobs"):
        shutil.copytree(root / part, tmp_path / part)
    hooks = tmp_path / "manifests" / "examples" / "llm-serving" / "workload" / "hooks" / "kustomization.yaml"
    hooks.write_text(hooks.read_text() + block)
    rendered = build(tmp_path / "manifests" / "examples" / "llm-serving" / "workload")
    (gate,) = [doc for doc in rendered if doc["metadata"]["name"] == "cutover-presync-llm-serving"]
    assert gate["metadata"]["annotations"][WAVE] == "-2000"
    found = sync_order.findings([*rendered, hook("warm", "PreSync", -1500)], example_plan())
    assert causes(found) == []  # after the gate
    found = sync_order.findings([*rendered, hook("warm", "PreSync", -2500)], example_plan())
    assert causes(found) == ["hook_before_gate"]


@pytest.mark.parametrize(("gap", "refresh", "need"), [("31m", True, 1890), ("45m", False, 2790)],
                         ids=["nudged", "argocds-look-alone"])
def test_a_recreates_max_gap_shorter_than_what_the_gap_holds(rendered: list[dict[str, Any]], gap: str,
                                                            refresh: bool, need: int) -> None:
    """The startup (1800 s), two commits picked up (30 s each with the nudge; up to 480 s each by ArgoCD's look
    alone) and 30 s of hooks."""
    the_plan = example_plan(strategy="recreate", maxGap=gap)
    if not refresh:
        assert the_plan.argocd is not None
        the_plan = dataclasses.replace(the_plan, argocd=dataclasses.replace(the_plan.argocd, refresh=False))
    (found,) = sync_order.findings(rendered, the_plan)
    assert found.cause == "max_gap_short" and found.hint == f"set handoff.maxGap to at least {need}s"
    assert not found.refuse
    assert sync_order.findings(rendered, example_plan(strategy="recreate", maxGap="32m")) == []


def test_a_bridge_that_leaves_names_unanswered_says_which_and_for_how_long(rendered: list[dict[str, Any]]) -> None:
    text = YAML(typ="safe").load((EXAMPLE / "plan-configmap.yaml").read_text())["data"]["plan.yaml"]
    data = YAML(typ="safe").load(text)
    data["backends"]["coder"] = {"selector": {"app.kubernetes.io/name": "coder"}, "engine": "vllm", "port": 8080,
                                 "workload": {"kind": "Deployment", "name": "coder"}}
    for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle")):
        data["backends"][backend]["workload"] = {"kind": "Deployment", "name": name}
    data["target"] = "candle"
    data["handoff"] = {"strategy": "bridge", "bridge": "coder", "bridgeNames": ["reasoning"], "maxGap": "45m"}
    out = io.StringIO()
    YAML(typ="safe").dump(data, out)
    (bridged,) = plan.parse(out.getvalue())
    (found,) = sync_order.findings(rendered, bridged)
    assert found.cause == "bridge_names_dark" and not found.refuse
    assert found.message.startswith("reasoning-long is not among handoff.bridgeNames: the bridge coder does not "
                                    "answer it, so from the switch to coder until the switch to candle it goes "
                                    "unanswered, up to about 1920s (candle's startup 1800s")
    assert "on a way back through the bridge to vllm, up to about 1920s" in found.message
    assert "handoff.maxGap (2700s) is the consent to it" in found.message
    data["handoff"]["maxGap"] = "10m"
    out = io.StringIO()
    YAML(typ="safe").dump(data, out)
    _, short = sync_order.findings(rendered, plan.parse(out.getvalue())[0])
    assert short.cause == "max_gap_short" and "at least 1920s" in short.hint
    data["handoff"]["bridgeNames"] = ["reasoning", "reasoning-long"]
    del data["handoff"]["maxGap"]
    out = io.StringIO()
    YAML(typ="safe").dump(data, out)
    assert sync_order.findings(rendered, plan.parse(out.getvalue())[0]) == []
