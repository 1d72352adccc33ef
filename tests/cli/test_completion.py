"""`cutover completion bash|zsh` (docs/commands.md): the script is written from the parser, and real bash completes
with it: commands, each command's own options, choices, files, and nothing after an option whose value it cannot
know."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cutover.cli import completion, main

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    done = subprocess.run([sys.executable, "-m", "cutover", "completion", "bash"], capture_output=True, text=True,
                          check=True)
    assert done.stderr == ""  # the script alone, for `source <(cutover completion bash)`: no outcome line
    path = tmp_path_factory.mktemp("completion") / "cutover.bash"
    path.write_text(done.stdout)
    return path


def complete(script: Path, line: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for the last word of `line` (a trailing space: a new, empty word)."""
    words = line.split(" ")
    program = f"""source {script}
COMP_WORDS=({" ".join(repr(word) for word in words)}); COMP_CWORD={len(words) - 1}
_cutover; printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                          check=True, cwd=cwd)
    return [word for word in done.stdout.splitlines() if word]


@pytest.mark.parametrize(("line", "offered"), [
    ("cutover st", ["status"]),
    ("cutover r", ["rollback", "run"]),
    ("cutover verify --", ["--backend", "--wait", "--output", "--plan"]),
    ("cutover audit --e", ["--exit-zero"]),
    ("cutover status --output ", ["json", "text"]),
    ("cutover --log-level w", ["warning"]),
    ("cutover --plan plan.yaml st", ["status"]),  # the option's value is not taken for the command `plan`
    ("cutover completion ", ["bash", "zsh"]),
])
def test_bash_offers(script: Path, line: str, offered: list[str]) -> None:
    assert set(offered) <= set(complete(script, line))


def test_an_option_of_another_command_is_not_offered(script: Path) -> None:
    assert "--wait" not in complete(script, "cutover status --")
    assert "--exit-zero" not in complete(script, "cutover run --")


def test_nothing_is_made_up_for_a_value_only_the_cluster_knows(script: Path) -> None:
    assert complete(script, "cutover verify --backend ") == []


def test_files_after_an_option_that_takes_one(script: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("")
    assert complete(script, "cutover status --plan pl", cwd=tmp_path) == ["plan.yaml"]


def test_every_option_the_parser_has_is_in_the_script() -> None:
    """Written from the parser: an option added there completes without anyone editing a script."""
    text = completion.script(main.build_parser(), "bash")
    parser = main.build_parser()
    for name, sub in completion._commands(parser).items():
        assert f"        {name}) " in text
        for option in completion._flags(sub):
            assert option in text, (name, option)


def test_zsh_loads_it_through_its_bash_emulation() -> None:
    assert completion.script(main.build_parser(), "zsh").startswith("autoload -U +X bashcompinit && bashcompinit\n")
