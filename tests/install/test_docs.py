"""The docs are part of the product: every cause code the code can emit has a row in docs/causes.md, every exit
code a line in docs/commands.md, and every section or file the code cites is in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
    table = (ROOT / "docs" / "causes.md").read_text()
    return {code for row in table.splitlines() if row.startswith("| `") for code in re.findall(r"`([a-z_]+)`",
                                                                                               row.split("|")[1])}


def test_every_cause_code_is_in_the_troubleshooting_table() -> None:
    causes = emitted_causes()
    assert len(causes) > 40  # the scan finds them (it would find none if the patterns went stale)
    missing = sorted(causes - documented_causes())
    assert missing == [], f"add these to docs/causes.md: {missing}"


def test_every_exit_code_is_documented() -> None:
    from cutover.errors import ExitCode

    commands = (ROOT / "docs" / "commands.md").read_text()
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \| ", commands, re.MULTILINE), code


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


def _cited_texts() -> list[tuple[Path, str]]:
    roots = ("src", "tests", "e2e", "bench", "packaging", "manifests", "hooks", "jobs", "docs")
    paths = [path for root in roots for path in (ROOT / root).rglob("*")
             if path.suffix in (".py", ".yaml", ".md", ".sh", ".env") and "__pycache__" not in path.parts
             and path.name != Path(__file__).name]
    return [(path, path.read_text()) for path in [*paths, ROOT / "README.md", ROOT / "Makefile", ROOT / "Dockerfile"]]


def test_what_the_code_cites_is_in_the_repository() -> None:
    """A comment that says why cites a file of this repository or a public source, never a text outside it."""
    outside = [f"{path.relative_to(ROOT)}: {hit}" for path, text in _cited_texts()
               for hit in re.findall(r"SPEC ?§[\d.]+|reference/[\w-]+\.md|(?<![\w/])§\d[\d.]*", text)]
    assert outside == []
    cited = {(path.relative_to(ROOT), name) for path, text in _cited_texts()
             for name in re.findall(r"\bdocs/[a-z][\w-]*\.md", text)}
    assert len(cited) > 40  # the scan finds them
    assert sorted(f"{path} cites {name}" for path, name in cited if not (ROOT / name).is_file()) == []
