"""docs/install.md's kustomizations, built as the page writes them (the review's B1: the "More Services" layout,
followed literally, did not build). Every YAML block whose first line names a file (`# cutover/kustomization.yaml`)
is written into a repository of the test's, a block headed `# <file>, added:` merged into the file before it; the
files the page does not show are the example's it describes; every URL of a release is replaced by the release's
own archive (`make release`), unpacked into `vendor/` and named by relative path, as the page's "without network"
says. Each Application's directory is then built by real kustomize with no network (cutover's own offline build:
a remote resource left over fails it)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import cutover
from cutover.sources import kustomize_build

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "install.md"
EXAMPLE = ROOT / "manifests" / "examples" / "llm-serving"
BLOCK = re.compile(r"```yaml\n# (?P<path>[\w./-]+\.yaml)(?P<rest>[^\n]*)\n(?P<body>.*?)```", re.S)
RELEASE_URL = re.compile(r"https://github\.com/<org>/cutover//(?P<dir>[\w/.-]+)\?ref=v(?P<version>[\w.]+)")
# what the page names but does not show: the example's own files
SHOWN_ELSEWHERE = {"chat-prod/hooks/plan-configmap.yaml": EXAMPLE / "workload" / "plan-configmap.yaml"}


def _release(tmp_path: Path) -> Path:
    """`make release`'s archive, unpacked where the page says: vendor/cutover-<version>/."""
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import release
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    assert release.main(["release.py", str(tmp_path / "dist")]) == 0
    files = tmp_path / "dist" / cutover.__version__
    sums = dict(line.split()[::-1] for line in (files / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {"install.yaml", "capacity.yaml", "image.yaml", f"cutover-{cutover.__version__}.tar.gz"}
    vendor = tmp_path / "repo" / "vendor"
    vendor.mkdir(parents=True)
    with tarfile.open(files / f"cutover-{cutover.__version__}.tar.gz") as tar:
        tar.extractall(vendor, filter="data")
    return tmp_path / "repo"


def _merged(into: Any, added: Any) -> Any:
    if isinstance(into, dict) and isinstance(added, dict):
        return {**into, **{key: _merged(into.get(key), value) for key, value in added.items()}}
    if isinstance(into, list) and isinstance(added, list):
        return into + added
    return added


def _write(repo: Path, path: str, body: str, *, added: bool) -> None:
    target = repo / path

    def vendored(found: re.Match[str]) -> str:
        assert found["version"] == cutover.__version__, found[0]
        return os.path.relpath(repo / "vendor" / f"cutover-{found['version']}" / found["dir"], target.parent)

    body = RELEASE_URL.sub(vendored, body)
    target.parent.mkdir(parents=True, exist_ok=True)
    if added:
        yaml = YAML(typ="safe")
        YAML().dump(_merged(yaml.load(target.read_text()), yaml.load(body)), target)
    else:
        target.write_text(body)


def _fill(repo: Path) -> None:
    """The files a shown kustomization lists that the page leaves to the example."""
    for kustomization in repo.rglob("kustomization.yaml"):
        if "vendor" in kustomization.relative_to(repo).parts:
            continue
        spec = YAML(typ="safe").load(kustomization.read_text())
        for name in spec.get("resources", []):
            wanted = kustomization.parent / name
            if wanted.exists() or "://" in name:
                continue
            relative = str(wanted.relative_to(repo))
            source = SHOWN_ELSEWHERE.get(relative) or EXAMPLE / relative
            assert source.is_file(), f"{kustomization.relative_to(repo)} lists {name}: neither shown nor an example's"
            wanted.write_text(source.read_text())


def _built(repo: Path, directory: str) -> list[dict[str, Any]]:
    return asyncio.run(kustomize_build.build(repo / directory, where=directory))


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The page's blocks in order; built once at the end of step 3 (one workload) and once at the end."""
    tmp_path = tmp_path_factory.mktemp("layouts")
    repo = _release(tmp_path)
    text = PAGE.read_text()
    step_4 = text.index("\n## 4. ")
    built: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for found in BLOCK.finditer(text):
        if "one workload" not in built and found.start() > step_4:
            _fill(repo)
            built["one workload"] = {"cutover": _built(repo, "cutover")}
        _write(repo, found["path"], found["body"], added=found["rest"].startswith(", added:"))
    _fill(repo)
    built["more services"] = {name: _built(repo, name) for name in ("cutover", "workload", "chat-prod/hooks")}
    return built


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind and doc["metadata"]["name"] == name]
    return found


def test_the_page_shows_whole_files_only() -> None:
    """No `...` or "as in step 3" left for a reader to guess: each block is a file, or says what it adds."""
    for found in BLOCK.finditer(PAGE.read_text()):
        assert "..." not in found["body"] and "…" not in found["body"].replace("sha256:<…>", ""), found["path"]
        assert found["rest"] in ("", ", added:") or found["rest"].startswith(", named under"), found[0][:80]


def test_one_workload_as_step_3_writes_it(layouts: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    docs = layouts["one workload"]["cutover"]
    assert _named(docs, "Role", "cutover")["metadata"]["namespace"] == "llm-serving"
    policy = _named(docs, "ValidatingAdmissionPolicy", "cutover-pod-pinned")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["image"] == "'registry.example.com/platform/cutover@sha256:<the digest>'"
    assert not [doc for doc in docs if doc["kind"] in ("Workload", "Image")]  # local-config: never applied


def test_more_services_as_the_page_writes_it(layouts: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    cutover_app = layouts["more services"]["cutover"]
    first, further = _named(cutover_app, "Role", "cutover"), _named(cutover_app, "Role", "cutover-chat-prod")
    assert first["metadata"]["namespace"] == further["metadata"]["namespace"] == "llm-serving"
    assert ["cutover-reasoning-long-predictor"] in [rule.get("resourceNames") for rule in first["rules"]]
    assert ["cutover-chat-predictor"] in [rule.get("resourceNames") for rule in further["rules"]]
    binding = _named(cutover_app, "RoleBinding", "cutover-chat-prod")
    assert binding["subjects"][0]["namespace"] == "cutover-chat-prod"
    assert {doc["metadata"]["name"] for doc in cutover_app if doc["kind"] == "Namespace"} == {
        "cutover", "cutover-chat-prod"}
    hooks = layouts["more services"]["chat-prod/hooks"]
    plan = _named(hooks, "ConfigMap", "cutover-plan-chat-prod")
    assert plan["metadata"]["namespace"] == "cutover-chat-prod"
    images = {container["image"] for doc in hooks + layouts["more services"]["workload"]
              if doc["kind"] in ("Job", "CronJob")
              for container in (doc["spec"]["template"]["spec"] if doc["kind"] == "Job" else
                                doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])["containers"]}
    assert images == {"registry.example.com/platform/cutover@sha256:<the digest>"}  # what the policy admits
    gate = _named(layouts["more services"]["workload"], "Job", "cutover-presync-llm-serving")
    # the page's patches of the gate ("Sync waves and deadlines", "A switch sooner") land on it
    assert gate["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "-2000"
    assert gate["spec"]["ttlSecondsAfterFinished"] == 0
