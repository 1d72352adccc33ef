"""The docs are part of the product: every cause code the code can emit has a row in docs/causes.md, every exit
code a line in docs/commands.md, and every section or file the code cites is in the repository."""

from __future__ import annotations

import ast
import importlib
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


def _error_classes() -> dict[str, type]:
    """Every error class of the product, by name (each module imported: they raise their own subclasses)."""
    from cutover.errors import CutoverError

    for path in SOURCE:
        if path.name != "__main__.py":
            importlib.import_module(".".join(path.relative_to(ROOT / "src").with_suffix("").parts)
                                    .removesuffix(".__init__"))
    found: dict[str, type] = {}
    todo: list[type] = [CutoverError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def exits_by_cause() -> dict[str, set[int]]:
    """What the code says of each cause it hands an error class by name (`SomeError(..., cause="x")`, or a class's
    `default_cause`): the exit codes of those classes. Causes passed through a variable are not seen here."""
    classes = _error_classes()
    found: dict[str, set[int]] = {}
    for path in SOURCE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                for statement in node.body:
                    if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant) and any(
                            getattr(target, "id", None) == "default_cause" for target in statement.targets):
                        found.setdefault(statement.value.value, set()).add(int(classes[node.name].exit_code))
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                for keyword in node.keywords:
                    if keyword.arg == "cause" and isinstance(keyword.value, ast.Constant) and name in classes:
                        found.setdefault(keyword.value.value, set()).add(int(classes[name].exit_code))
    return found


def test_every_cause_row_says_the_exit_code_its_error_class_exits_with() -> None:
    from cutover.errors import ExitCode

    known = exits_by_cause()
    assert len(known) > 40 and known["git_auth"] == {5} and known["service_not_found"] == {2}  # the scan works
    table = (ROOT / "docs" / "causes.md").read_text()
    valid = {int(code) for code in ExitCode} | {130, 143}
    for row in (row for row in table.splitlines() if row.startswith("| `")):
        cells = row.split("|")
        said = {int(code) for code in re.findall(r"\d+", cells[2])}
        assert said <= valid and (said or "a warning" in cells[2]), row[:120]
        for cause in re.findall(r"`([a-z_]+)`", cells[1]):
            assert known.get(cause, set()) <= said, f"{cause}: the code exits with {sorted(known[cause])}, the table " \
                                                    f"says {sorted(said)}"


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
    roots = ("src", "tests", "e2e", "bench", "packaging", "manifests", "hooks", "jobs", "fleet", "docs")
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
