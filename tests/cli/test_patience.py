"""A person at a terminal is told soon that an outside system does not answer (cutover.patience): `cutover verify`
without --wait against an unreachable API ran for 30 minutes 34 s (the pod watch retried for verify.maxWait), where
a hook Job rightly keeps trying. In fake time: the same code paths, the clock read off the loop."""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path

import pytest
import structlog

from cutover.cli import main
from helpers import kubeconfig_at
from plans import GOOD

pytestmark = pytest.mark.looptime


@pytest.mark.parametrize("command", [["verify", "--backend", "candle"], ["status"], ["plan"]])
async def test_an_interactive_command_gives_up_on_an_unreachable_api_within_about_20s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    (tmp_path / "plan.yaml").write_text(GOOD)
    monkeypatch.setenv("CUTOVER_PLAN", str(tmp_path / "plan.yaml"))
    (tmp_path / "secrets" / "git").mkdir(parents=True)
    (tmp_path / "secrets" / "git" / "token").write_text("t\n")  # the plan's tokenFile, read there off-cluster
    monkeypatch.setenv("CUTOVER_SECRETS_DIR", str(tmp_path / "secrets"))
    monkeypatch.setenv("CUTOVER_TERMINATION_LOG", str(tmp_path / "termination-log"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = await main.arun(["--log-level", "error", "--kubeconfig", str(kubeconfig_at(tmp_path / "kubeconfig", "http://127.0.0.1:9")),
                                *command])
    structlog.reset_defaults()
    took = loop.time() - started
    outcome = out.getvalue().strip().splitlines()[-1]
    assert code == 1 and "cause cluster_api_unavailable" in outcome, outcome
    assert took <= 25, f"{took:.0f}s: {outcome}"
