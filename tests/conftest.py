"""Shared fixtures: the simulated world over real HTTP, a Cluster on it through a kubeconfig, and logs.

Tests that wait on startup timelines carry `@pytest.mark.looptime`: the event loop's clock is fake and
jumps over idle time, so a 30-minute startup takes milliseconds and elapsed times are exact.
"""

from __future__ import annotations

import asyncio
import inspect
import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

import contracts
from cutover import plan
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.kube import KubeEmulator
from cutover.demo.world import World
from cutover.githost.github import GitHub
from cutover.kube import cluster

GIT_TOKEN = "ghp_" + "C" * 36
SERVICE_PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
SERVICE_FILE = (Path(__file__).parent / "fixtures" / "reasoning-long-service.yaml").read_text()


@pytest.fixture(autouse=True)
def _no_implicit_loop_for_sync_tests(request: pytest.FixtureRequest) -> None:
    # looptime's plugin asks the policy for a loop around every test; for a sync test that makes a
    # loop nobody closes (a ResourceWarning, an error here). Saying "no loop" makes it step aside.
    if not inspect.iscoroutinefunction(request.function):
        asyncio.get_event_loop_policy().set_event_loop(None)


@pytest.fixture(autouse=True, scope="session")
def _applications_are_real() -> Iterator[None]:
    """Every Application a test world stores is checked against ArgoCD 3.6's own CRD schema."""
    KubeEmulator.validators["argoproj.io/v1alpha1/applications"] = contracts.check_application
    yield
    KubeEmulator.validators.clear()


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with World() as sim:
        sim.admit_jobs()
        yield sim


@pytest.fixture
async def kube(world: World, tmp_path: Path) -> AsyncIterator[cluster.Cluster]:
    connected = cluster.connect(kubeconfig=str(world.kubeconfig(tmp_path / "kubeconfig")), environ={})
    yield connected
    await connected.aclose()


@pytest.fixture
def make_plan(world: World) -> Any:
    def build(**overrides: Any) -> plan.Plan:
        (one,) = plan.parse(world.plan_text(**overrides))
        return one

    return build


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    """The GitOps repository: a real bare repository holding the reference Service file."""
    bare = BareRepo(tmp_path / "gitops.git")
    bare.commit({SERVICE_PATH: SERVICE_FILE}, "Add the Service\n")
    return bare


@pytest.fixture
async def host(repo: BareRepo) -> AsyncIterator[GitHub]:
    """The GitHub provider, talking to a GitHub double over that repository."""
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        client = GitHub(url="https://github.com/acme/gitops.git", branch="main", token=GIT_TOKEN, api_url=fake.url)
        yield client
        await client.aclose()


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Structured log events of the test, as dicts (structlog's own capture)."""
    capture = LogCapture()
    structlog.reset_defaults()  # whatever an earlier test configured (a level filter, say) must not leak in
    structlog.configure(processors=[structlog.processors.add_log_level, capture])
    yield capture.entries
    structlog.reset_defaults()


NEAR_BOUND: list[tuple[str, float, float]] = []  # (test, seconds of setup and call, its pytest-timeout bound)
SETUP = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Note a test that took more than half its time bound: under CI's load (the tier's builds beside the suite) a
    bound that only an idle machine meets is a defect, and this shows it before it fails."""
    report = yield
    if report.when == "setup":
        item.stash[SETUP] = report.duration  # pytest-timeout bounds the fixtures' setup with the test
    elif report.when == "call":
        marker = item.get_closest_marker("timeout")
        bound = float(marker.args[0]) if marker is not None and marker.args else float(item.config.getini("timeout"))
        took = item.stash.get(SETUP, 0.0) + report.duration
        if bound and took > bound / 2:
            NEAR_BOUND.append((item.nodeid, took, bound))
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Tests past half their bound; the fault-injection suite's table: fault, outcome (exit codes), commits, cause."""
    import sys

    if NEAR_BOUND:
        terminalreporter.section(f"past half their time bound: {len(NEAR_BOUND)} test(s)")
        for nodeid, seconds, bound in NEAR_BOUND:
            terminalreporter.write_line(f"{seconds:6.1f} s of {bound:.0f} s  {nodeid}")
    rows = getattr(sys.modules.get("harness"), "TABLE", None)
    if not rows:
        return
    header = ("area", "fault", "exits", "commits", "cause")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    terminalreporter.section(f"fault injection: {len(rows)} cases")
    for row in [header, tuple("-" * width for width in widths), *rows]:
        cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        terminalreporter.write_line("  ".join(cells).rstrip())


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """In CI (CUTOVER_NO_SKIPS=1, set by .ci/run) a skipped test fails the run: a test that did not run proves
    nothing, and a missing tool must be installed, not skipped past."""
    import os

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    if os.environ.get("CUTOVER_NO_SKIPS") == "1" and skipped and exitstatus == 0:
        session.exitstatus = 1
        if reporter is not None:
            reporter.write_line(f"CUTOVER_NO_SKIPS: {skipped} test(s) skipped; in CI every test must run", red=True)


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """A stream for the logs a test configures (tests/slack), structlog reset after it."""
    stream = io.StringIO()
    yield stream
    structlog.reset_defaults()
