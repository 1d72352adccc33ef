"""The image's pruning (packaging/prune.py) leaves everything cutover loads: a copy of the installed kubernetes
package, pruned as the Dockerfile prunes it, shadows the real one while `cutover verify` proves a backend of the
simulated world; the process never imports a pruned module."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import kubernetes

from cutover.demo.world import World

PRUNE = Path(__file__).parents[2] / "packaging" / "prune.py"
PROGRAM = """
import sys
from cutover.cli import main
try:
    main.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
pruned = sorted(m for m in sys.modules if m.startswith(("aiohttp", "yarl", "multidict", "kubernetes.aio",
                                                       "kubernetes.client.api.", "kubernetes.client.models.")))
print("PRUNED-IMPORTS", pruned, "FROM", sys.modules["kubernetes"].__file__)
sys.exit(code)
"""


def _prune_module() -> object:
    spec = importlib.util.spec_from_file_location("prune", PRUNE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_cutover_runs_on_the_pruned_packages(world: World, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(Path(kubernetes.__file__).parent, site / "kubernetes")
    freed = _prune_module().prune(site)  # type: ignore[attr-defined]
    assert freed > 50e6  # the generated models and APIs, and the asyncio client
    world.add_pod("vllm", ready=True)
    await world.settled()
    (tmp_path / "plan.yaml").write_text(world.plan_text())
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "CUTOVER_PLAN": str(tmp_path / "plan.yaml"),
               "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig")),
               "CUTOVER_TERMINATION_LOG": str(tmp_path / "termination-log")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROGRAM, "verify", "--backend", "vllm", env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    assert "cutover verify: OK — backend vllm proven" in out.decode()
    assert f"PRUNED-IMPORTS [] FROM {site}" in out.decode()
    # a pod's start imports the client alone: not the kubeconfig loader, the dynamic client, watch or stream
    started = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys, cutover.cli.main, cutover.flows.commands; print(sorted(m for m in "
        "sys.modules if m.split('.')[:2][-1] in ('config', 'dynamic', 'watch', 'stream', 'leaderelection', "
        "'informer') and m.startswith('kubernetes.')))", env=environ, stdout=asyncio.subprocess.PIPE)
    async with asyncio.timeout(30):
        listed, _ = await started.communicate()
    assert listed.decode().strip() == "[]"
