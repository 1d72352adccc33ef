"""Files as people write them: CRLF, no final newline, a Service inside a `kind: List`, JSON over one line or many,
several documents, quoted labels. `cutover diff --selector` (no plan) prints a patch that `git apply` and `patch`
both take as a user pipes it (the outcome line included), and applying it gives exactly the edit cutover commits;
only an aliased selector is refused, with the reason."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from cutover import manifest, plan

FILES = Path(__file__).parent / "fixtures" / "files"
EDITABLE = sorted(path.name for path in FILES.iterdir() if path.name != "aliased.yaml")
WANTED = {"app": "chat-candle", "component": "predictor", "engine": "candle"}
SELECTOR = ",".join(f"{key}={value}" for key, value in WANTED.items())


async def run(*argv: str, cwd: Path) -> tuple[int, bytes]:
    environ = {"PATH": os.environ["PATH"], "CUTOVER_TERMINATION_LOG": str(cwd / "termination-log")}  # no plan at all
    process = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=environ, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, out


async def piped(tool: tuple[str, ...], patch: bytes, cwd: Path) -> int:
    process = await asyncio.create_subprocess_exec(*tool, cwd=cwd, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await process.communicate(patch)
    assert process.returncode == 0, f"{' '.join(tool)}: {err.decode()}"
    return process.returncode


@pytest.mark.parametrize("name", EDITABLE)
async def test_the_printed_diff_applies_with_git_apply(name: str, tmp_path: Path) -> None:
    original = (FILES / name).read_bytes()
    expected = manifest.edit_selector(original.decode(), document=plan.GitDocument("Service", "chat"),
                                      selector_path="spec.selector", selector=WANTED).after.encode()
    (tmp_path / "k8s").mkdir(parents=True)
    (tmp_path / "k8s" / name).write_bytes(original)
    code, out = await run(sys.executable, "-m", "cutover", "diff", "--file", f"k8s/{name}", "--selector", SELECTOR,
                          cwd=tmp_path)
    assert code == 0, out.decode()
    assert out.startswith(f"--- a/k8s/{name}\n".encode())
    assert out.rstrip().endswith(b"all inside spec.selector")  # the outcome line comes last
    await piped(("git", "apply", "-"), out, tmp_path)  # strict about context, whitespace and the final newline
    assert (tmp_path / "k8s" / name).read_bytes() == expected  # byte for byte: CR, final newline and all


def test_what_changes_is_the_selector_of_the_one_service() -> None:
    for name in EDITABLE:
        text = (FILES / name).read_text()
        edit = manifest.edit_selector(text, document=plan.GitDocument("Service", "chat"),
                                      selector_path="spec.selector", selector=WANTED)
        assert manifest.read_selector(edit.after, document=plan.GitDocument("Service", "chat"),
                                      selector_path="spec.selector") == WANTED, name
    assert manifest.services((FILES / "list.yaml").read_text()) == ["chat"]


async def test_an_aliased_selector_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "svc.yaml").write_bytes((FILES / "aliased.yaml").read_bytes())
    code, out = await run(sys.executable, "-m", "cutover", "diff", "--file", "svc.yaml", "--selector", SELECTOR,
                          cwd=tmp_path)
    assert code == 2 and b"document 1 uses YAML anchors or aliases" in out and b"cause selector_alias" in out


async def test_a_file_with_two_services_needs_a_document(tmp_path: Path) -> None:
    two = (FILES / "kustomize-patch.yaml").read_text() + "---\n" + (FILES / "kustomize-patch.yaml").read_text()
    (tmp_path / "two.yaml").write_text(two.replace("name: chat", "name: other", 1))
    code, out = await run(sys.executable, "-m", "cutover", "diff", "--file", "two.yaml", "--selector", SELECTOR,
                          cwd=tmp_path)
    assert code == 2 and b"expected exactly one Service, found 2 (other, chat)" in out
    code, out = await run(sys.executable, "-m", "cutover", "diff", "--file", "two.yaml", "--selector", SELECTOR,
                          "--document", "Service/chat", cwd=tmp_path)
    assert code == 0 and b"engine: candle" in out
