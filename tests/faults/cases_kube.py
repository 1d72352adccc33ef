"""Faults of the Kubernetes API: errors, dropped watches, slow answers, a held Lease, the API gone mid-run."""

from __future__ import annotations

import kmock
from harness import (
    APPLICATIONS,
    EVENTS,
    LEASE,
    LEASES,
    SERVICES,
    Case,
    Step,
    api_down_from,
    argocd,
    at,
    held_lease,
    kube,
    slow,
)

from cutover.demo.world import NAMESPACE, SERVICE
from helpers import PODS, fail_first

CASES = [
    # Kubernetes API
    Case("kubernetes", "pods list 503 twice", kube("list", PODS, fail_first(2, 503)), saw=("cluster.retry",)),
    Case("kubernetes", "Service read 500 three times", kube("get", SERVICES, fail_first(3, 500)),
         saw=("cluster.retry",)),
    Case("kubernetes", "watch answered 410 Gone", kube("watch", PODS, fail_first(1, 410))),
    Case("kubernetes", "watch dropped twice", kube("watch", PODS, fail_first(2, 500))),
    Case("kubernetes", "every watch answered 20 s late", kube(kmock.action.WATCH, None, slow(20))),
    Case("kubernetes", "the API stops answering as the wait begins", api_down_from("lock.acquired"), commits=(),
         steps=(Step(("run",), 1),), cause="cluster_api_unavailable",
         plan=lambda text: text.replace("maxWait: 30m", "maxWait: 10m"), within=600 + 30 + 5, lease_left=True),
    # verify --wait once ran past 40 s with maxWait 5s: maxWait, one request (the API's 30 s read), the exit
    Case("kubernetes", "the API stops answering a short wait", api_down_from("lock.acquired"), commits=(),
         steps=(Step(("run",), 1),), cause="cluster_api_unavailable",
         plan=lambda text: text.replace("maxWait: 30m", "maxWait: 5s"), within=5 + 30 + 5, lease_left=True),
    Case("kubernetes", "reads answered 1 s late, five times", kube(kmock.method.GET, None, slow(1, times=5))),
    Case("kubernetes", "Lease write 503 twice", kube("create", LEASE, fail_first(2, 503)), saw=("cluster.retry",)),
    Case("kubernetes", "EndpointSlices lag the selector by 20 s", argocd(endpoint_lag=20)),
    Case("kubernetes", "Event writes always fail", kube("create", EVENTS, fail_first(99, 500)),
         saw=("event.failed",)),
    Case("kubernetes", "refresh annotation refused (ArgoCD polls Git)",
         kube("patch", APPLICATIONS, fail_first(99, 403)), saw=("argocd.refresh_failed",)),
    Case("kubernetes", "pods list forbidden (RBAC)", kube("list", PODS, fail_first(1, 403)), commits=(),
         steps=(Step(("run",), 1),), cause="cluster_forbidden"),
    Case("kubernetes", "API server down", kube("get", SERVICES, fail_first(99, 503)), commits=(),
         steps=(Step(("run",), 1),), cause="cluster_api_unavailable"),
    Case("kubernetes", "Lease held by another live Job", held_lease, commits=(), steps=(Step(("run",), 8),),
         cause="lock_held"),
    Case("kubernetes", "Lease taken over between the proof and the write", at("names.proven", lambda stage: (
        stage.world.kube.merge(LEASES, NAMESPACE, f"cutover-{SERVICE}", {"spec": {
            "holderIdentity": "cutover-postsync-other"}}))), commits=(), steps=(Step(("run",), 8),),
         cause="lock_lost", unseen=("lock.lost",)),  # the read right before the write, not a renewal, saw it
]
