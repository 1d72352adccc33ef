"""The images the tier's pod policy admits, by digest, as e2e/fixtures/cutover's `images:` names them (the policy
admits an image beside the Secrets by a digest the operator lists, never a tag). The digests stand for the two
targets `make image` builds; no registry serves them: in image mode the shim runs the built ones."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cutover" / "kustomization.yaml"


def _images() -> dict[str, str]:
    spec = YAML(typ="safe").load(_FIXTURE.read_text())
    return {entry["name"]: f"{entry.get('newName', entry['name'])}@{entry['digest']}" for entry in spec["images"]}


IMAGE = _images()["cutover.invalid/cutover"]  # the default target (cutover:dev in image mode)
IMAGE_GIT = _images()["cutover.invalid/cutover-also"]  # the with-git target, the policy's `also` (cutover:dev-git)
