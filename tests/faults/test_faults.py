"""Fault injection, table-driven: each case breaks one thing on the way of a whole cutover and states what must
come of it (`harness.run_case`). The table is split by outside system, a module each: `cases_kube`, `cases_git`,
`cases_engines`, `cases_slack`, `cases_kills`."""

from __future__ import annotations

from pathlib import Path

import cases_engines
import cases_git
import cases_kills
import cases_kube
import cases_slack
import pytest
from harness import Case, run_case

from cutover.demo.world import World

pytestmark = pytest.mark.looptime

CASES: list[Case] = [*cases_kube.CASES, *cases_git.CASES, *cases_engines.CASES, *cases_slack.CASES, *cases_kills.CASES]


@pytest.mark.parametrize("case", CASES, ids=[f"{case.area}: {case.fault}" for case in CASES])
async def test_fault(case: Case, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    await run_case(case, world, tmp_path, monkeypatch, capsys)


def test_the_table_covers_every_area_with_forty_faults_or_more() -> None:
    areas = {case.area for case in CASES}
    assert len(CASES) >= 40 and areas == {"kubernetes", "git", "engine", "fitness", "payload", "slack", "kill"}
    assert {case.host for case in CASES} == {"github", "gitea", "gitlab", "git", "github+tls", "git+tls"}
    assert {step.argv[0] for case in CASES if case.area == "kill" for step in case.steps} == {
        "run", "postsync", "rollback", "presync", "syncfail"}
