"""The suite's warnings policy (pyproject.toml, `filterwarnings`): every warning is an error, our own code's always;
a third-party package's import-time deprecation may be ignored by a filter that names the message, the class and the
module that triggers it, with a comment saying why, and a filter that no longer matches anything fails here, so
filters go when their cause does (an upgrade of the package or of what it imports)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = (ROOT / "pyproject.toml").read_text()
FILTERS: list[str] = tomllib.loads(PYPROJECT)["tool"]["pytest"]["ini_options"]["filterwarnings"]
IGNORED = FILTERS[1:]

# In a fresh interpreter: only the filter, turned into an error, then an import of the module's top package; exit 0
# when the import raised the filter's warning (Python's own matching, with the arguments pytest passes it).
MATCHES = """
import importlib, sys, warnings
_, message, category, module = sys.argv[1].split(":")
owner, _, name = category.rpartition(".")
cls = getattr(importlib.import_module(owner), name) if owner else __builtins__.__dict__[name]
warnings.simplefilter("ignore")
warnings.filterwarnings("error", message, cls, module)
try:
    importlib.import_module(sys.argv[2])
except cls as warning:
    print(warning)
    sys.exit(0)
sys.exit(1)
"""


def test_every_warning_is_an_error_unless_a_later_filter_says_otherwise() -> None:
    assert FILTERS[0] == "error"


@pytest.mark.parametrize("line", IGNORED)
def test_a_filter_names_a_third_party_warning_and_says_why(line: str) -> None:
    action, message, category, module = line.split(":")  # no line number: a filter is for a module, not a line
    assert action == "ignore" and message and "." in category and module, line
    assert not re.match(module, "cutover") and not re.match(module, "doubles"), "our own warnings stay errors"
    said = PYPROJECT.splitlines()
    at = next(i for i, text in enumerate(said) if line.replace("\\", "\\\\") in text)
    assert said[at - 1].strip().startswith("#"), f"no comment says why {line!r} is ignored"


@pytest.mark.parametrize("line", IGNORED)
def test_a_filter_still_matches_what_its_module_warns_on_import(line: str) -> None:
    package = re.match(r"\w+", line.split(":")[3])
    assert package is not None
    result = subprocess.run([sys.executable, "-c", MATCHES, line, package.group()], capture_output=True, text=True,
                            check=False, timeout=120)
    assert result.returncode == 0, (
        f"{line!r} matches nothing importing {package.group()} now: remove it from pyproject.toml\n{result.stderr}")
