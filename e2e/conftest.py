"""The real tier's fixtures: one control plane for the session, the repository's manifests applied as a user
applies them, the shim running cutover's Jobs and the engine doubles at the pods' IPs; and the closing table.

Run by `make e2e` only (inside e2e/netns.sh's network namespace), never by `make test`.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tier import cluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS: list[tuple[str, str, float]] = []
MEASURED: list[str] = []  # what scenarios measured, printed under the table (request counts)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CUTOVER_E2E_NETNS") != "inside":
        raise pytest.UsageError("the real tier runs inside its own network namespace: use `make e2e`")
    config.addinivalue_line("markers", "after_all: judges what every other scenario left (the audit log)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("after_all") is not None)


@pytest.fixture(scope="session")
def tier(request: pytest.FixtureRequest) -> Iterator[cluster.Tier]:
    bin_dir = Path(subprocess.run([str(ROOT / "e2e" / "build.sh"), "--bin-dir"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    run_dir = Path(os.environ.get("CUTOVER_E2E_RUN") or tempfile.mkdtemp(prefix="cutover-e2e-"))
    print(f"\nthe tier's logs and audit log: {run_dir}", file=sys.stderr)
    with cluster.started(bin_dir, run_dir, cutover=Path(sys.executable).with_name("cutover")) as started:
        yield started
        # what the kubelet's stand-ins met, said under the table (a pod's own failure is its Job's)
        errors = collections.Counter(e.split("(", 1)[0] for e in started.shim.errors + started.engines.errors)
        MEASURED.extend(f"kubelet stand-ins' watches: {n} × {kind} (listed again)" for kind, n in errors.items())
        if started.shim.notes:
            MEASURED.append(f"shim: {started.shim.notes[0]} (and {len(started.shim.notes) - 1} more pods alike)")
    # a run's logs (about 70 MB with etcd's) are kept when something failed or CUTOVER_E2E_RUN asked for them
    if request.session.testsfailed == 0 and not os.environ.get("CUTOVER_E2E_RUN"):
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        MEASURED.append(f"the tier's logs and audit log: {run_dir}")


@pytest.fixture(scope="session")
def faults(tier: cluster.Tier) -> cluster.Tier:
    """The tier with the failing engines and their plan (e2e/fixtures/faults)."""
    tier.apply(cluster.FIXTURES / "faults")
    return tier


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        RESULTS.append((item.name, report.outcome, report.duration))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    width = max(len(name) for name, _, _ in RESULTS)
    terminalreporter.write_sep("=", "the real tier")
    terminalreporter.write_line(f"{'scenario':<{width}}  result   seconds")
    for name, outcome, seconds in RESULTS:
        terminalreporter.write_line(f"{name:<{width}}  {outcome:<7}  {seconds:7.1f}")
    for text in MEASURED:
        terminalreporter.write_line(text)
