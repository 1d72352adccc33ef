"""Observed state the decisions read: repository URLs compared as ArgoCD compares them, a multi-source
Application's position and paths, the hydrator's manifest; and the fail-or-retry rule of a proof."""

from __future__ import annotations

import pytest

from cutover.core.proofs import PodProof, Problem
from cutover.core.views import ApplicationView, HydratorView, SourceView, same_repository
from cutover.kube import readiness
from cutover.kube.payloads import application_view


@pytest.mark.parametrize(("one", "other", "same"), [
    ("https://github.com/acme/gitops.git", "https://github.com/acme/gitops", True),
    ("https://GitHub.com/Acme/GitOps/", "https://github.com/acme/gitops.git", True),
    ("  https://github.com/acme/gitops.git ", "https://github.com/acme/gitops", True),
    ("https://github.com/acme/gitops.git", "https://github.com/acme/other.git", False),
    ("git@github.com:acme/gitops.git", "git@github.com:acme/gitops", True),
    ("https://gitlab.example/acme/gitops", "https://github.com/acme/gitops", False),
])
def test_repository_urls_compare_as_argocd_compares_them(one: str, other: str, same: bool) -> None:
    assert same_repository(one, other) is same


def app(**fields: object) -> ApplicationView:
    view = ApplicationView("argocd", "a", "Synced", "s", "Healthy", None, "s", None, None, False)
    return ApplicationView(**{**view.__dict__, **fields})  # type: ignore[arg-type]


OURS = "https://github.com/acme/gitops.git"


def test_the_plans_source_among_several() -> None:
    multi = app(sources=(SourceView("https://charts.example.invalid", "1.0.0"), SourceView(OURS, "release", "a"),
                         SourceView(OURS, "main", "b")), operation_revisions=("1.0.0", "r1", "m1"),
                sync_revisions=("1.0.0", "r0", "m0"))
    assert multi.position(OURS, "main") == 2 and multi.position(OURS, "other") == 1  # no branch match: the first
    assert multi.source_path(OURS, "main") == "b"
    ours = multi.for_source(OURS, "main")
    assert (ours.operation_revision, ours.sync_revision) == ("m1", "m0")
    assert multi.position("https://github.com/else/x", "main") is None
    assert multi.source_path("https://github.com/else/x", "main") is None


def test_a_single_source_and_the_hydrator() -> None:
    single = app(source=SourceView(OURS, "main", "k8s/apps"))
    assert single.for_source(OURS, "main") is single and single.source_path(OURS, "main") == "k8s/apps"
    hydrated = app(hydrator=HydratorView(SourceView(OURS, "main", "dry/app"), "env/prod", "app/"))
    assert hydrated.source_path(OURS, "main") == "dry/app" and hydrated.hydrator is not None
    assert hydrated.hydrator.manifest == "app/manifest.yaml"
    assert HydratorView(SourceView(OURS), "env/prod", ".").manifest == "manifest.yaml"


PROOF = PodProof("candle-0", "10.0.0.5:8080", "generate", (), (), 0.0)


@pytest.mark.parametrize(("problem", "budget", "diagnosed", "step"), [
    (Problem("name_rejected", "404", retryable=False), 600.0, False, readiness.ProofStep.FAIL),
    (Problem("refused", "refused", retryable=True), 600.0, False, readiness.ProofStep.RETRY),
    (Problem("refused", "refused", retryable=True), 3.0, False, readiness.ProofStep.FAIL),  # no time for a try
    (Problem("connect_timeout", "timeout", retryable=True), 600.0, False, readiness.ProofStep.DIAGNOSE),
    (Problem("connect_timeout", "timeout", retryable=True), 600.0, True, readiness.ProofStep.RETRY),
    (Problem("connect_timeout", "timeout", retryable=True), 3.0, True, readiness.ProofStep.FAIL),
])
def test_a_failed_proof_fails_asks_or_tries_again(problem: Problem, budget: float, diagnosed: bool,
                                                  step: readiness.ProofStep) -> None:
    assert readiness.after_failed_proof(problem, budget_left=budget, retry_in=5.0, diagnosed=diagnosed) is step


def test_the_worst_problem_decides() -> None:
    passing, final = Problem("refused", "r", retryable=True), Problem("name_not_listed", "n", retryable=False)
    assert readiness.worst([(PROOF, passing), (PROOF, final)]) == (PROOF, final)
    assert readiness.worst([(PROOF, passing)]) == (PROOF, passing)


def test_an_application_says_its_applicationset_and_the_revisions_it_synced_whole() -> None:
    """The controller ownerReference the applicationset-controller writes, and status.history (single and multi
    source), which ArgoCD appends only for a whole sync that succeeded: what a fleet's later step waits for."""
    owner = {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": "fleet", "uid": "u",
             "controller": True}
    view = application_view({"metadata": {"name": "east", "namespace": "argocd", "ownerReferences": [
        {**owner, "kind": "Deployment", "name": "other"}, owner]},
        "status": {"history": [{"id": 0, "revision": "a" * 40}, {"id": 1, "revisions": ["b" * 40, "c" * 40]}]}})
    assert view.applicationset == "fleet" and view.deployed == ("a" * 40, "b" * 40, "c" * 40)
    assert application_view({"metadata": {"ownerReferences": [{**owner, "controller": False}]}}).applicationset is None
