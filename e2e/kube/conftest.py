"""The Kubernetes tier: the repository's manifests applied with kubectl as a user would, no ArgoCD; the scenarios
start cutover's Jobs themselves (`kubectl create job --from`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import started_tier
from tier import cluster


@pytest.fixture(scope="package")
def tier(request: pytest.FixtureRequest) -> Iterator[cluster.Tier]:
    with started_tier(request) as started:
        started.install()
        yield started


@pytest.fixture(scope="package")
def faults(tier: cluster.Tier) -> cluster.Tier:
    """The tier with the failing engines and their plan (e2e/fixtures/faults)."""
    tier.apply(cluster.FIXTURES / "faults")
    return tier
