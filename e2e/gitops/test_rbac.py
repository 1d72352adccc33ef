"""RBAC as shipped, on the flows only ArgoCD runs: every request the ServiceAccount made while ArgoCD ran its hooks
(PreSync, PostSync that commits and verifies, SyncFail that rolls back) and while a person ran cutover-rollback,
cutover-run and cutover-audit, none refused."""

from __future__ import annotations

import collections

import pytest

from conftest import MEASURED
from tier import gitops


@pytest.mark.after_all
def test_no_request_of_the_service_account_was_refused_through_argocd(argo: gitops.GitOpsTier) -> None:
    events = argo.audit()
    assert events, "the audit log holds no request of the ServiceAccount"
    refused = [(e["verb"], e["requestURI"], e["responseStatus"]["code"]) for e in events
               if e.get("responseStatus", {}).get("code") == 403]
    assert refused == []
    # the further workloads' hooks ran as their own ServiceAccounts (their credentials namespaces), and those
    # were enough for them too (when their scenarios ran)
    for namespace in ("cutover-chat-prod", "cutover-chat-helm"):
        theirs = argo.audit(f"system:serviceaccount:{namespace}:cutover")
        assert [(e["verb"], e["requestURI"]) for e in theirs if e.get("responseStatus", {}).get("code") == 403] == []
    verbs = collections.Counter(f"{e['verb']} {e['objectRef'].get('resource', '?')}" for e in events
                                if e.get("stage") == "ResponseComplete")
    MEASURED.append("gitops tier, the ServiceAccount's requests: " + ", ".join(
        f"{verb} {n}" for verb, n in sorted(verbs.items())))
