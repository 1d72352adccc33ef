"""Drop from an installed site-packages what cutover never loads, to keep the image small.

- kubernetes/aio: the package's asyncio client (~42 MB); cutover uses the synchronous ApiClient and reads
  watch streams with httpx.
- kubernetes/client/api and kubernetes/client/models: the generated API classes and models (~33 MB). cutover
  calls ApiClient.param_serialize/call_api and reads raw JSON; it never builds or deserializes a model. Both
  packages' __init__ files import their members lazily (kubernetes 37), so the empty packages still import.
- kubernetes/__init__.py: rewritten to set the version alone. The package's own imports every subpackage (the
  kubeconfig loader, the dynamic client, watch, stream, leader election, informers: 0.2 to 0.4 s of a hook's
  start) for the one cutover uses (kubernetes.client; a person's kubeconfig is loaded where it is read).
- aiohttp and what only it needs: pulled in by kubernetes/aio alone (the simulated world's use of it is the
  demo extra's, not the image's).
- cutover/demo: the simulated world behind `cutover demo`. The Dockerfile's context leaves it out already
  (.dockerignore); this keeps an image built from an installed wheel just as free of it.

Usage: python packaging/prune.py SITE_PACKAGES. tests/install/test_image.py runs cutover against a pruned tree and
checks that none of it is ever imported.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

TREES = ("kubernetes/aio", "cutover/demo", "aiohttp", "aiohappyeyeballs", "aiosignal", "frozenlist", "multidict",
         "propcache", "yarl")
GENERATED = ("kubernetes/client/api", "kubernetes/client/models")


def prune(site: Path) -> int:
    """Remove the trees and the generated modules (keeping their packages' __init__.py); bytes freed."""
    freed = 0
    for name in TREES:
        for path in [site / name, *site.glob(f"{name.split('/')[-1]}-*.dist-info")] if "/" not in name else \
                [site / name]:
            if path.exists():
                freed += _size(path)
                shutil.rmtree(path)
    freed += _lazy_package(site / "kubernetes" / "__init__.py")
    for name in GENERATED:
        for module in (site / name).glob("*.py"):
            if module.name != "__init__.py":
                freed += module.stat().st_size
                module.unlink()
        shutil.rmtree(site / name / "__pycache__", ignore_errors=True)
    return freed


def _lazy_package(init: Path) -> int:
    """kubernetes/__init__.py up to its subpackage imports (its license, __project__ and __version__ kept)."""
    if not init.is_file():
        return 0
    text = init.read_text()
    kept = text[:text.index("from . import ")] if "from . import " in text else text
    init.write_text(kept.rstrip() + "\n# the subpackages import where they are used (packaging/prune.py)\n")
    return len(text) - len(kept)


def _size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def main(argv: list[str]) -> int:
    """Prune SITE_PACKAGES; exit 2, pruning nothing, where it holds no installed cutover and kubernetes (a wrong path
    would otherwise ship an unpruned image after printing "pruned 0 MB")."""
    if len(argv) != 2:
        print("usage: prune.py SITE_PACKAGES", file=sys.stderr)
        return 2
    site = Path(argv[1])
    installed = ("cutover/__init__.py", "kubernetes/client/api/__init__.py")
    missing = [name for name in installed if not (site / name).is_file()]
    if missing:
        print(f"prune.py: {site} is not the site-packages cutover was installed into: no {', '.join(missing)}",
              file=sys.stderr)
        return 2
    print(f"pruned {prune(site) / 1e6:.0f} MB from {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
