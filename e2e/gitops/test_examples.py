"""Scenario f, the kustomize-overlay and helm-values examples through the real repo-server, each a whole cutover
as the reference story runs it: a person's commit sets the plan's target; the PostSync hook proves the candle
engine and commits what cutover writes for that layout (the base's selector less what the overlay adds; the values
key the chart reads); ArgoCD, refreshed, renders and syncs that commit, its PreSync gates it, and the live Service,
patched in place, selects exactly the target's effective selector. Each example's Application is the example's
own, with the engines, the hooks and the plan added beside it as docs/install.md (step 4) adds them
(e2e/fixtures/chat-prod, e2e/fixtures/chat-helm) and the chart served by a Helm repository of the tier's."""

from __future__ import annotations

from typing import Any

from conftest import MEASURED
from cutover import plan
from tier import githost, gitops

EXAMPLES = gitops.cluster.ROOT / "manifests" / "examples"


def test_f_the_kustomize_overlay_hands_over_with_the_plans_effective_selectors(argo: gitops.GitOpsTier) -> None:
    (chat,) = plan.parse((EXAMPLES / "kustomize-overlay" / "plan.yaml").read_text())
    vllm, candle = chat.backends["vllm"].selector, chat.backends["candle"].selector
    base = "manifests/examples/kustomize-overlay/base/service.yaml"
    live = argo.install_application("chat-prod", argo.users_copy(
        (EXAMPLES / "kustomize-overlay" / "application.yaml").read_text()), "chat-predictor")
    assert live.spec.selector == vllm  # env: prod, added by the overlay's labels
    written = _read(argo, base)

    app, person, switch = _cutover(argo, "chat-prod", "e2e/fixtures/chat-prod/hooks/plan.yaml", chat.name)
    after = argo.core.read_namespaced_service("chat-predictor", "llm-serving")
    assert after.spec.selector == candle
    assert (after.metadata.uid, after.spec.cluster_ip) == (live.metadata.uid, live.spec.cluster_ip)
    # what cutover wrote: the base's selector less the overlay's env: prod, every other line as it was
    assert _read(argo, base) == written.replace("app.kubernetes.io/name: chat-vllm", "app.kubernetes.io/name: "
                                                "chat-candle")
    assert [entry["revision"] for entry in app["status"]["history"]][-2:] == [person, switch]
    assert "kustomize" in _message(argo, switch)  # render-checked by building the Application's path


def test_f_the_helm_values_example_hands_over_through_the_chart_argocd_renders(argo: gitops.GitOpsTier) -> None:
    (chat,) = plan.parse((EXAMPLES / "helm-values" / "plan.yaml").read_text())
    vllm, candle = chat.backends["vllm"].selector, chat.backends["candle"].selector
    values = "manifests/examples/helm-values/values.yaml"
    argo.argocd_token_secret("cutover-chat-helm")  # argocd.server mode: cutover renders no chart, argocd-server does
    application = argo.users_copy((EXAMPLES / "helm-values" / "application.yaml").read_text())
    hooks = f"""    - repoURL: {githost.REPO_URL}   # the engines, the hooks and the plan, added as a third source
      targetRevision: main
      path: e2e/fixtures/chat-helm
  destination:
"""
    application = application.replace("  destination:\n", hooks, 1)
    live = argo.install_application("chat-helm", application, "chat-llm-server")
    assert live.spec.selector == vllm
    assert {"/llm/index.yaml", "/llm/llm-server-1.4.2.tgz"} <= set(argo.charts.requests)  # fetched from the tier's
    written = _read(argo, values)

    app, person, switch = _cutover(argo, "chat-helm", "e2e/fixtures/chat-helm/hooks/plan.yaml", chat.name)
    after = argo.core.read_namespaced_service("chat-llm-server", "llm-serving")
    assert after.spec.selector == candle
    assert (after.metadata.uid, after.spec.cluster_ip) == (live.metadata.uid, live.spec.cluster_ip)
    assert _read(argo, values) == written.replace("engine: vllm ", "engine: candle ")  # the key, its comment kept
    assert [entry["revisions"][1] for entry in app["status"]["history"]][-2:] == [person, switch]  # the values'
    assert "Render-checked through the ArgoCD API" in _message(argo, switch)


def _cutover(argo: gitops.GitOpsTier, name: str, plan_file: str, plan_name: str) -> tuple[dict[str, Any], str, str]:
    """A person's commit setting the plan's target to candle, to the switch synced and verified: the Application
    then, the person's commit and cutover's."""
    before = argo.git.cutover_commits(plan_name)[:1]
    started = gitops.time.monotonic()
    person = argo.git.repo.commit({plan_file: gitops.with_target(_read(argo, plan_file), "candle")},
                                  f"Hand {name}'s name to candle-vllm\n")
    argo.refresh(name)  # what the repository's webhook does
    switch = argo.wait(f"cutover's commit for {name}", lambda: next(
        (sha for sha in argo.git.cutover_commits(plan_name)[:1] if [sha] != before), None), timeout=180)
    app = argo.wait_app(name, synced=True, healthy=True, revision=switch, timeout=180)
    MEASURED.append(f"scenario f, {name}: the person's commit to the switch synced: {gitops.elapsed(started):.1f} s")
    state = app["status"]["operationState"]
    assert state["phase"] == "Succeeded", state.get("message")
    hooks = {(r["hookType"], r["name"], r["hookPhase"]) for r in state["syncResult"]["resources"] if r.get("hookType")}
    assert hooks == {("PreSync", f"cutover-presync-{name}", "Succeeded"),
                     ("PostSync", f"cutover-postsync-{name}", "Succeeded")}
    assert "verified" in argo.job_log(f"cutover-postsync-{name}", namespace=f"cutover-{name}")
    return app, person, switch


def _read(argo: gitops.GitOpsTier, path: str) -> str:
    found = argo.git.repo.read(path)
    assert found is not None, path
    return found[0]


def _message(argo: gitops.GitOpsTier, sha: str) -> str:
    return next(entry.message for entry in argo.git.repo.log(limit=20) if entry.sha == sha)

