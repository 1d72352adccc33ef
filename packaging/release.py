"""The release's artifacts, from one version (src/cutover/__init__.py): `make release` renders what a cluster
applies without kustomize or a Git checkout, and refuses to when the docs point anywhere else.

- dist/<version>/install.yaml: manifests/base (the namespace, the ServiceAccount, its Role, the admission policies,
  the NetworkPolicies), for cutover's own Application or `kubectl apply -f`;
- dist/<version>/capacity.yaml: manifests/capacity, the optional ClusterRole an administrator applies;
- dist/<version>/image.yaml: manifests/base/image.yaml as it is, beside install.yaml in a kustomization (the pod
  policy's image name comes from it);
- dist/<version>/cutover-<version>.tar.gz: the directories docs/install.md's URLs name (manifests/base, namespace,
  workload, capacity, hooks, jobs) as files under cutover-<version>/, for a render without network (unpacked into
  the user's repository and named by relative path; the workload's parts stay kustomize Components, which take a
  workload's names); the same bytes from the same tree (sorted, no owners, no times);
- dist/<version>/SHA256SUMS: the sums of the files above, as `sha256sum --check` reads them;
- checked first: every `?ref=v…` in README.md and docs/ is this version's tag, and the hooks' and the CronJobs'
  kustomizations set the image's tag to this version, under the image's one fully qualified name (IMAGE).

Usage: python packaging/release.py [OUT_DIR]   (default: dist). Exit 2 naming what disagrees; nothing written.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RENDERED = {"install.yaml": "manifests/base", "capacity.yaml": "manifests/capacity"}
# copied as they are: image.yaml is local-config, so install.yaml (rendered) holds no trace of it, and a kustomization
# over install.yaml needs it for the replacement that gives the pod policy the image's name (docs/install.md, step 1)
COPIED = {"image.yaml": "manifests/base/image.yaml"}
ARCHIVED = ("manifests/base", "manifests/namespace", "manifests/workload", "manifests/capacity", "hooks", "jobs",
            "fleet")
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
    archive = out / f"cutover-{release}.tar.gz"
    archive.write_bytes(archived(release))
    print(archive)
    written = [*RENDERED, *COPIED, archive.name]
    (out / "SHA256SUMS").write_text("".join(f"{hashlib.sha256((out / name).read_bytes()).hexdigest()}  {name}\n"
                                            for name in written))
    print(out / "SHA256SUMS")
    return 0


def archived(release: str) -> bytes:
    """ARCHIVED under cutover-<release>/, byte for byte the same from the same tree: the entries sorted, no owner,
    no time (gzip's own included), mode 0644."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ARCHIVED:
            for path in sorted((ROOT / directory).rglob("*")):
                if not path.is_file() or "__pycache__" in path.parts:
                    continue
                info = tarfile.TarInfo(f"cutover-{release}/{path.relative_to(ROOT)}")
                data = path.read_bytes()
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
