"""Scenario f, the kustomize-overlay example through the real repo-server: ArgoCD renders the prod overlay, and the
live Service selects exactly the plan's effective selector (the overlay's `env: prod` included); a base edit of
the selector less what the build adds (what cutover writes, SPEC §9) goes live as the candle backend's effective
selector. The helm-values example's chart lives in a Helm repository the tier does not have: not run here."""

from __future__ import annotations

import io

from ruamel.yaml import YAML

from cutover import plan
from tier import gitops

EXAMPLE = gitops.cluster.ROOT / "manifests" / "examples" / "kustomize-overlay"
BASE = "manifests/examples/kustomize-overlay/base/service.yaml"


def test_f_the_kustomize_overlay_goes_live_with_the_plans_effective_selectors(argo: gitops.GitOpsTier) -> None:
    (chat,) = plan.parse((EXAMPLE / "plan.yaml").read_text())
    path = argo.dir / "chat-prod.yaml"
    path.write_text(argo.users_copy((EXAMPLE / "application.yaml").read_text()))
    argo.kubectl("apply", "-f", str(path))
    argo.wait_app("chat-prod", synced=True, healthy=True, timeout=120)
    live = argo.core.read_namespaced_service("chat-predictor", "llm-serving")
    assert live.spec.selector == chat.backends["vllm"].selector  # env: prod, added by the overlay's labels

    found = argo.git.repo.read(BASE)
    assert found is not None
    service = YAML(typ="safe").load(found[0])
    added = {"env": "prod"}  # what the build adds: the overlay's labels with includeSelectors
    service["spec"]["selector"] = {k: v for k, v in chat.backends["candle"].selector.items() if k not in added}
    buffer = io.StringIO()
    YAML().dump(service, buffer)
    switched = argo.git.repo.commit({BASE: buffer.getvalue()}, "chat to candle-vllm\n")
    argo.refresh("chat-prod")
    argo.wait_app("chat-prod", synced=True, healthy=True, revision=switched, timeout=120)
    after = argo.core.read_namespaced_service("chat-predictor", "llm-serving")
    assert after.spec.selector == chat.backends["candle"].selector
    assert (after.metadata.uid, after.spec.cluster_ip) == (live.metadata.uid, live.spec.cluster_ip)
