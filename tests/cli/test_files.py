"""Files as people write them: CRLF, no final newline, a Service inside a `kind: List`, JSON over one line or many,
several documents, quoted labels. `cutover diff --selector` (no plan) prints a patch that `git apply` takes as a
user pipes it (the outcome line included), and applying it gives exactly the edit cutover commits; only an aliased
selector is refused, with the reason. With a plan, `diff` prints what would be committed for every `git.source`:
the examples' kustomize overlay and Helm values, applied and rendered with the real tools."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

from cutover import plan
from cutover.sources import kustomize_build, yaml_edit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"

FILES = Path(__file__).parent.parent / "fixtures" / "files"
EDITABLE = sorted(path.name for path in FILES.iterdir() if path.name != "aliased.yaml")
WANTED = {"app": "chat-candle", "component": "predictor", "engine": "candle"}
SELECTOR = ",".join(f"{key}={value}" for key, value in WANTED.items())


async def run(*argv: str, cwd: Path, scratch: Path | None = None) -> tuple[int, bytes, bytes]:
    """The CLI as a user runs it in `cwd`, with no plan in the environment; its termination log in `scratch`."""
    log = (scratch or cwd) / "termination-log"
    environ = {"PATH": os.environ["PATH"], "CUTOVER_TERMINATION_LOG": str(log)}
    process = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=environ, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    return process.returncode or 0, out, err  # a patch on stdout, the outcome line beside it on stderr


async def piped(tool: tuple[str, ...], patch: bytes, cwd: Path) -> int:
    process = await asyncio.create_subprocess_exec(*tool, cwd=cwd, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await process.communicate(patch)
    assert process.returncode == 0, f"{' '.join(tool)}: {err.decode()}"
    return process.returncode


@pytest.mark.parametrize("name", EDITABLE)
async def test_the_printed_diff_applies_with_git_apply(name: str, tmp_path: Path) -> None:
    original = (FILES / name).read_bytes()
    expected = yaml_edit.edit_selector(original.decode(), document=plan.GitDocument("Service", "chat"),
                                      selector_path="spec.selector", selector=WANTED).after.encode()
    (tmp_path / "k8s").mkdir(parents=True)
    (tmp_path / "k8s" / name).write_bytes(original)
    code, out, err = await run(sys.executable, "-m", "cutover", "diff", "--file", f"k8s/{name}", "--selector", SELECTOR,
                          cwd=tmp_path)
    assert code == 0, out.decode()
    assert out.startswith(f"--- a/k8s/{name}\n".encode())
    assert err.rstrip().endswith(b"all inside spec.selector")  # the outcome line, beside the patch
    await piped(("git", "apply", "-"), out, tmp_path)  # strict about context, whitespace and the final newline
    assert (tmp_path / "k8s" / name).read_bytes() == expected  # byte for byte: CR, final newline and all


def test_what_changes_is_the_selector_of_the_one_service() -> None:
    for name in EDITABLE:
        text = (FILES / name).read_text()
        edit = yaml_edit.edit_selector(text, document=plan.GitDocument("Service", "chat"),
                                      selector_path="spec.selector", selector=WANTED)
        assert yaml_edit.read_selector(edit.after, document=plan.GitDocument("Service", "chat"),
                                      selector_path="spec.selector") == WANTED, name
    assert yaml_edit.services((FILES / "list.yaml").read_text()) == ["chat"]


async def test_an_aliased_selector_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "svc.yaml").write_bytes((FILES / "aliased.yaml").read_bytes())
    code, out, _ = await run(sys.executable, "-m", "cutover", "diff", "--file", "svc.yaml", "--selector", SELECTOR,
                          cwd=tmp_path)
    assert code == 2 and b"document 1 uses YAML anchors or aliases" in out and b"cause selector_alias" in out


async def test_a_file_with_two_services_needs_a_document(tmp_path: Path) -> None:
    two = (FILES / "kustomize-patch.yaml").read_text() + "---\n" + (FILES / "kustomize-patch.yaml").read_text()
    (tmp_path / "two.yaml").write_text(two.replace("name: chat", "name: other", 1))
    code, out, _ = await run(sys.executable, "-m", "cutover", "diff", "--file", "two.yaml", "--selector", SELECTOR,
                          cwd=tmp_path)
    assert code == 2 and b"expected exactly one Service, found 2 (other, chat)" in out
    code, out, _ = await run(sys.executable, "-m", "cutover", "diff", "--file", "two.yaml", "--selector", SELECTOR,
                          "--document", "Service/chat", cwd=tmp_path)
    assert code == 0 and b"engine: candle" in out


# --- with a plan: what would be committed, for every git.source ---------------------------------------------

def checkout_of(tmp_path: Path, *examples: str) -> Path:
    """A checkout holding the named examples where their plans' git.path says (not a Git work tree)."""
    for name in examples:
        shutil.copytree(EXAMPLES / name, tmp_path / "manifests" / "examples" / name)
    return tmp_path


