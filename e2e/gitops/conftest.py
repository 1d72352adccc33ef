"""The gitops tier: ArgoCD beside the control plane, the example installed as docs/install.md installs it, and
every cutover Job one that ArgoCD (or a person with kubectl) started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import started_tier
from tier import gitops


@pytest.fixture(scope="package")
def argo(request: pytest.FixtureRequest) -> Iterator[gitops.GitOpsTier]:
    with started_tier(request, kind=gitops.GitOpsTier) as started:
        assert isinstance(started, gitops.GitOpsTier)
        started.start_argocd(gitops.version())
        started.seed_before_first_cutover()
        started.install_as_documented()
        yield started
        started.stop_argocd()
