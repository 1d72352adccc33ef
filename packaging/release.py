"""The release's artifacts, from one version (src/cutover/__init__.py): `make release` renders what a cluster
applies without kustomize or a Git checkout, and refuses to when the docs point anywhere else.

- dist/<version>/install.yaml: manifests/base (the namespace, the ServiceAccount, its Role, the admission policies,
  the NetworkPolicies), for cutover's own Application or `kubectl apply -f`;
- dist/<version>/capacity.yaml: manifests/capacity, the optional ClusterRole an administrator applies;
- dist/<version>/image.yaml: manifests/base/image.yaml as it is, beside install.yaml in a kustomization (the pod
  policy's image name comes from it);
- checked first: every `?ref=v…` in README.md and docs/ is this version's tag, and the hooks' and the CronJobs'
  kustomizations set the image's tag to this version, under the image's one fully qualified name (IMAGE).

The workload's parts (manifests/workload, hooks/, jobs/) stay kustomize Components: they take a workload's names.

Usage: python packaging/release.py [OUT_DIR]   (default: dist). Exit 2 naming what disagrees; nothing written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RENDERED = {"install.yaml": "manifests/base", "capacity.yaml": "manifests/capacity"}
# copied as they are: image.yaml is local-config, so install.yaml (rendered) holds no trace of it, and a kustomization
# over install.yaml needs it for the replacement that gives the pod policy the image's name (docs/install.md, step 1)
COPIED = {"image.yaml": "manifests/base/image.yaml"}
# The name every manifest gives the image, fully qualified so that it never resolves by accident: a bare `cutover`
# is Docker Hub's `library/cutover`, someone else's if anyone's; `.invalid` is reserved (RFC 2606), so a rename
# forgotten is ErrImagePull at once. Users rename it once (docs/install.md, step 1); no release publishes an image.
IMAGE = "cutover.invalid/cutover"


def version() -> str:
    found = re.search(r'^__version__ = "([^"]+)"', (ROOT / "src" / "cutover" / "__init__.py").read_text(), re.M)
    if found is None:
        raise SystemExit("release.py: src/cutover/__init__.py sets no __version__")
    return found.group(1)


def disagreements(release: str) -> list[str]:
    """Every place that names another release than `release`."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for ref in re.findall(r"\?ref=(v[^'\"\s)`]+)", line):
                if ref not in (f"v{release}", "v<version>"):
                    found.append(f"{path.relative_to(ROOT)}:{number}: ?ref={ref}, expected v{release}")
    for folder in ("hooks", "jobs"):
        text = (ROOT / folder / "kustomization.yaml").read_text()
        if f'{{name: {IMAGE}, newTag: "{release}"}}' not in text:
            found.append(f"{folder}/kustomization.yaml: no `{{name: {IMAGE}, newTag: \"{release}\"}}` in images:")
    return found


def render(directory: str) -> str:
    kustomize = next((tool for tool in (["kustomize", "build"], ["kubectl", "kustomize"]) if shutil.which(tool[0])),
                     None)
    if kustomize is None:
        raise SystemExit("release.py: no kustomize (or kubectl) on PATH: `make release` puts the tier's on it")
    done = subprocess.run([*kustomize, str(ROOT / directory)], capture_output=True, text=True, check=False)  # noqa: S603 -- our manifests
    if done.returncode != 0:
        raise SystemExit(f"release.py: kustomize build {directory} failed: {done.stderr.strip()}")
    return done.stdout


def main(argv: list[str]) -> int:
    release = version()
    if wrong := disagreements(release):
        print(f"release.py: {len(wrong)} place(s) name another release than {release}:", *wrong, sep="\n  ",
              file=sys.stderr)
        return 2
    out = Path(argv[1] if len(argv) > 1 else ROOT / "dist") / release
    rendered = {name: render(directory) for name, directory in RENDERED.items()}  # all, before writing any
    out.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.items():
        header = f"# cutover {release}: {RENDERED[name]}, rendered by `make release` (packaging/release.py)\n"
        (out / name).write_text(header + text)
        print(out / name)
    for name, source in COPIED.items():
        (out / name).write_text(f"# cutover {release}: {source}, as it is\n" + (ROOT / source).read_text())
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
