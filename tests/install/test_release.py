"""A release people can point at: one version (src/cutover/__init__.py), printed by `cutover --version`, set as the
image's tag by every shipped kustomization that names the image, told in the CHANGELOG; the LICENSE file is the
license pyproject names."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

import cutover
from cutover.sources import kustomize_build

ROOT = Path(__file__).resolve().parents[2]


def test_cutover_version_prints_the_one_version() -> None:
    done = subprocess.run([sys.executable, "-m", "cutover", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"cutover {cutover.__version__}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]  # read from the package, not repeated


def test_every_manifest_names_the_image_through_kustomize_images_at_that_version() -> None:
    files = [*ROOT.glob("hooks/*.yaml"), *ROOT.glob("jobs/*.yaml")]
    images = [line.split("image:", 1)[1].split("#", 1)[0].strip() for path in files
              for line in path.read_text().splitlines() if line.strip().startswith("image:")]
    image = _release_script().IMAGE
    assert len(images) == 6 and set(images) == {image}  # no tag written by hand anywhere
    assert "." in image.split("/")[0]  # a registry's host: never Docker Hub's library by default
    for folder in ("hooks", "jobs"):
        kustomization = YAML(typ="safe").load((ROOT / folder / "kustomization.yaml").read_text())
        assert kustomization["images"] == [{"name": image, "newTag": cutover.__version__}], folder


def test_the_changelog_tells_this_version_and_the_license_is_pyprojects() -> None:
    assert f"## {cutover.__version__}" in (ROOT / "CHANGELOG.md").read_text()
    license_text = (ROOT / "LICENSE").read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert license_text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in license_text


def _release_script() -> Any:
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import release
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    return release


def test_make_release_renders_the_install_files_at_the_one_version(tmp_path: Path) -> None:
    """`make release`: what a cluster applies without kustomize or a checkout, rendered from the same manifests the
    tests render; and the docs' `?ref=` tags are this version's (a newcomer found every one of them failing)."""
    release = _release_script()
    assert release.disagreements(cutover.__version__) == []
    assert release.main(["release.py", str(tmp_path)]) == 0
    install = list(YAML(typ="safe").load_all((tmp_path / cutover.__version__ / "install.yaml").read_text()))
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in install}
    assert ("Namespace", "cutover") in kinds and ("ServiceAccount", "cutover") in kinds
    assert ("ValidatingAdmissionPolicy", "cutover-pod-pinned") in kinds
    assert not {kind for kind, _ in kinds} & {"CronJob", "Job", "ConfigMap"}  # the workloads' parts stay theirs
    (policy,) = [doc for doc in install if doc["metadata"]["name"] == "cutover-pod-pinned"
                 and doc["kind"] == "ValidatingAdmissionPolicy"]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["image"] == f"'{release.IMAGE}'"  # unrenamed, it admits the default name the Jobs carry
    shipped = YAML(typ="safe").load((tmp_path / cutover.__version__ / "image.yaml").read_text())
    assert shipped["spec"]["containers"][0]["image"] == release.IMAGE
    capacity = list(YAML(typ="safe").load_all((tmp_path / cutover.__version__ / "capacity.yaml").read_text()))
    assert {doc["kind"] for doc in capacity} == {"ClusterRole", "ClusterRoleBinding"}


def test_install_yaml_and_image_yaml_stand_for_the_base(tmp_path: Path) -> None:
    """docs/install.md, "What is published": install.yaml and image.yaml in place of the base's URL (as the real
    tier installs cutover's Application), the example's kustomization otherwise as it is, the image renamed once:
    it builds, every Role in its place, and the pod policy names the renamed image by its digest."""
    release = _release_script()
    assert release.main(["release.py", str(tmp_path / "dist")]) == 0
    files = tmp_path / "dist" / cutover.__version__
    overlay = tmp_path / "cutover"
    (overlay / "llm-serving").mkdir(parents=True)
    (tmp_path / "image").mkdir()
    for name in ("install.yaml", "image.yaml"):
        (overlay / name).write_text((files / name).read_text())
    digest = f"sha256:{'c' * 64}"
    (tmp_path / "image" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nimages:\n  - {name: cutover.invalid/cutover, "
        f"newName: registry.example.com/platform/cutover, digest: '{digest}'}}\n")
    example = ROOT / "manifests" / "examples" / "llm-serving" / "cutover"
    (overlay / "llm-serving" / "workload.yaml").write_text((example / "llm-serving" / "workload.yaml").read_text())
    workload_dir = YAML(typ="safe").load((example / "llm-serving" / "kustomization.yaml").read_text())
    YAML().dump({"resources": ["workload.yaml"],
                 "components": [os.path.relpath(ROOT / "manifests" / "workload", overlay / "llm-serving")],
                 "replacements": workload_dir["replacements"]}, overlay / "llm-serving" / "kustomization.yaml")
    top = (example / "kustomization.yaml").read_text()
    assert top.count("  - ../../../base\n") == 1
    release_files = "  - install.yaml\n  - image.yaml\n"
    (overlay / "kustomization.yaml").write_text(top.replace("  - ../../../base\n", release_files))
    done = subprocess.run([*kustomize_build.require(), str(overlay)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    docs = [doc for doc in YAML(typ="safe").load_all(done.stdout) if doc]
    placed = {(doc["kind"], doc["metadata"]["name"]): doc["metadata"].get("namespace") for doc in docs}
    assert placed[("Role", "cutover")] == "llm-serving" and placed[("Role", "cutover-holders")] == "cutover"
    (policy,) = [doc for doc in docs if doc["metadata"]["name"] == "cutover-pod-pinned"
                 and doc["kind"] == "ValidatingAdmissionPolicy"]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["image"] == f"'registry.example.com/platform/cutover@{digest}'"
    assert not [doc for doc in docs if doc["kind"] == "Image"]  # local-config: never applied


def test_the_release_archive_is_the_same_bytes_from_the_same_tree(tmp_path: Path) -> None:
    """Its SHA256SUMS mean something only if a second `make release` of the tag makes the same archive."""
    release = _release_script()
    assert release.archived(cutover.__version__) == release.archived(cutover.__version__)
    assert release.main(["release.py", str(tmp_path)]) == 0
    sums = (tmp_path / cutover.__version__ / "SHA256SUMS").read_text().splitlines()
    done = subprocess.run(["sha256sum", "--check", "--strict"], input="\n".join(sums) + "\n", text=True,
                          cwd=tmp_path / cutover.__version__, capture_output=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_doc_that_names_another_release_is_refused_before_anything_is_written() -> None:
    release = _release_script()
    wrong = release.disagreements("9.9.9")
    assert any("docs/install.md" in line and "expected v9.9.9" in line for line in wrong)
    assert any(line.startswith("hooks/kustomization.yaml") for line in wrong)


def test_the_extras_name_this_distribution_never_pypis_cutover() -> None:
    """PyPI's `cutover` is someone else's project: a self-reference by the old name (`cutover[demo]` in the test
    extra) installed it over ours in a fresh venv, and every import of `cutover.plan` failed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "llm-cutover"
    wanted = [item for items in project["optional-dependencies"].values() for item in items]
    wanted += project["dependencies"]
    assert not [item for item in wanted if item.split("[")[0].split("=")[0].split(">")[0].strip() == "cutover"]
    assert "llm-cutover[demo]" in [item.split("#")[0].strip() for item in project["optional-dependencies"]["test"]]
