"""The real tier's fixtures: one control plane for the session, the repository's manifests applied as a user
applies them, the shim running cutover's Jobs and the engine doubles at the pods' IPs; and the closing table.

Run by `make e2e` only (inside e2e/netns.sh's network namespace), never by `make test`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes
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
def tier() -> Iterator[cluster.Tier]:
    bin_dir = Path(subprocess.run([str(ROOT / "e2e" / "build.sh"), "--bin-dir"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    run_dir = Path(os.environ.get("CUTOVER_E2E_RUN") or tempfile.mkdtemp(prefix="cutover-e2e-"))
    print(f"\nthe tier's logs and audit log: {run_dir}", file=sys.stderr)
    with cluster.started(bin_dir, run_dir, cutover=Path(sys.executable).with_name("cutover")) as started:
        yield started


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


def wait_for(what: str, check: object, timeout: float = 60.0, every: float = 0.25) -> object:
    """Polls `check()` until it returns something truthy; fails naming `what` after `timeout` real seconds (the
    tier runs on the real clock: its controllers do)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()  # type: ignore[operator]
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


__all__ = ["kubernetes", "wait_for"]