async def test_the_kustomize_diff_writes_the_target_less_what_the_build_adds(tmp_path: Path) -> None:
    """The overlay adds env: prod to the base's selector: the diff (run in this repository, a Git work tree) writes
    the base without it, and the overlay built after `git apply` selects exactly the plan's candle selector."""
    example = "manifests/examples/kustomize-overlay"
    code, out, _ = await run(sys.executable, "-m", "cutover", "--plan", f"{example}/plan.yaml", "diff", "--file",
                          f"{example}/base/service.yaml", "--to", "candle", cwd=ROOT, scratch=tmp_path)
    assert code == 0, out.decode()
    patch = out.decode()
    assert patch.startswith(f"--- a/{example}/base/service.yaml\n")
    assert "+    app.kubernetes.io/name: chat-candle\n" in patch and "env: prod" not in patch
    checkout = checkout_of(tmp_path, "kustomize-overlay")
    await piped(("git", "apply", "-"), out, checkout)
    built = await kustomize_build.build(checkout / example / "overlays" / "prod", where="prod")
    service = next(doc for doc in built if doc["kind"] == "Service")
    wanted = plan.load(EXAMPLES / "kustomize-overlay" / "plan.yaml")[0].backend("candle").selector
    assert service["spec"]["selector"] == dict(wanted)


async def test_the_helm_values_diff_writes_the_backends_git_value(tmp_path: Path) -> None:
    checkout = checkout_of(tmp_path, "helm-values")
    example = "manifests/examples/helm-values"
    code, out, _ = await run(sys.executable, "-m", "cutover", "--plan", f"{example}/plan.yaml", "diff", "--file",
                          f"{example}/values.yaml", "--to", "candle", cwd=checkout)
    assert code == 0, out.decode()
    assert "-engine: vllm" in out.decode() and "+engine: candle" in out.decode()
    await piped(("git", "apply", "-"), out, checkout)
    assert yaml_edit.read_value((checkout / example / "values.yaml").read_text(), value_path="engine") == "candle"


async def test_with_a_plan_the_patch_and_the_outcome_name_git_path(tmp_path: Path) -> None:
    """A copy of the file anywhere: the patch is for git.path, where `git apply` in the checkout applies it."""
    copy = tmp_path / "elsewhere.yaml"
    shutil.copyfile(EXAMPLES / "helm-values" / "values.yaml", copy)
    code, out, err = await run(sys.executable, "-m", "cutover", "--plan", str(EXAMPLES / "helm-values" / "plan.yaml"),
                          "diff", "--file", str(copy), "--to", "candle", cwd=tmp_path)
    assert code == 0, out.decode()
    lines = out.decode().splitlines()
    assert lines[0] == "--- a/manifests/examples/helm-values/values.yaml"
    outcome = err.decode().splitlines()[-1]
    assert "change in manifests/examples/helm-values/values.yaml" in outcome and "elsewhere" not in out.decode()


