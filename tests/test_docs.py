"""The README is part of the product: every cause code the code can emit has a row in its troubleshooting
table, and every exit code has a line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = [path for path in (ROOT / "src" / "cutover").rglob("*.py") if "demo" not in path.parts]


def emitted_causes() -> set[str]:
    causes: set[str] = set()
    for path in SOURCE:
        text = path.read_text()
        causes |= set(re.findall(r'cause="([a-z_]+)"', text))
        causes |= set(re.findall(r'default_cause = "([a-z_]+)"', text))
        causes |= set(re.findall(r'Problem\("([a-z_]+)"', text))  # engine problems become causes (wait._judge)
        causes |= set(re.findall(r'cause="([a-z_]+)", pod=', text))
    return causes


def documented_causes() -> set[str]:
    table = (ROOT / "README.md").read_text().split("## Troubleshooting: cause codes", 1)[1].split("\n## ", 1)[0]
    return {code for row in table.splitlines() if row.startswith("| `") for code in re.findall(r"`([a-z_]+)`",
                                                                                               row.split("|")[1])}


def test_every_cause_code_is_in_the_troubleshooting_table() -> None:
    causes = emitted_causes()
    assert len(causes) > 40  # the scan finds them (it would find none if the patterns went stale)
    missing = sorted(causes - documented_causes())
    assert missing == [], f"add these to the README's troubleshooting table: {missing}"


def test_every_exit_code_is_documented() -> None:
    from cutover.errors import ExitCode

    readme = (ROOT / "README.md").read_text()
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \| ", readme, re.MULTILINE), code


def test_the_prerequisites_the_readme_names_are_the_ones_make_test_checks() -> None:
    import prerequisites

    readme = (ROOT / "README.md").read_text()
    packages = {source for _, _, source in prerequisites.NEEDS if " " not in source}
    assert packages == {"git", "openssh-client"}
    for package in packages:
        assert f"`{package}`" in readme, package
    ci = (ROOT / ".ci" / "run").read_text()
    assert all(package in ci for package in packages)  # CI installs exactly what the README names
    assert "e2e/build.sh kustomize" in readme and "make kustomize" in ci and "CUTOVER_NO_SKIPS=1 make test" in ci


def test_a_missing_tool_is_named_with_its_package() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "prerequisites.py")], capture_output=True,
                          text=True, env={"PATH": "/nonexistent"}, check=False)
    assert done.returncode == 1
    assert "ssh (OpenSSH's client): openssh-client" in done.stderr and "apt-get install" in done.stderr
