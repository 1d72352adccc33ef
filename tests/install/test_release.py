"""A release people can point at: one version (src/cutover/__init__.py), printed by `cutover --version`, set as the
image's tag by every shipped kustomization that names the image, told in the CHANGELOG; the LICENSE file is the
license pyproject names."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from ruamel.yaml import YAML

import cutover

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
    assert len(images) == 6 and set(images) == {"cutover"}  # no tag written by hand anywhere
    for folder in ("hooks", "jobs"):
        kustomization = YAML(typ="safe").load((ROOT / folder / "kustomization.yaml").read_text())
        assert kustomization["images"] == [{"name": "cutover", "newTag": cutover.__version__}], folder


def test_the_changelog_tells_this_version_and_the_license_is_pyprojects() -> None:
    assert f"## {cutover.__version__}" in (ROOT / "CHANGELOG.md").read_text()
    license_text = (ROOT / "LICENSE").read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert license_text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in license_text