async def test_a_kustomize_diff_outside_its_checkout_says_where_to_run_it(tmp_path: Path) -> None:
    copy = tmp_path / "service.yaml"
    shutil.copyfile(EXAMPLES / "kustomize-overlay" / "base" / "service.yaml", copy)
    overlay = str(EXAMPLES / "kustomize-overlay" / "plan.yaml")
    code, out, _ = await run(sys.executable, "-m", "cutover", "--plan", overlay, "diff", "--file", str(copy), "--to",
                             "candle", cwd=tmp_path)
    assert code == 2
    assert b"must be git.path (manifests/examples/kustomize-overlay/base/service.yaml) inside one" in out


async def test_a_values_file_is_addressed_by_its_selector_path_alone(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("# chart values\nservice:\n  port: 80\n  selector:\n    app: chat-vllm  # the engine\n")
    code, out, _ = await run(sys.executable, "-m", "cutover", "diff", "--file", "values.yaml", "--selector-path",
                          "service.selector", "--selector", "app=chat-candle", cwd=tmp_path)
    assert code == 0, out.decode()
    await piped(("git", "apply", "-"), out, tmp_path)
    assert values.read_text() == (
        "# chart values\nservice:\n  port: 80\n  selector:\n    app: chat-candle  # the engine\n")


async def test_without_a_plan_the_hints_name_the_options_not_the_plan(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text("service:\n  port: 80\n")
    code, out, _ = await run(sys.executable, "-m", "cutover", "diff", "--file", "values.yaml", "--selector-path",
                          "service.selector", "--selector", "app=chat-candle", cwd=tmp_path)
    assert code == 2
    assert b"hint: check --selector-path" in out and b"plan" not in out.split(b"hint:")[1]


async def test_a_diff_from_a_selector_no_backend_names_says_so(tmp_path: Path) -> None:
    """The patch is made all the same (it is what would be committed), but a file whose selector is no backend's is
    the wrong file or a plan that does not match it: said on stderr, beside the patch."""
    service = (ROOT / "manifests" / "examples" / "llm-serving" / "workload" / "service.yaml").read_text()
    (tmp_path / "svc.yaml").write_text(service.replace("app.kubernetes.io/name: llm-reasoning\n",
                                                       "app.kubernetes.io/name: someone-else\n", 1))
    plan_file = EXAMPLES / "llm-serving" / "workload" / "plan-configmap.yaml"
    code, out, err = await run(sys.executable, "-m", "cutover", "--plan", str(plan_file), "diff", "--file", "svc.yaml",
                               "--to", "candle", cwd=tmp_path)
    assert code == 0, err.decode()
    assert out.startswith(b"--- a/") and b"+    app.kubernetes.io/name: llm-reasoning-candle" in out
    assert b'"event": "diff.selector_unknown"' in err and b"someone-else" in err
    _, _, quiet = await run(sys.executable, "-m", "cutover", "--plan", str(plan_file), "diff", "--file",
                            str(ROOT / "manifests" / "examples" / "llm-serving" / "workload" / "service.yaml"),
                            "--to", "candle", cwd=tmp_path)
    assert b"diff.selector_unknown" not in quiet  # the example's own file: vllm's selector


async def test_nothing_to_change_is_said_once(tmp_path: Path) -> None:
    """The newcomer's P6: the message came twice, as a line and as the outcome line."""
    (tmp_path / "svc.yaml").write_bytes((FILES / "list.yaml").read_bytes())
    current = ",".join(f"{key}={value}" for key, value in yaml_edit.read_selector(
        (FILES / "list.yaml").read_text(), document=plan.GitDocument("Service", "chat"),
        selector_path="spec.selector").items())
    code, out, err = await run(sys.executable, "-m", "cutover", "diff", "--file", "svc.yaml", "--selector", current,
                               cwd=tmp_path)
    assert code == 0 and (out + err).count(b"nothing to change") == 1, out + err
